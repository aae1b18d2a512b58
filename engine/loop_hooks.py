"""The training loop's hooks: one job each, between executions (no TensorFlow).

Each hook decides *when* its job is due and leaves *how* to an object given to it
(a checkpoint manager, an evaluator, a model keeper, TensorFlow's preemption
handler), so the decisions are tested with fakes while ``engine.tf`` holds the
TensorFlow side. A hook that needs every trained step recorded before it writes
(a checkpoint must never be on disk before the rows of its steps: a resume keeps
the rows up to it and never trains those steps again) is given the reporting
hook's ``flush`` or ``record_durably`` when it is made, never patched afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

from . import phases
from .channel import Channel
from .loop import NO_PAUSE, Executed, LoopEnd, LoopHook, StopLoop
from .messages import EvalMetrics, Stopping
from .reporting import StepReporter
from .run_folder import EvalWriter


class StopRequest(LoopHook):
    """Stops the loop when the run is asked to (Stop, SIGTERM, a study pruning a trial)."""

    def __init__(self, requested: Callable[[], bool]) -> None:
        self._requested = requested

    def should_stop(self) -> bool:
        return self._requested()


class StopNotice(LoopHook):
    """Says when a stop ended the loop, and what is saved before the run's end.

    Put it after the hook that flushes the steps and before those that save: whoever
    asked for the stop then knows the steps are over and waits for the saves.
    """

    def __init__(self, channel: Channel, saving: Sequence[str]) -> None:
        self._channel = channel
        self._saving = list(saving)

    def on_end(self, end: LoopEnd) -> None:
        if end.stopped:
            self._channel.send(Stopping(last_step=end.last_step, saving=self._saving))


class ScalarLog(Protocol):
    """Where evaluations go besides eval.csv, and what a checkpoint waits for (TensorBoard)."""

    def evaluation(self, step: int, metrics: dict[str, float]) -> None: ...

    def sync(self) -> None: ...


class Reporting(LoopHook):
    """Every step's loss and every evaluation, to the channel and the run folder's files.

    Steps go through the :class:`StepReporter`, which fetches them in batches;
    whatever it still holds is flushed when the loop ends, by a stop or a failure
    alike, so a failed run's record keeps every step it trained.
    """

    def __init__(
        self,
        reporter: StepReporter,
        channel: Channel,
        *,
        eval_writer: EvalWriter | None = None,
        scalars: ScalarLog | None = None,
        eval_examples: int | None = None,
    ) -> None:
        """``eval_examples``: how many validation examples each evaluation reads."""
        self._reporter = reporter
        self._channel = channel
        self._eval_writer = eval_writer
        self._scalars = scalars
        self._eval_examples = eval_examples

    @property
    def elapsed_s(self) -> float:
        """The training clock at the last step recorded (a resume's starts where it was)."""
        return self._reporter.elapsed_s

    @property
    def last_loss(self) -> float | None:
        return self._reporter.last_loss

    def after_steps(self, executed: Executed) -> None:
        phases.end()  # the first step's phase: steps are what the run does from here
        self._reporter.record_many(
            executed.first_step,
            executed.count,
            executed.losses,
            executed.replica_losses,
            executed.elapsed_s,
        )

    def flush(self) -> None:
        """Sends and writes every step recorded so far (before an evaluation's metrics)."""
        self._reporter.flush()

    def record_durably(self) -> None:
        """Every step recorded so far is in metrics.csv and TensorBoard (before a checkpoint)."""
        self._reporter.flush()
        if self._scalars is not None:
            self._scalars.sync()

    def on_evaluate(self, step: int, metrics: dict[str, float]) -> None:
        if self._eval_writer is not None:
            self._eval_writer.write(step, metrics)
        if self._scalars is not None:
            self._scalars.evaluation(step, metrics)
        self._channel.send(EvalMetrics(step=step, metrics=metrics, examples=self._eval_examples))

    def on_end(self, end: LoopEnd) -> None:
        self._reporter.flush()

    def on_exception(self, error: BaseException) -> None:
        self._reporter.flush()


class Checkpoints(Protocol):
    """A run's checkpoint manager (``engine.tf.checkpoint.RunCheckpoints``)."""

    last_saved: int | None

    def save(self, step: int) -> None: ...


class Checkpointing(LoopHook):
    """Saves a checkpoint every ``every`` steps, and at the end of a loop that trained."""

    def __init__(
        self, checkpoints: Checkpoints, every: int | None, record_steps: Callable[[], None]
    ) -> None:
        self._checkpoints = checkpoints
        self._every = every
        self._record_steps = record_steps

    def steps_until_pause(self, step: int) -> int:
        """How many steps from ``step`` on reach the next checkpoint step, inclusive."""
        if not self._every:
            return NO_PAUSE
        return self._every - (step - 1) % self._every

    def after_steps(self, executed: Executed) -> None:
        if self._every and executed.last_step % self._every == 0:
            self.save(executed.last_step)

    def on_end(self, end: LoopEnd) -> None:
        if end.trained:
            self.save(end.last_step)

    def save(self, step: int) -> None:
        """Saves ``step`` unless it is saved already, once its steps are recorded."""
        if self._checkpoints.last_saved == step:
            return
        self._record_steps()
        with phases.phase(f"writing the checkpoint of step {step:,}"):
            self._checkpoints.save(step)


class Evaluates(Protocol):
    """An evaluator under the run's strategy (``engine.tf.evaluation.Evaluator``)."""

    every: int

    def evaluate(self) -> dict[str, float]: ...


class Evaluation(LoopHook):
    """Evaluates after every ``every`` steps and gives the metrics to ``listeners``.

    The steps up to the evaluation are flushed first, so whoever follows the run
    sees the losses of step N before the evaluation after step N.
    """

    def __init__(
        self,
        evaluator: Evaluates,
        record_steps: Callable[[], None],
        listeners: Sequence[LoopHook],
    ) -> None:
        self._evaluator = evaluator
        self._record_steps = record_steps
        self._listeners = list(listeners)

    def steps_until_pause(self, step: int) -> int:
        """Steps from ``step`` on up to the next evaluation step, inclusive (caps fused runs)."""
        return self._evaluator.every - (step - 1) % self._evaluator.every

    def after_steps(self, executed: Executed) -> None:
        step = executed.last_step
        if step % self._evaluator.every:
            return
        self._record_steps()
        with phases.phase(f"evaluating after step {step:,}"):
            metrics = self._evaluator.evaluate()
        for listener in self._listeners:
            listener.on_evaluate(step, metrics)


class Keeper(Protocol):
    """Holds a run's best weights and saves its model (``engine.tf.model_export.ModelKeeper``)."""

    def remember(self, step: int, val_loss: float) -> None: ...

    def save(self, last_step: int) -> None: ...


class KeepModel(LoopHook):
    """Keeps the weights of the lowest finite ``val_loss``; saves the model when the loop ends.

    A run that failed saves nothing (its weights may be what failed it): the loop
    calls ``on_end`` only for a run that finished or stopped.
    """

    def __init__(self, keeper: Keeper) -> None:
        self._keeper = keeper
        self._best: float | None = None

    def on_evaluate(self, step: int, metrics: dict[str, float]) -> None:
        val_loss = metrics.get("val_loss", math.nan)
        if math.isfinite(val_loss) and (self._best is None or val_loss < self._best):
            self._best = val_loss
            self._keeper.remember(step, val_loss)

    def on_end(self, end: LoopEnd) -> None:
        if end.last_step > 0:  # a resumed run that trained no step still has its model
            with phases.phase("saving the model"):
                self._keeper.save(end.last_step)


class Preemption(Protocol):
    """TensorFlow's preemption handler (``engine.tf.preemption.PreemptionWatch``)."""

    def save_if_preempted(self) -> None: ...

    def close(self) -> None: ...


class StopTogether(LoopHook):
    """Stops every task of a multi-worker run after the same step, with a checkpoint there.

    Every step is a collective, so a task must not stop on its own request: the
    preemption handler claims the stop in the cluster, names the step, calls
    ``save`` and then ``stop`` on every task. ``watch(save, stop)`` makes that handler.
    Put this hook after the checkpoint and evaluation hooks: a stop comes after the
    step's evaluation.
    """

    def __init__(
        self,
        watch: Callable[[Callable[[], None], Callable[[], None]], Preemption],
        checkpointing: Checkpointing,
        last_step: int,
    ) -> None:
        self._checkpointing = checkpointing
        self._last_step = last_step
        self._step = 0
        self._preemption = watch(self._save, self._stop)

    def after_steps(self, executed: Executed) -> None:
        """Saves and stops when the cluster agreed to stop at this step.

        After the last step there is nothing left to stop (the run saves as it ends),
        so the handler is closed instead, while every task is still up: a thread of
        it still waiting on the chief when the chief exits dies with a traceback.
        """
        self._step = executed.last_step
        if self._step >= self._last_step:
            self._preemption.close()
            return
        self._preemption.save_if_preempted()

    def _save(self) -> None:
        self._checkpointing.save(self._step)

    def _stop(self) -> None:
        raise StopLoop(f"the cluster stopped after step {self._step}")
