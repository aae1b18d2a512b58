"""What changed in a run's model, as its views are told (Qt-free).

A :class:`engine.run_model.RunModel` turns each message it takes, and each change
the window or a study makes to it, into one of these events and hands it to its
listeners: the window's panels, the CLI's printer. A view matches on the event's
type, never on the engine's messages, so a new message type touches the model and
the views that show it, and the protocol stays the engine's business. napari's
models tell their views the same way: a small typed event per kind of change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .messages import (
    EvalMetrics,
    Log,
    Phase,
    Resources,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
    Stopping,
)

if TYPE_CHECKING:
    from .engine_handle import TaskInfo
    from .findings import Finding


@dataclass(frozen=True)
class Started:
    """The engine reported how it runs (strategy, replicas, devices); the run is running
    from here, and a resumed run's trace was cut back to its checkpoint."""

    message: RunStarted


@dataclass(frozen=True)
class StepsAdded:
    """Steps joined the trace (never an empty batch)."""

    message: StepMetrics


@dataclass(frozen=True)
class PhaseChanged:
    """The engine is doing something other than steps (``message``), or got further in it;
    None: steps (or the run's end) came after it, and the phase is over."""

    message: Phase | None


@dataclass(frozen=True)
class Evaluated:
    message: EvalMetrics


@dataclass(frozen=True)
class Logged:
    """A line for the run's log: the engine's, or the window's own about the run."""

    message: Log


@dataclass(frozen=True)
class StatusChanged:
    """The run's status word changed (stopping, starting again on resume, or an end);
    ``outcome`` is the engine's last word when the run ended."""

    status: str
    outcome: RunFinished | RunFailed | None = None


@dataclass(frozen=True)
class SteppingStopped:
    """The engine honoured a stop: it left its loop after ``message.last_step`` and now
    saves what ``message.saving`` names, which takes seconds for a large model."""

    message: Stopping


@dataclass(frozen=True)
class Pruning:
    """A study's pruner stops the run: it was judged at ``step``, for ``reason``."""

    step: int
    reason: str


@dataclass(frozen=True)
class TasksChanged:
    """A cluster's tasks, as they are now."""

    tasks: tuple[TaskInfo, ...]


@dataclass(frozen=True)
class ResourcesSampled:
    """A task's resources and input wait over the last second (``message.task``)."""

    message: Resources


@dataclass(frozen=True)
class FindingsChanged:
    """What slows the run, in words (``engine.findings``), changed; empty: nothing now."""

    findings: tuple[Finding, ...]


RunEvent = (
    Started
    | StepsAdded
    | Evaluated
    | Logged
    | PhaseChanged
    | StatusChanged
    | SteppingStopped
    | Pruning
    | TasksChanged
    | ResourcesSampled
    | FindingsChanged
)
