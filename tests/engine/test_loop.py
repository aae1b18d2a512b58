"""The training loop and each of its hooks, with a fake step runner: no TensorFlow, milliseconds.

The runner's "dataset" is the step numbers themselves, and a step's loss is its
number over ten, so every report says which step it came from. The hooks' TensorFlow
sides (checkpoint manager, evaluator, model keeper, preemption handler) are fakes
that write down what they were asked, in one shared journal where order matters.
"""

from __future__ import annotations

import csv
import queue
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from distloop.engine.channel import Channel
from distloop.engine.loop import (
    NO_PAUSE,
    Executed,
    LoopEnd,
    LoopHook,
    LoopPlan,
    StopLoop,
    run_loop,
)
from distloop.engine.loop_hooks import (
    Checkpointing,
    Evaluation,
    KeepModel,
    Reporting,
    StopRequest,
    StopTogether,
)
from distloop.engine.messages import EvalMetrics, StepMetrics, parse_message
from distloop.engine.reporting import NonFiniteLossError, StepReporter
from distloop.engine.run_folder import EvalWriter

TESTS = Path(__file__).parent


def test_this_module_loads_without_tensorflow() -> None:
    """In a fresh interpreter: the loop, its hooks and these fakes never start TensorFlow."""
    code = (
        f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_loop; "
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "False"]


class FakeRunner:
    """Trains nothing; each step's loss is its element (the step number) over ten."""

    def __init__(self, journal: list[Any] | None = None, fail_at: int | None = None) -> None:
        self.journal = journal if journal is not None else []
        self.fail_at = fail_at

    def _loss(self, element: int) -> float:
        if element == self.fail_at:
            raise RuntimeError(f"step {element} failed")
        return element / 10

    def run_one(self, element: int) -> tuple[Any, Any]:
        self.journal.append(("run", element, 1))
        return self._loss(element), None

    def run_many(self, iterator: Iterator[int], count: int) -> tuple[Any, Any]:
        elements = [next(iterator) for _ in range(count)]
        self.journal.append(("run", elements[0], count))
        return np.asarray([self._loss(e) for e in elements]), None

    def input_wait(self) -> Any:
        return None

    def finish(self) -> Iterable[tuple[Any, Any]]:
        return ()


class AsyncRunner(FakeRunner):
    """Runs ``ahead`` steps ahead of the one asked for, as a parameter-server coordinator."""

    def __init__(self, ahead: int, last_step: int) -> None:
        super().__init__()
        self.ahead, self.last_step = ahead, last_step
        self.started = self.returned = 0

    def run_one(self, element: int) -> tuple[Any, Any]:
        self.started = min(max(self.started, element + self.ahead), self.last_step)
        self.returned = element
        return element / 10, None

    def finish(self) -> Iterable[tuple[Any, Any]]:
        for step in range(self.returned + 1, self.started + 1):
            yield step / 10, None


class Recorder(LoopHook):
    """Writes every event into the journal."""

    def __init__(self, journal: list[Any], stop_before: int | None = None) -> None:
        self.journal = journal
        self.stop_before = stop_before
        self.next_step = 1

    def should_stop(self) -> bool:
        return self.next_step == self.stop_before

    def after_steps(self, executed: Executed) -> None:
        self.next_step = executed.last_step + 1
        self.journal.append(("after", executed.first_step, executed.count))

    def on_evaluate(self, step: int, metrics: dict[str, float]) -> None:
        self.journal.append(("evaluated", step, metrics))

    def on_end(self, end: LoopEnd) -> None:
        self.journal.append(("end", end.last_step, end.stopped))

    def on_exception(self, error: BaseException) -> None:
        self.journal.append(("exception", str(error)))


class Pauses(LoopHook):
    def __init__(self, every: int) -> None:
        self.every = every

    def steps_until_pause(self, step: int) -> int:
        return self.every - (step - 1) % self.every


def steps(first: int, last: int) -> range:
    return range(first, last + 1)


def afters(journal: list[Any]) -> list[tuple[int, int]]:
    return [(entry[1], entry[2]) for entry in journal if entry[0] == "after"]


@pytest.mark.parametrize("epoch_form", [False, True])
def test_the_loop_runs_every_planned_step_once_in_order(epoch_form: bool) -> None:
    journal: list[Any] = []
    plan = LoopPlan(first_step=1, last_step=5, epoch_form=epoch_form)
    # The dataset has more elements than the plan's steps: the plan decides.
    end = run_loop(FakeRunner(journal), steps(1, 9), plan, [Recorder(journal)])
    assert [e for e in journal if e[0] == "run"] == [("run", s, 1) for s in steps(1, 5)]
    assert afters(journal) == [(s, 1) for s in steps(1, 5)]
    assert journal[-1] == ("end", 5, False)
    assert end == LoopEnd(first_step=1, last_step=5, stopped=False)


