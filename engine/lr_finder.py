"""The learning-rate range test (Leslie Smith's, fastai's ``lr_find``), TensorFlow-free.

A finder run is an ordinary engine run of the project, on its own strategy, replicas
and mixed precision, in a small folder of its own: the loop trains ``steps`` steps
while :class:`RateSweep` (one more loop hook) raises the optimizer's rate
exponentially from ``low`` to ``high`` and stops the loop once the smoothed loss
has diverged. The folder's ``lr_range.json`` (:data:`FINDER_FILE`) is what makes a
run one: the engine reads the range from it, and a resume refuses the folder, so a
finder run is never continued or listed as one of the project's training runs.

The curve is read back from the folder's ``metrics.csv`` (the reduced loss of every
step, which the engine records for every run) and the rate of each step is the
schedule's, so the parent needs no message of its own: :func:`read_curve` and
:func:`suggest` turn the folder into the suggestion.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import Project
from .loop import Executed, LoopHook, StopLoop
from .run_folder import FINDER_FILE, LR_CURVE_FILE, TASKS_DIR, read_metrics
from .run_folder.folder_io import load_json, rewrite_file

SMOOTHING = 0.98
"""The exponential moving average's weight of the past (fastai's), debiased at the start."""
MIN_STEPS = 10
"""Fewer steps before the loss diverged than this suggest nothing: the average had not settled."""
SLOPE_SPAN = 20
"""The steepest descent's slope spans 1/SLOPE_SPAN of the planned steps each side."""


@dataclass(frozen=True)
class RateRange:
    """Which rates a finder run tries: ``steps`` steps from ``low`` to ``high``, each rate
    the one before times the same factor, stopped once the smoothed loss exceeds
    ``diverge`` times its lowest value."""

    low: float = 1e-7
    high: float = 10.0
    steps: int = 100
    diverge: float = 4.0

    def problem(self) -> str | None:
        """Why this range cannot be tried, in one line; None when it can."""
        if not (0 < self.low < self.high) or not math.isfinite(self.high):
            return f"the rates must satisfy 0 < low < high (got {self.low:g} and {self.high:g})"
        if self.high > 100:
            return f"the highest rate is {self.high:g}; an optimizer takes at most 100"
        if not 10 <= self.steps <= 10_000:
            return f"a range test takes 10 to 10000 steps (got {self.steps})"
        if not self.diverge > 1:
            return f"the divergence factor must be above 1 (got {self.diverge:g})"
        return None

    def rate(self, step: int) -> float:
        """The rate of ``step`` (1-based): ``low`` at the first step, ``high`` at the last."""
        fraction = (step - 1) / (self.steps - 1)
        return self.low * (self.high / self.low) ** fraction


def finder_project(project: Project, rates: RateRange) -> Project:
    """``project`` as a finder run trains it: ``rates.steps`` steps, one per execution (the
    rate changes between steps), no evaluation, only whole batches, starting at
    ``rates.low``. Its strategy, replicas, data, batch and mixed precision are the
    project's own: that is the point."""
    training = project.training.model_copy(
        update={
            "steps": rates.steps,
            "epochs": None,
            "steps_per_execution": 1,
            "checkpoint_every": None,
            "export_saved_model": False,
        }
    )
    optimizer = project.optimizer.model_copy(update={"learning_rate": rates.low})
    # An epoch's last, partial batch has a loss averaged over the global batch, so it reads
    # as a sudden dip (5 examples of 64: a loss 13 times lower) that is no effect of the rate.
    data = project.data.model_copy(update={"drop_remainder": True})
    return project.model_copy(
        update={"training": training, "optimizer": optimizer, "evaluation": None, "data": data}
    )


LEARNING_RATE = "learning_rate"
BATCH_SIZE = "batch_size"
"""The finders, as ``finder.json`` names them."""


