"""One run as every view sees it: its trace, status, clock and cluster tasks (Qt-free).

A :class:`RunModel` is fed the run's messages (:meth:`RunModel.apply`) and tells
its listeners after each change with a typed event (:mod:`engine.run_events`); the
window's plot, status and log panels and the CLI's printer are such listeners, and
read what they show from the event and the model. A past
run is loaded by :meth:`RunModel.from_folder`, which turns ``metrics.csv`` and
``eval.csv`` back into the messages the engine sent and applies them: a run looks
the same live, loaded, or resumed (loaded, then fed).
"""

from __future__ import annotations

import bisect
import math
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

from .findings import Finding, Findings
from .messages import (
    EvalMetrics,
    Log,
    Message,
    Phase,
    Resources,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
    Stopping,
    secondary_losses,
)
from .run_events import (
    Evaluated,
    FindingsChanged,
    Logged,
    PhaseChanged,
    Pruning,
    ResourcesSampled,
    RunEvent,
    RunFailure,
    RunOutcome,
    RunPhase,
    Started,
    StatusChanged,
    SteppingStopped,
    StepsAdded,
    TasksChanged,
)
from .run_folder import EVAL_FILE, loss_columns, read_eval, read_metrics
from .run_history import summarize
from .system_metrics import sample_row

if TYPE_CHECKING:
    from .engine_handle import TaskInfo

_PHASE_ENDS = (StepMetrics, EvalMetrics, RunFinished, RunFailed)
"""What comes after a phase (:class:`~engine.messages.Phase`) is over: steps, an
evaluation's result, the run's end."""
RATE_WINDOW_S = 5.0
"""Steps/s over the last seconds of training, so the ETA follows speed changes."""

Listener = Callable[[RunEvent], None]
"""Called after every change, with what changed."""


def _floats(values: Iterable[float] = ()) -> array[float]:
    return array("d", values)


@dataclass
class Trace:
    """Every step's losses and every evaluation so far, aligned by step.

    Kept in typed arrays (8 bytes a value), beside the plot's own copy: a run of a
    million steps costs tens of megabytes here, not the hundreds lists would.
    ``named_losses[name][i]`` is step ``steps[i]``'s named loss (NaN where a batch
    did not report that name); ``loss`` itself is never a named loss, as
    ``metrics.csv`` has it once. The per-replica shares (as ``StepMetrics`` reports
    them) are read with :meth:`replica_losses`.
    """

    steps: array[int] = field(default_factory=lambda: array("q"))
    losses: array[float] = field(default_factory=_floats)
    elapsed_s: array[float] = field(default_factory=_floats)
    named_losses: dict[str, array[float]] = field(default_factory=dict)
    evaluations: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    _shares: array[float] = field(default_factory=_floats)
    _replicas: int = 0

    def replica_losses(self, first: int = 0) -> NDArray[np.float64] | None:
        """The per-replica shares of the steps from index ``first`` on, a row per step."""
        if not self._replicas:
            return None
        rows = np.asarray(self._shares[first * self._replicas :], dtype=np.float64)
        return rows.reshape(-1, self._replicas)

    def extend(self, message: StepMetrics) -> None:
        before, count = len(self.steps), len(message.steps)
        self.steps.extend(message.steps)
        self.losses.extend(message.losses)
        self.elapsed_s.extend(message.elapsed_s)
        if message.replica_losses:
            if not self._replicas:
                self._replicas = len(message.replica_losses[0])
            self._pad_shares(before)
            for row in message.replica_losses:
                self._shares.extend(row[: self._replicas])
                self._shares.extend(_floats([math.nan]) * (self._replicas - len(row)))
        named = message.named_losses or {}
        for name in secondary_losses(named):
            self.named_losses.setdefault(name, _floats([math.nan]) * before)
        for name, values in self.named_losses.items():
            values.extend(named.get(name, _floats([math.nan]) * count))

    def _pad_shares(self, steps: int) -> None:
        missing = steps * self._replicas - len(self._shares)
        self._shares.extend(_floats([math.nan]) * missing)

    def truncate_after(self, last_step: int) -> None:
        """Keeps the steps up to ``last_step``: a resumed run redoes the rest."""
        keep = bisect.bisect_right(self.steps, last_step)
        for values in (self.steps, self.losses, self.elapsed_s, *self.named_losses.values()):
            del values[keep:]
        del self._shares[keep * self._replicas :]
        self.evaluations = [(s, m) for s, m in self.evaluations if s <= last_step]