def test_fused_executions_are_cut_where_a_hook_pauses() -> None:
    """K = 4 with a pause every 3 steps: [1-3] [4-6] [7-9] [10], never across a pause."""
    journal: list[Any] = []
    plan = LoopPlan(first_step=1, last_step=10, steps_per_execution=4)
    run_loop(FakeRunner(journal), steps(1, 10), plan, [Pauses(3), Recorder(journal)])
    assert afters(journal) == [(1, 3), (4, 3), (7, 3), (10, 1)]
    # Without a pause the last execution is only as long as the steps left.
    journal.clear()
    run_loop(FakeRunner(journal), steps(1, 10), plan, [Recorder(journal)])
    assert afters(journal) == [(1, 4), (5, 4), (9, 2)]


def test_a_stop_request_ends_the_loop_between_executions() -> None:
    journal: list[Any] = []
    plan = LoopPlan(first_step=1, last_step=10)
    end = run_loop(FakeRunner(journal), steps(1, 10), plan, [Recorder(journal, stop_before=4)])
    assert afters(journal) == [(1, 1), (2, 1), (3, 1)]
    assert end == LoopEnd(first_step=1, last_step=3, stopped=True)
    assert journal[-1] == ("end", 3, True)


def test_a_resumed_loop_continues_from_its_first_step_and_its_clock() -> None:
    class Clock(LoopHook):
        def __init__(self) -> None:
            self.elapsed: list[float] = []

        def after_steps(self, executed: Executed) -> None:
            self.elapsed.append(executed.elapsed_s)

    clock = Clock()
    plan = LoopPlan(first_step=6, last_step=8, elapsed_offset_s=100.0)
    end = run_loop(FakeRunner(), steps(6, 8), plan, [clock])
    assert end == LoopEnd(first_step=6, last_step=8, stopped=False)
    assert 100.0 <= clock.elapsed[0] <= clock.elapsed[1] <= clock.elapsed[2] < 200.0
    # Stopped before its first step: nothing trained, the last step is the restored one.
    end = run_loop(FakeRunner(), steps(6, 8), plan, [StopRequest(lambda: True)])
    assert end == LoopEnd(first_step=6, last_step=5, stopped=True)
    assert not end.trained


def test_a_hook_that_raises_stop_loop_ends_it_as_a_stop_after_every_hook_before_it() -> None:
    journal: list[Any] = []

    class StopsAfterTwo(LoopHook):
        def after_steps(self, executed: Executed) -> None:
            if executed.last_step == 2:
                raise StopLoop("agreed")

    hooks = [Recorder(journal), StopsAfterTwo()]
    end = run_loop(FakeRunner(journal), steps(1, 5), LoopPlan(1, 5), hooks)
    assert afters(journal) == [(1, 1), (2, 1)]
    assert end.stopped and end.last_step == 2


def test_a_failed_step_reaches_every_hook_as_an_exception_and_never_as_an_end() -> None:
    journal: list[Any] = []
    with pytest.raises(RuntimeError, match="step 3 failed"):
        run_loop(FakeRunner(journal, fail_at=3), steps(1, 5), LoopPlan(1, 5), [Recorder(journal)])
    assert afters(journal) == [(1, 1), (2, 1)]
    assert journal[-1] == ("exception", "step 3 failed")
    assert not [e for e in journal if e[0] == "end"]


def test_steps_already_under_way_when_a_stop_comes_are_reported_too() -> None:
    """An asynchronous runner's steps ran: they are reported, in order, after the stop."""
    journal: list[Any] = []
    runner = AsyncRunner(ahead=3, last_step=10)
    end = run_loop(runner, steps(1, 10), LoopPlan(1, 10), [Recorder(journal, stop_before=4)])
    assert afters(journal) == [(s, 1) for s in steps(1, 6)]
    assert end == LoopEnd(first_step=1, last_step=6, stopped=True)
    # Every step had started when the stop came: the run trained them all, it finished.
    journal.clear()
    runner = AsyncRunner(ahead=3, last_step=10)
    end = run_loop(runner, steps(1, 10), LoopPlan(1, 10), [Recorder(journal, stop_before=8)])
    assert afters(journal) == [(s, 1) for s in steps(1, 10)]
    assert end == LoopEnd(first_step=1, last_step=10, stopped=False)


