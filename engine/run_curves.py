"""Past runs' curves to compare: by which metric, against step or wall time (TF-free).

Everything here reads what the engine left on disk (``metrics.csv``, ``eval.csv``),
so a run compares the same whether it ran a minute ago in the window, last week from
the command line, or on another machine. The window draws them (``gui.runs.runs_panel``).
"""

from __future__ import annotations

import itertools
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from .csv_summary import peek
from .fileio import open_text
from .run_folder import (
    EVAL_FILE,
    METRICS_FILE,
    folder_stamp,
    loss_columns,
    read_eval,
)
from .run_history import RunSummary

STEP = "step"
WALL_TIME = "elapsed_s"
X_AXES = {STEP: "step", WALL_TIME: "wall time (s)"}
"""What compared runs can be drawn against: the axis's label by the column it comes from."""


def comparable_metrics(run_dir: Path) -> list[str]:
    """What a run can be compared by: ``loss``, each named loss, each ``val_*`` evaluation.

    Unreadable files offer nothing (comparing the run says why).
    """
    try:  # the headers only: a long run's files are gigabytes
        columns = list(peek(run_dir / METRICS_FILE, "loss").header)
        evaluated = (
            list(peek(run_dir / EVAL_FILE, "val_loss").header)
            if (run_dir / EVAL_FILE).is_file()
            else []
        )
    except OSError:
        return []
    named, _ = loss_columns(columns)
    return [
        *(["loss"] if "loss" in columns else []),
        *named,
        *(c for c in evaluated if c.startswith("val_")),
    ]


def metric_curve(
    run_dir: Path, metric: str, x_axis: str = STEP, progress: BytesRead | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(x, values) of one metric of a run, against the step or the wall time.

    Evaluations have no time of their own: theirs is the step's in ``metrics.csv``.
    A run without ``metric`` gives two empty arrays. ``metrics.csv`` is parsed as
    :func:`read_metric_columns` does (a run of 10^7 steps is gigabytes), telling
    ``progress`` as it goes. Raises OSError when a file cannot be read.
    """
    metrics = read_metric_columns(run_dir, progress)
    source: dict[str, NDArray[np.float64]] = metrics
    if metric.startswith("val_"):
        evaluated = read_eval(run_dir) if (run_dir / EVAL_FILE).is_file() else {}
        source = {name: np.array(column, dtype=np.float64) for name, column in evaluated.items()}
    steps = np.array(source.get("step", []) if metric in source else [], dtype=np.float64)
    values = np.array(source.get(metric, []), dtype=np.float64)
    if x_axis == STEP:
        return steps, values
    if source is metrics:
        return np.array(metrics.get(WALL_TIME, []), dtype=np.float64)[: len(values)], values
    known = np.array(metrics.get("step", []), dtype=np.float64)
    times = np.array(metrics.get(WALL_TIME, []), dtype=np.float64)
    if not len(known) or not len(steps):
        return np.empty(0), np.empty(0)
    return np.interp(steps, known, times), values


def legend_names(runs: list[RunSummary]) -> dict[Path, str]:
    """Each run's name, with when it was made added where two runs share one."""
    counts = Counter(run.name for run in runs)
    names: dict[Path, str] = {}
    for run in runs:
        if counts[run.name] == 1:
            names[run.path] = run.name
            continue
        stamp = folder_stamp(run.path)
        names[run.path] = f"{run.name} ({f'{stamp:%m-%d %H:%M:%S}' if stamp else run.path.name})"
    return names


READ_CHUNK_LINES = 200_000
"""Rows parsed at a time by :func:`read_metric_columns`: a progress report and a chance
to be cancelled every few tenths of a second, at a few megabytes of text each."""
BytesRead = Callable[[int, int], None]
"""Called with (bytes read so far, the file's size) after each chunk of rows."""


def read_metric_columns(
    run_dir: Path, progress: BytesRead | None = None
) -> dict[str, NDArray[np.float64]]:
    """``metrics.csv``'s columns as arrays, parsed in chunks with numpy.

    The rows :func:`engine.run_folder.read_metrics` keeps (a last line cut short by a
    crash, or any row of another width or not numbers, is left out), at a tenth of its
    time and memory: a run of 10^7 steps is 1.3 GB of text, which the csv module read in
    40 s into 10^7 Python floats a column. Raises OSError when the file cannot be read.
    """
    path = run_dir / METRICS_FILE
    size = path.stat().st_size
    chunks: list[NDArray[np.float64]] = []
    with open_text(path, "r", newline="") as handle:
        header = handle.readline().strip().split(",") if size else []
        while lines := list(itertools.islice(handle, READ_CHUNK_LINES)):
            chunks.append(_parsed_rows(lines, len(header)))
            if progress is not None:
                progress(handle.buffer.tell(), size)
    table = np.concatenate(chunks) if chunks else np.empty((0, len(header)))
    return {name: np.ascontiguousarray(table[:, i]) for i, name in enumerate(header)}


def _parsed_rows(lines: list[str], width: int) -> NDArray[np.float64]:
    """The chunk's rows of ``width`` numbers; the rows that are not are left out."""
    try:
        rows = np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2)
        if rows.shape[1] == width:
            return rows
    except ValueError:
        pass
    kept = []
    for line in lines:
        fields = line.strip().split(",")
        if len(fields) != width:
            continue
        try:
            kept.append([float(field) for field in fields])
        except ValueError:
            continue
    return np.array(kept, dtype=np.float64).reshape(-1, width)


def peak_envelope(
    x: NDArray[np.float64], values: NDArray[np.float64], buckets: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """At most ``2 * buckets`` points that draw as ``values`` against ``x`` does: each
    bucket of consecutive points as its lowest and highest value at its first ``x``.

    It is the plot's own "peak" downsampling (pyqtgraph's, which the live plot uses),
    done once where the whole run is, so a run too long to hand to the plot draws the
    same curve. NaN (a step without this loss) is skipped; a bucket of NaN stays NaN.
    """
    size = _bucket_size(len(x), buckets)
    if size == 1:
        return x, values
    table = _by_bucket(values, size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN bucket: a gap
        low, high = np.nanmin(table, axis=1), np.nanmax(table, axis=1)
    return np.repeat(x[::size], 2), np.column_stack([low, high]).ravel()


def bucket_means(
    x: NDArray[np.float64], values: NDArray[np.float64], buckets: int
) -> NDArray[np.float64]:
    """Each bucket's mean, twice, aligned with :func:`peak_envelope`'s points: how the
    plot downsamples a smoothed curve (by means), where peaks would draw its noise."""
    size = _bucket_size(len(x), buckets)
    if size == 1:
        return values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.repeat(np.nanmean(_by_bucket(values, size), axis=1), 2)


def _bucket_size(points: int, buckets: int) -> int:
    return 1 if points <= 2 * buckets else -(-points // buckets)


def _by_bucket(values: NDArray[np.float64], size: int) -> NDArray[np.float64]:
    padded = np.full(-(-len(values) // size) * size, np.nan)
    padded[: len(values)] = values
    return padded.reshape(-1, size)
