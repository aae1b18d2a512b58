"""The process that reads a past run's curves for the plot (no Qt here: it is imported there).

A run of 10^7 steps keeps 1.3 GB of ``metrics.csv``; reading it in the window's thread
froze the window for 35-41 s, and in a thread of the window's process the parse and the
arrays' making hold the interpreter lock for long stretches. Here it is read in a process
of its own (as :mod:`gui.files.folder_scan_worker` scans data folders), smoothed there at
full resolution, and cut to the points the plot draws anyway: each bucket of steps as its
lowest and highest loss (the plot's own peak downsampling, :func:`engine.run_curves.peak_envelope`),
the smoothed curves by their means. What comes back is a few megabytes at most.

Runs compared by a metric (:class:`ComparedRuns`) are read here too, for the same reason:
one of 10^7 steps froze the window as long when compared as when drawn.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...engine.run_curves import (
    STEP,
    BytesRead,
    bucket_means,
    metric_curve,
    peak_envelope,
    read_metric_columns,
)
from ...engine.run_folder import EVAL_FILE, METRICS_FILE, loss_columns, read_eval
from ..run.series import Smoother

DRAWN_BUCKETS = 100_000
"""Buckets a long run is cut to: 200,000 points, fifty times a wide plot's pixels, so a
zoom of up to fifty times still draws every step's peak, and a frame stays fast."""

WORKER_NICENESS = 10
"""The reading yields the CPU to the window (on two busy cores it took the window's share,
and the window's timers ran late by the reading's slices)."""

Curve = tuple[NDArray[np.float64], NDArray[np.float64]]
"""(values, smoothed values) at the drawn steps."""


@dataclass(frozen=True)
class DrawnRun:
    """A past run's curves as the plot draws them."""

    steps: NDArray[np.float64]
    loss: Curve
    replicas: list[Curve] = field(default_factory=list)
    """Each replica's own mean loss (its share times the replicas), as the live plot has it."""
    named: dict[str, Curve] = field(default_factory=dict)
    evaluations: tuple[NDArray[np.float64], NDArray[np.float64]] = (np.empty(0), np.empty(0))
    """(steps, val_loss) of every evaluation."""
    recorded_steps: int = 0
    """The steps ``metrics.csv`` holds (``steps`` has fewer points for a long run)."""


def read_drawn_run(
    run_dir: Path, weight: float, progress: Any = None, buckets: int = DRAWN_BUCKETS
) -> DrawnRun:
    """The run's curves, smoothed with ``weight``; raises OSError when its files cannot be
    read. ``progress(bytes read, bytes in all)`` is told as ``metrics.csv`` is read."""
    columns = read_metric_columns(run_dir, progress)
    steps = columns.get("step", np.empty(0))
    named_columns, replica_columns = loss_columns(columns)

    def curve(values: NDArray[np.float64]) -> Curve:
        smoothed = Smoother(weight).extend(values)
        return peak_envelope(steps, values, buckets)[1], bucket_means(steps, smoothed, buckets)

    shares = len(replica_columns)
    drawn_steps = peak_envelope(steps, steps, buckets)[0]
    return DrawnRun(
        steps=drawn_steps,
        loss=curve(columns.get("loss", np.full(len(steps), np.nan))),
        replicas=[curve(columns[name] * shares) for name in replica_columns],
        named={name: curve(columns[name]) for name in named_columns},
        evaluations=_evaluations(run_dir),
        recorded_steps=len(steps),
    )


@dataclass(frozen=True)
class DrawnRunRequest:
    """One run to draw as the plot's own curves, smoothed with ``weight``."""

    run_dir: Path
    weight: float

    def read(self, progress: BytesRead) -> DrawnRun:
        return read_drawn_run(self.run_dir, self.weight, progress)


ComparedCurve = tuple[NDArray[np.float64], NDArray[np.float64]] | str
"""(x, values) of a compared run, cut to buckets as a drawn run's loss; or why it cannot
be read, in one line."""


@dataclass(frozen=True)
class ComparedRuns:
    """Runs to compare by ``metric`` against ``x_axis``, read one after the other."""

    runs: tuple[Path, ...]
    metric: str = "loss"
    x_axis: str = STEP

    def read(self, progress: BytesRead, buckets: int = DRAWN_BUCKETS) -> dict[Path, ComparedCurve]:
        """Each run's curve; a run that cannot be read says why, and the others are read.

        ``progress`` counts the bytes of every run's ``metrics.csv`` together."""
        sizes = [_size(run_dir / METRICS_FILE) for run_dir in self.runs]
        total = sum(sizes)
        curves: dict[Path, ComparedCurve] = {}
        for index, run_dir in enumerate(self.runs):
            before = sum(sizes[:index])

            def told(read: int, _size_of_file: int, before: int = before) -> None:
                progress(before + read, total)

            try:
                x, values = metric_curve(run_dir, self.metric, self.x_axis, told)
            except FileNotFoundError:  # a run that ended before its first step recorded
                x, values = np.empty(0), np.empty(0)
            except (OSError, UnicodeDecodeError) as exc:
                curves[run_dir] = f"{run_dir.name}: {getattr(exc, 'strerror', None) or exc}"
                continue
            curves[run_dir] = peak_envelope(x, values, buckets)
        return curves


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _evaluations(run_dir: Path) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    if not (run_dir / EVAL_FILE).is_file():
        return np.empty(0), np.empty(0)
    evaluated = read_eval(run_dir)
    if "val_loss" not in evaluated:
        return np.empty(0), np.empty(0)
    return np.array(evaluated["step"], dtype=np.float64), np.array(evaluated["val_loss"])


def serve(
    answer: Connection, request: DrawnRunRequest | ComparedRuns, done: Any, total: Any
) -> None:
    """Reads what ``request`` asks and sends ``(True, what it read)``, or ``(False, why)``
    in one line; ``done`` and ``total`` (shared numbers) say how many bytes are read."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the window's to handle
    os.nice(WORKER_NICENESS)

    def progress(read: int, size: int) -> None:
        done.value, total.value = read, size

    try:
        answer.send((True, request.read(progress)))
    except OSError as exc:
        answer.send((False, str(exc)))
    answer.close()