def test_hooks_run_in_list_order_and_the_pause_is_the_nearest_any_hook_asks_for() -> None:
    journal: list[Any] = []
    first, second = Recorder(journal), Recorder(journal)
    plan = LoopPlan(first_step=1, last_step=6, steps_per_execution=6)
    run_loop(FakeRunner(), steps(1, 6), plan, [first, Pauses(4), second, Pauses(5)])
    assert afters(journal) == [(1, 4), (1, 4), (5, 1), (5, 1), (6, 1), (6, 1)]
    assert Pauses(1).steps_until_pause(7) == 1
    assert LoopHook().steps_until_pause(1) == NO_PAUSE


# --- the hooks ---------------------------------------------------------------------------


def messages(out: queue.Queue[Any]) -> list[Any]:
    found = []
    while not out.empty():
        found.append(parse_message(out.get_nowait()))
    return found


def reported_steps(found: list[Any]) -> list[int]:
    return [step for m in found if isinstance(m, StepMetrics) for step in m.steps]


class FakeScalars:
    def __init__(self, journal: list[Any]) -> None:
        self.journal = journal

    def evaluation(self, step: int, metrics: dict[str, float]) -> None:
        self.journal.append(("scalars", step))

    def sync(self) -> None:
        self.journal.append(("sync",))


def reporting_for(
    out: queue.Queue[Any],
    journal: list[Any],
    eval_writer: EvalWriter | None = None,
    *,
    stop_on_nan: bool = True,
) -> Reporting:
    channel = Channel(out, None, None)

    class JournalingReporter(StepReporter):
        def flush(self) -> None:
            journal.append(("flush",))
            super().flush()

    # An interval no test reaches: a step is reported only when something flushes.
    reporter = JournalingReporter(channel, None, stop_on_nan=stop_on_nan, interval_s=3600)
    return Reporting(
        reporter, channel, eval_writer=eval_writer, scalars=FakeScalars(journal), eval_examples=7
    )


def test_reporting_sends_every_step_loss_once_flushed_and_at_the_end() -> None:
    out: queue.Queue[Any] = queue.Queue()
    journal: list[Any] = []
    reporting = reporting_for(out, journal)
    plan = LoopPlan(first_step=1, last_step=7, steps_per_execution=3)
    run_loop(FakeRunner(), steps(1, 7), plan, [reporting])
    found = messages(out)
    assert reported_steps(found) == list(steps(1, 7))
    losses = [loss for m in found if isinstance(m, StepMetrics) for loss in m.losses]
    assert losses == pytest.approx([s / 10 for s in steps(1, 7)])


def test_reporting_keeps_a_failed_runs_steps_and_stops_a_run_whose_loss_is_nan() -> None:
    out: queue.Queue[Any] = queue.Queue()
    reporting = reporting_for(out, [])
    with pytest.raises(RuntimeError):
        run_loop(FakeRunner(fail_at=4), steps(1, 9), LoopPlan(1, 9), [reporting])
    assert reported_steps(messages(out)) == [1, 2, 3]

    class NanAtThree(FakeRunner):
        def run_one(self, element: int) -> tuple[Any, Any]:
            return (float("nan") if element == 3 else element / 10), None

    with pytest.raises(NonFiniteLossError, match="step 3"):
        run_loop(NanAtThree(), steps(1, 9), LoopPlan(1, 9), [reporting_for(out, [])])


def test_reporting_writes_an_evaluation_then_says_it(tmp_path: Path) -> None:
    out: queue.Queue[Any] = queue.Queue()
    journal: list[Any] = []
    writer = EvalWriter(tmp_path / "eval.csv", ["val_loss", "val_mae"])
    reporting = reporting_for(out, journal, writer)
    reporting.on_evaluate(4, {"val_loss": 0.5, "val_mae": 0.25})
    writer.close()
    with (tmp_path / "eval.csv").open() as rows:
        assert list(csv.reader(rows))[1][:3] == ["4", "0.5", "0.25"]
    assert journal == [("scalars", 4)]
    (message,) = messages(out)
    assert message == EvalMetrics(step=4, metrics={"val_loss": 0.5, "val_mae": 0.25}, examples=7)
    reporting.record_durably()
    assert journal[-2:] == [("flush",), ("sync",)]


