"""What changed in a run's model, as its views are told (Qt-free).

A :class:`engine.run_model.RunModel` turns each message it takes, and each change
the window or a study makes to it, into one of these events and hands it to its
listeners: the window's panels, the CLI's printer. A view matches on the event's
type, never on the engine's messages: each event carries plain values named for what
they mean, made by the model from the messages, so a new message type touches the model
and the views that show it, and the protocol stays the engine's business. napari's
models tell their views the same way: a small typed event per kind of change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .engine_handle import TaskInfo
    from .findings import Finding


@dataclass(frozen=True)
class Started:
    """The engine reported how it runs (strategy, replicas, devices); the run is running
    from here, and a resumed run's trace was cut back to its checkpoint.

    ``strategy`` is TensorFlow's class name (for the log), ``strategy_kind`` the
    project's name for it (the one shown); ``task`` the cluster task that reported it.
    """

    strategy: str
    strategy_kind: str | None
    num_replicas: int
    devices: tuple[str, ...]
    tensorflow_version: str
    first_step: int = 1
    total_steps: int | None = None
    warnings: tuple[str, ...] = ()
    task: str | None = None
    serving: str | None = None
    """A parameter-server cluster's ps or worker task runs no loop: the gRPC target it
    serves on until the coordinator is done."""


@dataclass(frozen=True)
class StepsAdded:
    """Steps joined the trace (never an empty batch): ``losses[i]`` is step ``steps[i]``'s
    loss, ``named_losses`` custom step code's other named losses, aligned the same way."""

    steps: tuple[int, ...]
    losses: tuple[float, ...]
    elapsed_s: tuple[float, ...]
    named_losses: Mapping[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunPhase:
    """What the engine does outside its steps (``checking 100,000 images``), and how far it
    got where that can be counted (``done`` of ``total``; None where it cannot); ``task``
    is the cluster task doing it."""

    name: str
    done: int | None = None
    total: int | None = None
    task: str | None = None


@dataclass(frozen=True)
class PhaseChanged:
    """The engine is doing something other than steps (``phase``), or got further in it;
    None: steps (or the run's end) came after it, and the phase is over."""

    phase: RunPhase | None


@dataclass(frozen=True)
class Evaluated:
    """Validation metrics of the model after ``step``, over ``examples`` examples."""

    step: int
    metrics: Mapping[str, float]
    examples: int


@dataclass(frozen=True)
class Logged:
    """A line for the run's log: the engine's, or the window's own about the run.

    ``source`` is ``engine`` or ``tensorflow`` (TensorFlow's own output), ``task`` the
    cluster task that wrote it (None: a single process, or the window).
    """

    text: str
    level: Literal["debug", "info", "warning", "error"] = "info"
    source: Literal["engine", "tensorflow"] = "engine"
    task: str | None = None


@dataclass(frozen=True)
class RunFailure:
    """Why a run cannot go on: ``error_type: message``, with the traceback (empty when the
    process died abruptly). ``known``: the message alone explains it (bad data, a NaN
    loss...), so a view shows the message and keeps the traceback for the log. ``task``
    is the cluster task that failed (None: a single process, or the whole cluster)."""

    error_type: str
    message: str
    traceback: str = ""
    known: bool = False
    task: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended, in one value every view and the run queue read.

    ``status``: finished (ran to the end), stopped (asked to) or failed (``failure`` says
    why). ``last_step`` is the last step trained (None: a failure before the first);
    ``final_loss`` and ``elapsed_s`` (training seconds) are known when it did not fail.
    ``killed``: it was killed on request, so it stopped without a new checkpoint.
    """

    status: Literal["finished", "stopped", "failed"]
    last_step: int | None
    final_loss: float | None = None
    elapsed_s: float | None = None
    killed: bool = False
    failure: RunFailure | None = None


@dataclass(frozen=True)
class StatusChanged:
    """The run's status word changed (stopping, starting again on resume, or an end);
    ``outcome`` is how it ended when it did."""

    status: str
    outcome: RunOutcome | None = None


@dataclass(frozen=True)
class SteppingStopped:
    """The engine honoured a stop: it left its loop after ``last_step`` and now saves what
    ``saving`` names, which takes seconds for a large model."""

    last_step: int
    saving: tuple[str, ...] = ()


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
    """A task's resources and input wait over the last second (``task``; None: a single
    process), as the named values of ``engine.system_metrics.sample_row``."""

    task: str | None
    row: Mapping[str, float | None]


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