def mark_finder_run(run_dir: Path, finder: str, **details: Any) -> None:
    """Marks ``run_dir`` as a finder's trial, with what it tries."""
    record = {"finder": finder, **details}
    rewrite_file(run_dir / FINDER_FILE, json.dumps(record, indent=2) + "\n")


def finder_of(run_dir: Path) -> str | None:
    """The finder whose trial ``run_dir`` is; None for a training run's folder."""
    if not (run_dir / FINDER_FILE).is_file():
        return None
    record = load_json(run_dir / FINDER_FILE)
    return str(record.get("finder", "")) if isinstance(record, dict) else ""


def write_range(run_dir: Path, rates: RateRange) -> None:
    mark_finder_run(run_dir, LEARNING_RATE, **asdict(rates))


def read_range(run_dir: Path) -> RateRange | None:
    """The range a learning-rate finder run's folder asks for; None for any other folder."""
    if finder_of(run_dir) != LEARNING_RATE:
        return None
    record = load_json(run_dir / FINDER_FILE)
    rates = RateRange(
        low=float(record["low"]),
        high=float(record["high"]),
        steps=int(record["steps"]),
        diverge=float(record["diverge"]),
    )
    problem = rates.problem()
    if problem is not None:
        raise ValueError(f"{run_dir / FINDER_FILE}: {problem}")
    return rates


def cannot_find_on(project: Project) -> str | None:
    """Why no finder can try ``project`` (its strategy), in one line; None when one can.
    The finders need one loss per step that every task sees, so each task sets the same
    rate and stops at the same step: a parameter_server cluster's workers step on their
    own. Every other strategy is tried as it trains, a multi-worker one as a cluster."""
    if project.strategy.kind == "parameter_server":
        return (
            "a finder needs one loss per step that every task sees; a parameter_server "
            "cluster's workers step on their own: try the same model on "
            "multi_worker_mirrored or mirrored replicas"
        )
    return None


def finder_folder(run_dir: Path) -> Path:
    """The folder whose finder file the run in ``run_dir`` obeys: its own, or for a
    cluster's task (in ``tasks/<task>`` of the cluster's folder) the cluster's. Every task
    of a learning-rate finder's cluster sets the same rate at each step and stops at the
    same step, since each sees the same reduced loss (a task that stopped alone would
    leave its peers waiting in a collective)."""
    if not (run_dir / FINDER_FILE).exists() and run_dir.parent.name == TASKS_DIR:
        return run_dir.parent.parent
    return run_dir


class Smoother:
    """The debiased exponential moving average of the losses, and its lowest value so far."""

    def __init__(self) -> None:
        self._average = 0.0
        self._count = 0
        self.best = math.inf

    def add(self, loss: float) -> float:
        self._count += 1
        self._average = SMOOTHING * self._average + (1 - SMOOTHING) * loss
        smoothed = self._average / (1 - SMOOTHING**self._count)
        if math.isfinite(smoothed):
            self.best = min(self.best, smoothed)
        return smoothed


def diverged(smoothed: float, best: float, factor: float) -> bool:
    """The loss is lost: not finite, or ``factor`` times its lowest (smoothed) value."""
    return not math.isfinite(smoothed) or (best > 0 and smoothed > factor * best)


class RateSweep(LoopHook):
    """Sets each step's rate before it runs and stops the loop once the loss diverged.

    ``set_rate`` sets every optimizer's rate (``engine.tf``'s); the first step's is set
    here, each next one after the step before. Every step's loss is fetched (one
    synchronisation a step, which a short run affords) to decide the stop at once.
    """

    def __init__(self, rates: RateRange, set_rate: Callable[[float], None]) -> None:
        self._rates = rates
        self._set_rate = set_rate
        self._smoother = Smoother()
        set_rate(rates.rate(1))

    def after_steps(self, executed: Executed) -> None:
        smoothed = self._smoother.add(step_loss(executed.losses))
        if diverged(smoothed, self._smoother.best, self._rates.diverge):
            raise StopLoop(f"the loss diverged at step {executed.last_step}")
        self._set_rate(self._rates.rate(executed.last_step + 1))