class FakeCheckpoints:
    def __init__(self, journal: list[Any]) -> None:
        self.journal = journal
        self.last_saved: int | None = None

    def save(self, step: int) -> None:
        self.journal.append(("save", step))
        self.last_saved = step


def test_checkpointing_saves_every_n_steps_after_recording_them_and_once_at_the_end() -> None:
    journal: list[Any] = []
    checkpoints = FakeCheckpoints(journal)
    hook = Checkpointing(checkpoints, 3, lambda: journal.append(("recorded",)))
    plan = LoopPlan(first_step=1, last_step=10, steps_per_execution=4)
    run_loop(FakeRunner(), steps(1, 10), plan, [hook])
    assert journal == [entry for s in (3, 6, 9, 10) for entry in (("recorded",), ("save", s))]
    # The last step saved already is not saved twice; a stop saves where it stopped.
    journal.clear()
    unrecorded = Checkpointing(checkpoints, 3, lambda: None)
    run_loop(FakeRunner(), steps(1, 9), LoopPlan(1, 9), [unrecorded])
    assert journal == [("save", 3), ("save", 6), ("save", 9)]
    journal.clear()
    run_loop(FakeRunner(), steps(1, 9), LoopPlan(1, 9), [Recorder([], 5), unrecorded])
    assert journal == [("save", 3), ("save", 4)]
    # A resumed run stopped before its first step has nothing new to save.
    journal.clear()
    run_loop(FakeRunner(), steps(4, 9), LoopPlan(4, 9), [hook, StopRequest(lambda: True)])
    assert journal == []
    # Without checkpoint_every, only the end saves, and nothing cuts a fused execution.
    assert Checkpointing(checkpoints, None, list).steps_until_pause(1) == NO_PAUSE


class FakeEvaluator:
    every = 2

    def __init__(self, journal: list[Any]) -> None:
        self.journal = journal
        self.calls = 0

    def evaluate(self) -> dict[str, float]:
        self.calls += 1
        self.journal.append(("evaluate",))
        return {"val_loss": 1.0 / self.calls}


def test_evaluation_comes_after_the_steps_it_follows_are_reported() -> None:
    out: queue.Queue[Any] = queue.Queue()
    journal: list[Any] = []
    reporting = reporting_for(out, journal)
    listener = Recorder(journal)
    evaluation = Evaluation(FakeEvaluator(journal), reporting.flush, [listener, reporting])
    plan = LoopPlan(first_step=1, last_step=5, steps_per_execution=4)
    run_loop(FakeRunner(), steps(1, 5), plan, [reporting, evaluation])
    assert [e for e in journal if e[0] != "flush"] == [
        ("evaluate",),
        ("evaluated", 2, {"val_loss": 1.0}),
        ("scalars", 2),
        ("evaluate",),
        ("evaluated", 4, {"val_loss": 0.5}),
        ("scalars", 4),
    ]
    kinds = [(type(m).__name__, getattr(m, "step", None)) for m in messages(out)]
    # Fused executions are cut at each evaluation step, whose losses go out before it.
    assert kinds == [
        ("StepMetrics", None),
        ("EvalMetrics", 2),
        ("StepMetrics", None),
        ("EvalMetrics", 4),
        ("StepMetrics", None),
    ]


class FakeKeeper:
    def __init__(self) -> None:
        self.remembered: list[tuple[int, float]] = []
        self.saved: list[int] = []

    def remember(self, step: int, val_loss: float) -> None:
        self.remembered.append((step, val_loss))

    def save(self, last_step: int) -> None:
        self.saved.append(last_step)


def test_keep_model_remembers_each_new_lowest_finite_val_loss_and_saves_at_the_end() -> None:
    keeper = FakeKeeper()
    keeping = KeepModel(keeper)
    for step, val_loss in [(5, 1.0), (10, 0.5), (15, float("nan")), (20, 0.7), (25, 0.4)]:
        keeping.on_evaluate(step, {"val_loss": val_loss})
    keeping.on_evaluate(30, {"val_mae": 0.0})
    assert keeper.remembered == [(5, 1.0), (10, 0.5), (25, 0.4)]
    run_loop(FakeRunner(), steps(1, 3), LoopPlan(1, 3), [keeping])
    assert keeper.saved == [3]


