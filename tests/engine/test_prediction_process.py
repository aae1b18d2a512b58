"""The prediction process kept warm for Try It: the model loaded once for many requests, a
crash said in one line and the process started again by the next prediction."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.prediction import PredictionError, PredictionProcess
from support.distloop_testing import example_data, model_run_folder

ROW = ",".join(["0.5"] * 8)


@pytest.mark.slow
def test_one_process_answers_every_request_and_a_crash_is_one_line_then_a_restart(
    tmp_path: Path,
) -> None:
    run_dir = model_run_folder(tmp_path / "run", example_data("classification"))
    process = PredictionProcess(run_dir)
    try:
        first = process.predict(rows=[ROW])
        pid = process.pid
        assert pid is not None
        assert [p.input for p in first.predictions] == ["row 1"] and first.errors == []
        second = process.predict(rows=["1,2", ROW])
        assert process.pid == pid  # the same process: TensorFlow and the model loaded once
        assert second.predictions[0].classes == first.predictions[0].classes
        assert second.errors == ["row 1: has 2 value(s); the model takes 8 feature(s)"]

        os.kill(pid, signal.SIGKILL)
        with pytest.raises(PredictionError) as crashed:
            process.predict(rows=[ROW])
        assert str(crashed.value) == (
            f"{run_dir}: the prediction process was killed by SIGKILL (the system also does "
            "this when memory runs out); the next prediction starts it again"
        )
        third = process.predict(rows=[ROW])
        assert process.pid not in (None, pid)
        assert third.predictions[0].classes == first.predictions[0].classes
    finally:
        process.close()
    assert process.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow
def test_a_process_killed_partway_keeps_the_answers_it_gave(tmp_path: Path) -> None:
    """The inputs answered before the kill stay answered; one line names the rest."""
    run_dir = model_run_folder(tmp_path / "run", example_data("classification"))
    np.save(tmp_path / "first.npy", np.ones((2, 8), np.float32))
    slow = tmp_path / "slow.csv"
    slow.write_text(f"{ROW}\n" * 3_000_000)  # seconds of parsing: the kill lands in it
    process = PredictionProcess(run_dir)
    try:
        process.predict()  # loaded
        pid = process.pid
        assert pid is not None
        killer = threading.Timer(2.0, os.kill, (pid, signal.SIGKILL))
        killer.start()
        result = process.predict([tmp_path / "first.npy", slow, tmp_path / "after.csv"])
        killer.join()
    finally:
        process.close()
    assert [p.input for p in result.predictions] == [
        f"{tmp_path / 'first.npy'}[0]",
        f"{tmp_path / 'first.npy'}[1]",
    ]
    assert result.errors == [
        f"{run_dir}: the prediction process was killed by SIGKILL (the system also does this "
        f"when memory runs out); the next prediction starts it again; not answered: {slow}, "
        f"{tmp_path / 'after.csv'}"
    ]
