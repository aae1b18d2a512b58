"""A run's metrics.csv summarized from its tail and a kept scan (engine/csv_summary.py)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from distloop.engine import csv_summary
from distloop.engine.run_folder import MetricsWriter, format_loss, truncate_metrics
from distloop.engine.run_history import summarize
from hypothesis import given, settings
from hypothesis import strategies as st
from support.run_folders import big_metrics


def write_rows(path: Path, losses: list[float], first: int = 1) -> None:
    writer = MetricsWriter(path, None)
    steps = list(range(first, first + len(losses)))
    writer.write(steps, losses, [0.5 * s for s in steps])
    writer.close()


def test_peek_reads_the_tail_and_scan_keeps_its_place(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    big_metrics(path, 200_000)  # megabytes: more than the tail
    assert path.stat().st_size > 10 * csv_summary.TAIL_BYTES
    peeked = csv_summary.peek(path, "loss")
    loss = float(f"{1.0 + (200_000 % 97) / 97:.7g}")
    assert peeked.last == {"step": 200_000.0, "loss": loss, "elapsed_s": 200.0}
    assert peeked.best is None and not peeked.complete  # never scanned: the best is unknown
    scanned = csv_summary.scan(path, "loss")
    assert scanned.complete and scanned.best == {"step": 97.0, "loss": 1.0, "elapsed_s": 0.097}
    assert csv_summary.peek(path, "loss") == scanned  # unchanged: the kept scan
    # rows appended: the last row at once, the best of the scanned part until a scan
    with path.open("a", encoding="utf-8") as out:
        out.write("200001,0.5,200.001\n200002,0.75,200.002\n")
    peeked = csv_summary.peek(path, "loss")
    assert peeked.last is not None and peeked.last["step"] == 200_002
    assert peeked.best == scanned.best and not peeked.complete
    # the next scan reads only the new rows: a change in the scanned part goes unseen
    with path.open("r+b") as out:
        out.seek(len("step,loss,elapsed_s\n1,"))
        out.write(b"0")  # step 1's loss becomes 0.0..., lower than any
    os.utime(path)
    assert csv_summary.scan(path, "loss").best == {
        "step": 200_001.0,
        "loss": 0.5,
        "elapsed_s": 200.001,
    }


def test_a_rewritten_file_is_scanned_again(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    write_rows(path, [float(v) for v in range(100, 0, -1)])
    assert csv_summary.scan(path, "loss").best["loss"] == 1.0
    truncate_metrics(tmp_path, 50)  # a resume keeps the rows up to its checkpoint
    write_rows(path, [60.0 + v for v in range(60)], first=51)  # and trains them again
    summary = csv_summary.scan(path, "loss")
    assert summary.best["loss"] == 51.0 and summary.last["step"] == 110


def test_cut_rows_and_non_finite_losses_are_never_the_best(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text(
        "step,loss,elapsed_s\n1,2.0,0.1\n2,nan,0.2\n3,-inf,0.3\n4,1.5\n5,1.75,0.5\n6,0.1,", "utf-8"
    )
    summary = csv_summary.scan(path, "loss")
    assert summary.best == {"step": 5.0, "loss": 1.75, "elapsed_s": 0.5}
    assert summary.last == summary.best  # the crash's cut line is no row
    assert summary.smoothed == 1.75  # 4 rows (row 4 is short): the last one


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=0, max_size=40),
        min_size=1,
        max_size=6,
    ),
    scan_between=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_summaries_agree_with_reading_the_whole_file(
    tmp_path_factory, batches: list[list[float]], scan_between: list[bool]
) -> None:
    """Appended in batches, scanned between some of them: the same numbers as reading all."""
    run_dir = tmp_path_factory.mktemp("run")
    path = run_dir / "metrics.csv"
    step = 1
    for batch, scan in zip(batches, scan_between, strict=False):
        write_rows(path, batch, first=step)
        step += len(batch)
        if scan:
            csv_summary.scan(path, "loss")
    every = [float(format_loss(loss)) for batch in batches for loss in batch]
    late = every[-math.ceil(len(every) / 10) :] if every else []
    summary = summarize(run_dir)
    assert summary.steps == len(every)
    if late and all(math.isfinite(v) for v in late):
        assert summary.smoothed_loss == pytest.approx(math.fsum(late) / len(late))
    else:
        assert summary.smoothed_loss is None
    assert not summary.pending
