"""What a study optimizes, read from a trial's run as its model tells it (plain events,
:mod:`engine.run_events`, the same ones the window's views and the CLI's printer read).

The objective is a metric and a direction: a validation metric when the project
evaluates (the best one the run reached, the one its kept ``model.keras`` has), else
the smoothed training loss (:mod:`engine.smoothed_loss`, the same number the runs list
and the sweep's results table show) at the last step. Never a single batch's loss: one
lucky batch would pick the winner. Reports for pruning come at rungs of global steps:
each evaluation, or every ``report_every`` steps of the smoothed loss, after ``warmup``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..config import Project
from ..problems import Problem
from ..run_events import Evaluated, RunEvent, RunOutcome, StatusChanged, StepsAdded
from ..smoothed_loss import SmoothedLoss

OBJECTIVES = ("val_loss", "val_accuracy", "loss")


def direction(metric: str) -> str:
    """``maximize`` for accuracies, ``minimize`` for losses and errors."""
    return "maximize" if metric.endswith("accuracy") else "minimize"


def objective_problems(project: Project, metric: str) -> list[Problem]:
    """Why the project's runs would never report ``metric``."""
    if metric not in OBJECTIVES:
        return [Problem(("objective",), f"{metric!r}: use one of {', '.join(OBJECTIVES)}")]
    if metric.startswith("val_") and project.evaluation is None:
        return [
            Problem(
                ("objective",),
                f"{metric} needs evaluation: set the project's evaluation (split or source), "
                "or use --objective loss",
            )
        ]
    if metric == "val_accuracy" and "crossentropy" not in project.loss.kind:
        return [
            Problem(
                ("objective",),
                f"{project.loss.kind} reports no accuracy: use val_loss, or a crossentropy loss",
            )
        ]
    return []


@dataclass
class ObjectiveTracker:
    """Follows one trial's run event by event; says when to report and what the objective is."""

    metric: str
    report_every: int
    warmup: int = 0
    best: float | None = None
    last_step: int = 0
    """The last step the trial reported; 0 before its first."""
    outcome: RunOutcome | None = None
    """How the trial's run ended; None until it did."""
    _loss: SmoothedLoss = field(init=False, default_factory=SmoothedLoss)
    _next_rung: int = field(init=False, default=0)
    pending: list[tuple[int, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._next_rung = max(self.warmup, self.report_every)

    def apply(self, event: RunEvent) -> None:
        """Takes an event of the run; what to report piles up in :attr:`pending`."""
        match event:
            case StepsAdded():
                self._steps_added(event)
            case Evaluated():
                self._evaluated(event)
            case StatusChanged(outcome=RunOutcome() as outcome):
                self.outcome = outcome

    def _steps_added(self, event: StepsAdded) -> None:
        self.last_step = event.steps[-1]
        # In pieces that end at the rungs: the smoothed loss as it stood at each one.
        taken = 0
        for index, step in enumerate(event.steps):
            if self.metric == "loss" and step >= self._next_rung:
                self._loss.extend(event.losses[taken : index + 1])
                taken = index + 1
                self._next_rung = step + self.report_every
                smoothed = self._loss.value()
                if smoothed is not None:
                    self.pending.append((step, smoothed))
        self._loss.extend(event.losses[taken:])

    def _evaluated(self, event: Evaluated) -> None:
        value = event.metrics.get(self.metric)
        if value is None or not math.isfinite(value):
            return
        better = direction(self.metric) == "maximize"
        if self.best is None or (value > self.best if better else value < self.best):
            self.best = value
        if event.step >= self.warmup:
            self.pending.append((event.step, value))

    def take_reports(self) -> list[tuple[int, float]]:
        reports, self.pending = self.pending, []
        return reports

    def value(self) -> float | None:
        """The trial's objective as it stands (None: nothing finite to go by)."""
        if self.metric == "loss":
            return self._loss.value()
        return self.best
