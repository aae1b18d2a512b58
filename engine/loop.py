"""The training loop and its hooks, as Orbit, Keras and Lightning shape them (no TensorFlow).

The loop knows three things only: how many steps to run, in executions of how
many steps (:class:`LoopPlan`), a *step runner* that trains them (the guide's
``strategy.run`` + ``reduce(SUM)`` step, or a parameter-server coordinator's
schedule, both in ``engine.tf``), and a list of *hooks*, plain objects that each
do one job between executions: report, checkpoint, evaluate, stop, keep the
model (``engine.loop_hooks``). This is Keras's ``CallbackList`` and Orbit's
actions: the loop calls every hook's events in list order, so the order of the
list is the order of the jobs (a checkpoint before the evaluation of the same
step, a cluster's agreed stop after both).

Nothing here fetches a loss or touches TensorFlow: an execution's losses reach
the hooks as the runner returned them (tensors, fetched in batches by the
reporting hook), so the loop runs, and is tested, with a fake runner in
milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

NO_PAUSE = 1 << 30
"""What a hook that never needs the loop to pause answers to ``steps_until_pause``."""


@dataclass(frozen=True)
class LoopPlan:
    first_step: int
    last_step: int
    steps_per_execution: int = 1
    epoch_form: bool = False
    """Iterate ``for dist_inputs in dist_dataset`` (the guide's first form) when K is 1."""
    elapsed_offset_s: float = 0.0
    """Seconds already trained before a resume, so elapsed time keeps counting up."""


@dataclass(frozen=True)
class Executed:
    """One execution of the step function: ``count`` steps from ``first_step`` on."""

    first_step: int
    count: int
    losses: Any
    """The reduced loss(es) as the runner returned them, not fetched: one value per step
    (a scalar for one step, a vector for a fused execution), or a dict of them by name."""
    replica_losses: Any
    """The local replicas' losses, when the run reports them; else None."""
    elapsed_s: float
    """The training clock when the execution returned."""
    step_s: float = 0.0
    """Seconds from asking for its input to the step function's return."""
    input_wait_s: Any = None
    """Of those, the seconds spent waiting for the input: a float the loop measured around
    ``next``, or what a fused execution's runner reports (a tensor, unfetched; None where it
    cannot tell). ``engine.system_metrics`` adds them up off the training thread."""

    @property
    def last_step(self) -> int:
        return self.first_step + self.count - 1


@dataclass(frozen=True)
class LoopEnd:
    first_step: int
    last_step: int
    """The last step trained: ``first_step - 1`` when none was."""
    stopped: bool
    """A stop request ended the loop before its last planned step."""

    @property
    def trained(self) -> bool:
        return self.last_step >= self.first_step


class StepRunner(Protocol):
    """Trains steps; what comes back is one step's (or K fused steps') losses, unfetched."""

    def run_one(self, element: Any) -> tuple[Any, Any]:
        """One step on one element of the loop's dataset: (losses, replica losses or None)."""
        ...

    def run_many(self, iterator: Any, count: int) -> tuple[Any, Any]:
        """``count`` steps in one call, taking their elements from ``iterator``."""
        ...

    def input_wait(self) -> Any:
        """Seconds the last ``run_many`` waited for its elements, as the runner has them
        (a tensor is not fetched here: that would wait for the step); None if unknown."""
        ...

    def finish(self) -> Iterable[tuple[Any, Any]]:
        """The results of steps already under way when the loop stopped, in order.

        A synchronous runner has none; an asynchronous one (a parameter-server
        coordinator schedules steps ahead) hands them over, so every step that
        changed the model is reported.
        """
        ...


class StopLoop(Exception):
    """Raised by a hook's ``after_steps`` to end the loop there, as a stop request would."""


class LoopHook:
    """One job done between executions; every event does nothing unless overridden.

    Events, in the order the loop calls them:

    - ``steps_until_pause(step)`` before an execution from ``step``: how many steps,
      ``step`` included, until this hook must run (a fused execution is cut there);
    - ``should_stop()`` before every execution: True ends the loop as stopped;
    - ``after_steps(executed)`` after every execution (may raise :class:`StopLoop`);
    - ``on_evaluate(step, metrics)``: given by the evaluation hook to the hooks it feeds;
    - ``on_end(end)`` when the loop ended, by its last step or a stop;
    - ``on_exception(error)`` instead, when training failed (the error then propagates).
    """

    def steps_until_pause(self, step: int) -> int:
        return NO_PAUSE

    def should_stop(self) -> bool:
        return False

    def after_steps(self, executed: Executed) -> None:
        pass

    def on_evaluate(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def on_end(self, end: LoopEnd) -> None:
        pass

    def on_exception(self, error: BaseException) -> None:
        pass


class HookList:
    """Calls each event on every hook, in list order (Keras's ``CallbackList``)."""

    def __init__(self, hooks: Sequence[LoopHook]) -> None:
        self._hooks = list(hooks)

    def steps_until_pause(self, step: int) -> int:
        return min((hook.steps_until_pause(step) for hook in self._hooks), default=NO_PAUSE)

    def should_stop(self) -> bool:
        return any(hook.should_stop() for hook in self._hooks)

    def after_steps(self, executed: Executed) -> None:
        for hook in self._hooks:
            hook.after_steps(executed)

    def on_end(self, end: LoopEnd) -> None:
        for hook in self._hooks:
            hook.on_end(end)

    def on_exception(self, error: BaseException) -> None:
        for hook in self._hooks:
            hook.on_exception(error)


def run_loop(
    runner: StepRunner, dataset: Iterable[Any], plan: LoopPlan, hooks: Sequence[LoopHook]
) -> LoopEnd:
    """Runs the planned steps, calling the hooks between executions.

    Stop requests are honoured between executions only, so a stopped run's model,
    optimizer and metrics always describe whole steps.
    """
    events = HookList(hooks)
    start = time.perf_counter() - plan.elapsed_offset_s
    step = plan.first_step
    stop_requested = False

    def executed(
        first: int, count: int, result: tuple[Any, Any], began: float, waited: Any = None
    ) -> None:
        losses, replicas = result
        now = time.perf_counter()
        events.after_steps(
            Executed(first, count, losses, replicas, now - start, now - began, waited)
        )

    try:
        try:
            if plan.steps_per_execution == 1 and plan.epoch_form:
                asked = time.perf_counter()
                for element in dataset:
                    got = time.perf_counter()
                    if step > plan.last_step:
                        break
                    if events.should_stop():
                        stop_requested = True
                        break
                    step += 1
                    executed(step - 1, 1, runner.run_one(element), asked, got - asked)
                    asked = time.perf_counter()
            else:
                iterator = iter(dataset)
                while step <= plan.last_step:
                    if events.should_stop():
                        stop_requested = True
                        break
                    count = min(plan.steps_per_execution, plan.last_step - step + 1)
                    count = max(1, min(count, events.steps_until_pause(step)))
                    step += count
                    asked = time.perf_counter()
                    if count == 1 and plan.steps_per_execution == 1:
                        element = next(iterator)
                        waited = time.perf_counter() - asked
                        executed(step - 1, 1, runner.run_one(element), asked, waited)
                    else:
                        result = runner.run_many(iterator, count)
                        executed(step - count, count, result, asked, runner.input_wait())
            if stop_requested:
                for result in runner.finish():
                    step += 1
                    executed(step - 1, 1, result, time.perf_counter())
        except StopLoop:
            stop_requested = True
    except BaseException as error:
        events.on_exception(error)
        raise
    end = LoopEnd(plan.first_step, step - 1, stopped=stop_requested and step <= plan.last_step)
    events.on_end(end)
    return end
