"""One run's stop and kill, as the window and the command line share them: a scripted handle
and a scripted clock, so every wait is a number, never a sleep."""

from __future__ import annotations

import pytest
from distloop.engine.messages import Message, RunFinished, StepMetrics, Stopping
from distloop.engine.run_events import RunEvent, SteppingStopped
from distloop.engine.run_model import RunModel
from distloop.engine.run_session import KILL_AFTER_S, SAVE_WITHIN_S, Overdue, RunSession
from support.scripted_runs import Clock, ScriptedHandle


def steps(first: int, last: int, seconds_each: float) -> StepMetrics:
    numbers = list(range(first, last + 1))
    return StepMetrics(
        steps=numbers, losses=[0.5] * len(numbers), elapsed_s=[n * seconds_each for n in numbers]
    )


STOPPED = RunFinished(status="stopped", last_step=4, final_loss=0.5, elapsed_s=4.0)


def running(
    clock: Clock, *batches: list[Message], **waits: float | None
) -> tuple[RunSession, ScriptedHandle]:
    """A session on ``clock`` that started ``batches``' handle and took its first batch."""
    handle = ScriptedHandle(*batches)
    session = RunSession(RunModel(), clock=clock, **waits)  # type: ignore[arg-type]
    session.start(handle)
    take_next(session)
    return session, handle


def take_next(session: RunSession) -> None:
    for message in session.poll():
        session.take(message)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_stop_the_engine_honours_ends_the_run_stopped_and_nothing_is_killed(clock: Clock) -> None:
    session, handle = running(clock, [steps(1, 4, 0.1)], [Stopping(last_step=4), STOPPED])
    assert handle.started == 1 and session.model.last_step == 4 and not session.done
    assert session.request_stop() and not session.request_stop()  # asked once
    assert handle.stops == 1 and session.model.status == "stopping"
    assert session.stop_asked_at == 1000.0 and session.due_in_s == KILL_AFTER_S
    take_next(session)
    assert session.done and session.outcome is not None and session.outcome.status == "stopped"
    assert session.due_in_s is None  # the run ended: no wait runs on
    clock.now += SAVE_WITHIN_S
    assert session.tick() is None and handle.kills == 0
    assert session.stop_requested and not session.killed


def test_an_engine_that_does_not_finish_its_step_is_killed_when_the_wait_runs_out(
    clock: Clock,
) -> None:
    session, handle = running(clock, [steps(1, 4, 0.1)])
    session.request_stop()
    clock.now += KILL_AFTER_S - 0.01
    assert session.tick() is None and handle.kills == 0
    assert session.due_in_s == pytest.approx(0.01)
    clock.now += 0.01
    assert session.tick() == Overdue("step", KILL_AFTER_S)
    assert handle.kills == 1 and session.killed and session.done and session.due_in_s is None


def test_a_slow_step_is_waited_for_three_times_its_length(clock: Clock) -> None:
    """Executions of 10 s: a stop waits 30 s for the one under way, not 5 s."""
    session, handle = running(
        clock, [steps(1, 2, 10.0)], [steps(3, 3, 10.0)], steps_per_execution=1
    )
    take_next(session)
    session.request_stop()
    assert session.due_in_s == pytest.approx(30.0)
    clock.now += 29.0
    assert session.tick() is None
    clock.now += 1.0
    assert session.tick() == Overdue("step", pytest.approx(30.0))  # type: ignore[arg-type]
    assert handle.killed


def test_an_engine_with_its_own_stop_grace_gets_it_and_a_little_more(clock: Clock) -> None:
    handle = ScriptedHandle()
    handle.stop_grace_s = 10.0  # type: ignore[attr-defined]
    session = RunSession(RunModel(), clock=clock)
    session.start(handle)
    session.request_stop()
    assert session.due_in_s == 12.0
    given = RunSession(RunModel(), stop_grace_s=20.0, clock=clock)  # the caller knows better
    given.start(ScriptedHandle())
    given.request_stop()
    assert given.due_in_s == 22.0


