"""Past runs' curves to compare: by which metric, against step or wall time (TF-free).

Everything here reads what the engine left on disk (``metrics.csv``, ``eval.csv``),
so a run compares the same whether it ran a minute ago in the window, last week from
the command line, or on another machine. The window draws them (``gui.runs.runs_panel``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from .csv_summary import peek
from .run_folder import (
    EVAL_FILE,
    METRICS_FILE,
    folder_stamp,
    loss_columns,
    read_eval,
    read_metrics,
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
    run_dir: Path, metric: str, x_axis: str = STEP
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(x, values) of one metric of a run, against the step or the wall time.

    Evaluations have no time of their own: theirs is the step's in ``metrics.csv``.
    A run without ``metric`` gives two empty arrays. Raises OSError when a file
    cannot be read.
    """
    metrics = read_metrics(run_dir)
    if metric.startswith("val_"):
        source = read_eval(run_dir) if (run_dir / EVAL_FILE).is_file() else {}
    else:
        source = metrics
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