def step_loss(losses: Any) -> float:
    """One step's reduced loss as a float: the built-in step's scalar, or custom code's
    ``loss`` (its first loss when none is named so)."""
    if isinstance(losses, dict):
        losses = losses["loss"] if "loss" in losses else next(iter(losses.values()))
    return float(np.asarray(losses).reshape(-1)[-1])


@dataclass(frozen=True)
class Curve:
    """A finder run's steps: the rate, the reduced loss and its smoothed value of each."""

    rates: list[float]
    losses: list[float]
    smoothed: list[float]
    planned_steps: int

    @property
    def stopped_early(self) -> bool:
        return len(self.rates) < self.planned_steps


def curve_of(rates: RateRange, losses: Sequence[float]) -> Curve:
    smoother = Smoother()
    smoothed = [smoother.add(loss) for loss in losses]
    return Curve(
        [rates.rate(step) for step in range(1, len(losses) + 1)],
        list(losses),
        smoothed,
        rates.steps,
    )


def read_curve(run_dir: Path) -> Curve:
    """The curve of the finder run in ``run_dir``, from its range and ``metrics.csv``."""
    rates = read_range(run_dir)
    if rates is None:
        raise ValueError(f"{run_dir} is not a learning-rate finder run (no {FINDER_FILE})")
    metrics = read_metrics(run_dir) if (run_dir / "metrics.csv").is_file() else {}
    return curve_of(rates, metrics.get("loss", []))


@dataclass(frozen=True)
class Suggestion:
    """What the range test suggests, by two rules; ``rate`` is the one to use."""

    rate: float
    rule: str
    steepest: float
    minimum: float
    """The rate where the smoothed loss was lowest."""

    @property
    def minimum_tenth(self) -> float:
        return self.minimum / 10


RULE = "the rate an order of magnitude below the smoothed loss's minimum"


def suggest(curve: Curve, factor: float) -> Suggestion | None:
    """The suggested rate: a tenth of the rate at the smoothed loss's minimum (the loss
    still falls fast there, and stays far from where it turns up); the steepest descent
    of the smoothed loss against log(rate) before that minimum is given beside it.
    Only the steps before the loss diverged count. None when too few steps trained."""
    smoothed = np.asarray(curve.smoothed, dtype=np.float64)
    best = math.inf
    end = len(smoothed)
    for index, value in enumerate(smoothed):
        if diverged(value, best, factor):
            end = index
            break
        best = min(best, value)
    if end < MIN_STEPS:
        return None
    smoothed, logs = smoothed[:end], np.log(np.asarray(curve.rates[:end]))
    lowest = int(np.argmin(smoothed))
    minimum = float(curve.rates[lowest])
    # One step's slope is one batch's noise: the slope is taken across SLOPE_SPAN of the
    # planned steps on either side, within the falling part before the minimum.
    span = max(1, curve.planned_steps // SLOPE_SPAN)
    slopes = [
        (smoothed[min(i + span, lowest)] - smoothed[max(i - span, 0)])
        / (logs[min(i + span, lowest)] - logs[max(i - span, 0)])
        for i in range(lowest)
    ]
    steepest = float(curve.rates[int(np.argmin(slopes))]) if slopes else minimum
    return Suggestion(rate=minimum / 10, rule=RULE, steepest=steepest, minimum=minimum)


def write_curve(path: Path, curve: Curve) -> None:
    """The curve as CSV: ``step,learning_rate,loss,smoothed_loss``, one row a step."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", "learning_rate", "loss", "smoothed_loss"])
        for step, (rate, loss, smoothed) in enumerate(
            zip(curve.rates, curve.losses, curve.smoothed, strict=True), start=1
        ):
            writer.writerow([step, f"{rate:.6g}", f"{loss:.6g}", f"{smoothed:.6g}"])


def curve_file(run_dir: Path) -> Path:
    return run_dir / LR_CURVE_FILE