def test_once_the_engine_stopped_stepping_its_saves_get_their_own_wait(clock: Clock) -> None:
    stopping = Stopping(last_step=4, saving=["the checkpoint", "the model"])
    session, handle = running(clock, [steps(1, 4, 0.1)], [stopping])
    heard: list[RunEvent] = []
    session.model.subscribe(heard.append)
    session.request_stop()
    clock.now += 1.0
    take_next(session)
    assert session.stopped_stepping == (1001.0, heard[-1])
    assert heard[-1] == SteppingStopped(4, ("the checkpoint", "the model"))
    clock.now += KILL_AFTER_S  # the step's wait is over: the saves are waited for now
    assert session.tick() is None and not handle.killed
    assert session.due_in_s == pytest.approx(SAVE_WITHIN_S - KILL_AFTER_S)
    clock.now = 1001.0 + SAVE_WITHIN_S
    assert session.tick() == Overdue("saves", SAVE_WITHIN_S, ("the checkpoint", "the model"))
    assert handle.killed and session.killed


def test_the_end_of_saves_that_finished_is_kept_for_the_log(clock: Clock) -> None:
    session, _ = running(clock, [steps(1, 4, 0.1)], [Stopping(last_step=4, saving=["the model"])])
    session.request_stop()
    take_next(session)
    clock.now += 3.0
    session.take(STOPPED)
    assert session.stopped_stepping is not None
    assert session.ended_at is not None and session.ended_at - session.stopped_stepping[0] == 3.0


def test_an_engine_that_stops_by_itself_is_no_stop_of_the_session(clock: Clock) -> None:
    """A pruner's or a cluster's own stop: the session waits for nothing and kills nothing."""
    session, handle = running(clock, [steps(1, 4, 0.1)], [Stopping(last_step=4)])
    take_next(session)
    assert session.stopped_stepping is None and session.due_in_s is None
    clock.now += 10 * SAVE_WITHIN_S
    assert session.tick() is None and not handle.killed


def test_without_waits_a_stop_waits_as_long_as_the_engine_takes(clock: Clock) -> None:
    """The command line's stop: the step and the saves take what they take; a second
    Ctrl-C is the user's kill."""
    session, handle = running(
        clock, [steps(1, 4, 0.1)], [Stopping(last_step=4)], kill_after_s=None, save_within_s=None
    )
    session.request_stop()
    assert session.due_in_s is None
    take_next(session)
    assert session.stopped_stepping is not None and session.due_in_s is None
    clock.now += 10 * SAVE_WITHIN_S
    assert session.tick() is None and not handle.killed
    session.kill()
    assert handle.kills == 1 and session.killed and session.stop_requested


def test_a_deadline_for_the_end_is_kept_whatever_the_engine_does(clock: Clock) -> None:
    """The launcher that started the run is gone: stop, then kill after the grace, though
    the engine stopped stepping and saves."""
    session, handle = running(
        clock, [steps(1, 4, 0.1)], [Stopping(last_step=4)], kill_after_s=None, save_within_s=None
    )
    session.request_stop()
    session.kill_after(15.0)
    clock.now += 5.0
    session.kill_after(15.0)  # a later deadline does not put it off
    take_next(session)
    assert session.due_in_s == 10.0
    clock.now += 10.0
    assert session.tick() == Overdue("end", 15.0)
    assert handle.kills == 1


def test_a_kill_is_the_last_word(clock: Clock) -> None:
    session, handle = running(clock, [steps(1, 4, 0.1)])
    session.request_stop()
    session.kill()
    assert handle.kills == 1 and session.killed and session.due_in_s is None
    session.kill()  # the engine is gone: nothing more to kill
    clock.now += SAVE_WITHIN_S
    assert session.tick() is None and handle.kills == 1


def test_a_kill_without_a_stop_asks_for_none(clock: Clock) -> None:
    session, handle = running(clock, [steps(1, 4, 0.1)])
    session.kill()
    assert session.stop_requested and session.killed and session.stop_asked_at is None
    assert handle.stops == 0 and handle.kills == 1


def test_a_lost_stream_kills_the_engine_but_is_no_kill_on_request(clock: Clock) -> None:
    session, handle = running(clock, [steps(1, 4, 0.1)], [Stopping(last_step=4)])
    session.request_stop()
    take_next(session)
    session.lost()
    assert handle.killed and not session.killed
    assert session.stopped_stepping is None and session.due_in_s is None


def test_an_engine_that_never_started_cannot_be_stopped_or_killed(clock: Clock) -> None:
    class Refuses(ScriptedHandle):
        def start(self) -> None:
            raise OSError("no more processes")

    session = RunSession(RunModel(), clock=clock)
    with pytest.raises(OSError):
        session.start(Refuses())
    assert session.handle is None and session.done and session.poll() == []
    assert not session.request_stop()
    session.kill()
    assert not session.killed and not session.stop_requested