class RunModel:
    """One run: fed by its messages, read by its views."""

    def __init__(
        self,
        *,
        total_steps: int | None = None,
        run_dir: Path | None = None,
        name: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run_dir = run_dir
        self.name = name
        self.total_steps = total_steps
        self.status = "starting"
        """starting, running, stopping, finished, stopped, pruned or failed; a loaded
        run's status.json word (``engine.run_history``: also interrupted, running...)."""
        self.pruned: tuple[int, str] | None = None
        """A study's trial stopped by its pruner: the step it was judged at, and why."""
        self.trace = Trace()
        self.started: Started | None = None
        """How the run runs, once the engine said (strategy, replicas, devices)."""
        self.outcome: RunOutcome | None = None
        self.last_evaluation: Evaluated | None = None
        self.phase: RunPhase | None = None
        """What the engine is doing outside its steps now (loading TensorFlow, checking
        files, evaluating...); None while it steps, and once the run ended."""
        self.tasks: list[TaskInfo] = []
        self.resources: dict[str | None, list[Mapping[str, float | None]]] = {}
        """Each task's resource samples, in order (``None``: a single process's), as the
        named values of ``engine.system_metrics.sample_row``."""
        self.findings: list[Finding] = []
        """What slows the run now, in words (``engine.findings``)."""
        self._findings = Findings()
        self.first_step = 1
        self._clock = clock
        self._began_at: float | None = clock()
        self._ended_at: float | None = None
        self._engine_clock: tuple[float, float] | None = None
        """The engine's last reported ``elapsed_s`` and when it arrived (on ``clock``)."""
        self._rate_points: deque[tuple[float, int]] = deque()
        self._listeners: list[Listener] = []

    # --- feeding ------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def apply(self, message: Message) -> None:
        """Takes one message of the run into the model, then tells the listeners."""
        if isinstance(message, Phase):
            self.phase = RunPhase(message.name, message.done, message.total, message.task)
            self._tell(PhaseChanged(self.phase))
            return
        if self.phase is not None and isinstance(message, _PHASE_ENDS):
            self.phase = None  # steps, an evaluation's result or the end came after it
            if not isinstance(message, RunFinished | RunFailed):  # the end tells itself
                self._tell(PhaseChanged(None))
        if isinstance(message, StepMetrics):
            if message.steps:
                self._apply_steps(message)
                self._tell(_steps_added(message))
        elif isinstance(message, EvalMetrics):
            self.trace.evaluations.append((message.step, dict(message.metrics)))
            self.last_evaluation = Evaluated(message.step, dict(message.metrics), message.examples)
            self._tell(self.last_evaluation)
        elif isinstance(message, Log):
            self._tell(Logged(message.text, message.level, message.source, message.task))
        elif isinstance(message, Resources):
            self._apply_resources(message)
        elif isinstance(message, Stopping):
            self._tell(SteppingStopped(message.last_step, tuple(message.saving)))
        elif isinstance(message, RunStarted):
            self.started = _started(message)
            self.first_step = message.first_step
            if message.total_steps is not None:
                self.total_steps = message.total_steps
            if self.status == "starting":
                self.status = "running"
            self.trace.truncate_after(message.first_step - 1)
            self._tell(self.started)
        elif isinstance(message, RunFinished | RunFailed):
            self._ended(outcome_of(message))

    def fail(self, failure: RunFailure) -> None:
        """The run failed outside its engine (its process could not start, or its stream
        broke): it ends ``failed`` as if the engine had said so."""
        self._ended(RunOutcome("failed", None, failure=failure))

    def _ended(self, outcome: RunOutcome) -> None:
        self.phase = None  # the end tells itself
        if outcome.failure is None:
            if outcome.status == "finished":  # it reached its last step before the stop
                self.pruned = None
            self._engine_clock = (outcome.elapsed_s or 0.0, self._clock())
        elif self._engine_clock is not None:  # a failed run trained until its last step
            self._engine_clock = (self._engine_clock[0], self._clock())
        self.outcome = outcome
        failed_or_pruned = "failed" if outcome.failure is not None else "pruned"
        self.status = outcome.status if self.pruned is None else failed_or_pruned
        self._end()
        self._tell(StatusChanged(self.status, outcome))

    def log(self, text: str, level: Literal["debug", "info", "warning", "error"] = "info") -> None:
        """A line of the window's own about the run, for its log (as the engine's lines)."""
        self._tell(Logged(text, level))

    def _apply_resources(self, message: Resources) -> None:
        """Keeps the sample; a finding that is new or changed is said once, in the log."""
        row = sample_row(message)
        self.resources.setdefault(message.task, []).append(row)
        self._tell(ResourcesSampled(message.task, row))
        changed = self._findings.add(message)
        self.findings = list(self._findings.current)  # the latest numbers, said or not
        if changed:
            self._tell(FindingsChanged(tuple(self.findings)))
            for finding in self._findings.new:
                self._tell(Logged(finding.line, "warning"))

    def stopping(self) -> None:
        """A stop was asked for: the engine stops after its current step."""
        if self.outcome is None:
            self.status = "stopping"
            self._tell(StatusChanged(self.status))

    def prune(self, step: int, reason: str) -> None:
        """A study's pruner stops the run: it was judged at ``step``, for ``reason``; the
        stop that follows ends it ``pruned``."""
        self.pruned = (step, reason)
        self._tell(Pruning(step, reason))

    def set_tasks(self, tasks: list[TaskInfo]) -> None:
        self.tasks = list(tasks)
        self._tell(TasksChanged(tuple(tasks)))

    def resume(self) -> None:
        """The loaded run continues: live again, from the step after its checkpoint."""
        self.status = "starting"
        self.outcome = None
        self._began_at, self._ended_at = self._clock(), None
        self._engine_clock = None
        self._rate_points.clear()
        self._tell(StatusChanged(self.status))

    def _apply_steps(self, message: StepMetrics) -> None:
        self.trace.extend(message)
        if not self._rate_points:
            self._rate_points.append((message.elapsed_s[0], message.steps[0]))
        self._rate_points.append((message.elapsed_s[-1], message.steps[-1]))
        self._engine_clock = (message.elapsed_s[-1], self._clock())
        while len(self._rate_points) > 2 and (
            self._rate_points[-1][0] - self._rate_points[1][0] >= RATE_WINDOW_S
        ):
            self._rate_points.popleft()

    def _end(self) -> None:
        self._ended_at = self._clock()

    def _tell(self, event: RunEvent) -> None:
        for listener in list(self._listeners):
            listener(event)

    # --- reading ------------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """True until the run's end arrived (or for a loaded run, never)."""
        return self._began_at is not None and self._ended_at is None

    @property
    def finishing(self) -> bool:
        """The last step is in and the run has not ended yet: the engine saves its final
        checkpoint and model, which is not training (the clock and the ETA stand still)."""
        last = self.trace.steps[-1] if self.trace.steps else None
        return (
            self.live
            and self.outcome is None
            and bool(self.total_steps)
            and last is not None
            and last >= (self.total_steps or 0)
        )

    @property
    def last_step(self) -> int | None:
        if self.outcome is not None and self.outcome.last_step:
            return self.outcome.last_step
        return self.trace.steps[-1] if self.trace.steps else None

    def rate(self) -> float | None:
        """Steps per second over the last few seconds of training."""
        if len(self._rate_points) < 2:
            return None
        (t0, s0), (t1, s1) = self._rate_points[0], self._rate_points[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None

    def eta_s(self) -> float | None:
        """Seconds to the last step at the current rate; None once ended or unknown."""
        rate, last = self.rate(), self.last_step
        if not self.live or self.finishing or not rate or not self.total_steps or last is None:
            return None
        return (self.total_steps - last) / rate

    def elapsed_s(self) -> float | None:
        """The run's training time on the engine's clock, ticking between its reports.

        It is the clock of metrics.csv's ``elapsed_s`` (continued by a resume) and of
        the engine's final report, so every view gives one duration for one run; the
        engine's start-up before the first step is not training (None).
        """
        if self._engine_clock is None:
            return None
        engine_s, received = self._engine_clock
        if self.finishing:
            return engine_s
        end = self._ended_at if self._ended_at is not None else self._clock()
        return engine_s + max(0.0, end - received)

    def progress(self) -> tuple[int, int] | None:
        """(steps done, the run's steps in all), when the run's length is known.

        A resumed run counts from its first step, not from the checkpoint it resumed
        at: at its start it is as far along as its checkpoint.
        """
        if not self.total_steps:
            return None
        done = self.last_step or 0
        return max(0, min(done, self.total_steps)), self.total_steps

    # --- past runs ----------------------------------------------------------------------

    @classmethod
    def from_folder(cls, run_dir: Path, clock: Callable[[], float] = time.monotonic) -> RunModel:
        """A past run from its folder: the messages its files record, applied in order.

        Its evaluations' ``examples`` are 0: ``eval.csv`` does not keep them. Raises
        OSError when ``metrics.csv`` cannot be read (a run that never reached its
        first step has none).
        """
        summary = summarize(run_dir, scan=False)  # the name, status and duration
        model = cls(run_dir=run_dir, name=summary.name, clock=clock)
        metrics = read_metrics(run_dir)
        for message in _recorded_messages(metrics, _read_evaluations(run_dir)):
            model.apply(message)
        model.status = summary.status
        model.pruned = summary.pruned
        model._began_at, model._ended_at = None, clock()
        model._engine_clock = None
        if summary.duration_s is not None:
            model._engine_clock = (summary.duration_s, model._ended_at)
        return model


def outcome_of(message: RunFinished | RunFailed) -> RunOutcome:
    """How the run ended, as the engine's last message says."""
    if isinstance(message, RunFinished):
        return RunOutcome(
            message.status,
            message.last_step,
            message.final_loss,
            message.elapsed_s,
            killed=message.killed,
        )
    failure = RunFailure(
        message.error_type,
        message.message,
        message.traceback,
        message.known,
        message.task,
        message.exit_code,
    )
    return RunOutcome("failed", message.last_step, failure=failure)


def _started(message: RunStarted) -> Started:
    return Started(
        strategy=message.strategy,
        strategy_kind=message.strategy_kind,
        num_replicas=message.num_replicas,
        devices=tuple(message.devices),
        tensorflow_version=message.tensorflow_version,
        first_step=message.first_step,
        total_steps=message.total_steps,
        warnings=tuple(message.warnings),
        task=message.task,
        serving=message.serving,
    )


def _steps_added(message: StepMetrics) -> StepsAdded:
    named = message.named_losses or {}
    return StepsAdded(
        tuple(message.steps),
        tuple(message.losses),
        tuple(message.elapsed_s),
        {name: tuple(values) for name, values in named.items()},
    )


def _read_evaluations(run_dir: Path) -> Mapping[str, list[float]]:
    return read_eval(run_dir) if (run_dir / EVAL_FILE).is_file() else {}


def _recorded_messages(
    metrics: Mapping[str, Sequence[float]], evaluations: Mapping[str, Sequence[float]]
) -> list[Message]:
    """The StepMetrics of ``metrics.csv``'s rows and the EvalMetrics of ``eval.csv``'s."""
    steps = [int(step) for step in metrics.get("step", [])]
    named_columns, replicas = loss_columns(metrics)
    named = {name: list(metrics[name]) for name in named_columns}
    shares = [list(row) for row in zip(*(metrics[r] for r in replicas), strict=True)]
    messages: list[Message] = []
    if steps:
        messages.append(
            StepMetrics(
                steps=steps,
                losses=list(metrics.get("loss", [])),
                elapsed_s=list(metrics.get("elapsed_s", [])),
                replica_losses=shares or None,
                named_losses=named or None,
            )
        )
    names = [name for name in evaluations if name != "step"]
    for i, step in enumerate(evaluations.get("step", [])):
        values = {name: evaluations[name][i] for name in names}
        messages.append(EvalMetrics(step=int(step), metrics=values, examples=0))
    return messages