def test_keep_model_saves_nothing_for_a_failed_run_or_one_that_never_trained() -> None:
    keeper = FakeKeeper()
    with pytest.raises(RuntimeError):
        run_loop(FakeRunner(fail_at=2), steps(1, 3), LoopPlan(1, 3), [KeepModel(keeper)])
    stop_now = StopRequest(lambda: True)
    run_loop(FakeRunner(), steps(1, 3), LoopPlan(1, 3), [KeepModel(keeper), stop_now])
    assert keeper.saved == []
    # A resumed run stopped at once still has its earlier part's model to save.
    run_loop(FakeRunner(), steps(6, 9), LoopPlan(6, 9), [KeepModel(keeper), stop_now])
    assert keeper.saved == [5]


def test_stop_request_asks_the_run_before_every_execution() -> None:
    asked: list[int] = []

    def requested() -> bool:
        asked.append(len(asked) + 1)
        return len(asked) == 3

    end = run_loop(FakeRunner(), steps(1, 9), LoopPlan(1, 9), [StopRequest(requested)])
    assert asked == [1, 2, 3]
    assert end.last_step == 2 and end.stopped


class FakePreemption:
    """Agrees to stop on its ``agree_at``-th question, as the cluster's handler would."""

    def __init__(self, save: Any, stop: Any, journal: list[Any], agree_at: int | None) -> None:
        self.save, self.stop, self.journal, self.agree_at = save, stop, journal, agree_at
        self.asked = 0

    def save_if_preempted(self) -> None:
        self.asked += 1
        self.journal.append(("asked",))
        if self.asked == self.agree_at:
            self.save()
            self.stop()

    def close(self) -> None:
        self.journal.append(("closed",))


def stop_together(journal: list[Any], agree_at: int | None, last_step: int) -> list[LoopHook]:
    checkpointing = Checkpointing(FakeCheckpoints(journal), 4, lambda: None)
    evaluation = Evaluation(FakeEvaluator(journal), lambda: None, [])

    def watch(save: Any, stop: Any) -> FakePreemption:
        return FakePreemption(save, stop, journal, agree_at)

    return [checkpointing, evaluation, StopTogether(watch, checkpointing, last_step)]


def test_stop_together_saves_and_stops_where_the_cluster_agreed_after_that_steps_jobs() -> None:
    journal: list[Any] = []
    end = run_loop(FakeRunner(), steps(1, 9), LoopPlan(1, 9), stop_together(journal, 2, 9))
    assert end == LoopEnd(first_step=1, last_step=2, stopped=True)
    # Step 2's evaluation came first; the agreed save is the step's one checkpoint.
    assert journal == [("asked",), ("evaluate",), ("asked",), ("save", 2)]


def test_stop_together_closes_the_handler_after_the_last_step_instead_of_asking() -> None:
    journal: list[Any] = []
    plan = LoopPlan(1, 4, steps_per_execution=2)
    end = run_loop(FakeRunner(), steps(1, 4), plan, stop_together(journal, None, 4))
    assert end == LoopEnd(first_step=1, last_step=4, stopped=False)
    # One question per execution (the handler counts executions, equal on every task).
    assert journal == [("evaluate",), ("asked",), ("save", 4), ("evaluate",), ("closed",)]


class Timings(LoopHook):
    def __init__(self) -> None:
        self.executed: list[Executed] = []

    def after_steps(self, executed: Executed) -> None:
        self.executed.append(executed)


def slow_elements(first: int, last: int, delay_s: float) -> Iterator[int]:
    """A pipeline that takes ``delay_s`` for each element, as slow data code does."""
    for element in range(first, last + 1):
        time.sleep(delay_s)
        yield element


@pytest.mark.parametrize("epoch_form", [False, True])
def test_the_loop_times_each_step_s_wait_for_its_input(epoch_form: bool) -> None:
    """Each element took at least 20 ms to come: the wait the loop reports is at least
    that (a lower bound the sleep guarantees, not a speed), and within the step's time."""
    timings = Timings()
    plan = LoopPlan(1, 4, epoch_form=epoch_form)
    run_loop(FakeRunner(), slow_elements(1, 4, 0.02), plan, [timings])
    assert [e.first_step for e in timings.executed] == [1, 2, 3, 4]
    for executed in timings.executed:
        assert 0.02 <= executed.input_wait_s <= executed.step_s


def test_a_fused_execution_s_wait_is_what_its_runner_timed() -> None:
    class TimingRunner(FakeRunner):
        def input_wait(self) -> Any:
            return "the runner's tensor"

    timings = Timings()
    run_loop(TimingRunner(), steps(1, 6), LoopPlan(1, 6, steps_per_execution=3), [timings])
    assert [(e.count, e.input_wait_s) for e in timings.executed] == [
        (3, "the runner's tensor"),
        (3, "the runner's tensor"),
    ]
