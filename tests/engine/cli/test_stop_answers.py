"""How the command line answers Ctrl-C, SIGTERM and its control channel: through the run's
session, as the window's Stop does. A scripted handle and clock: the closed channel's grace
is a number, never a wait (the real processes are tests/engine/cli/test_stop_signals.py's
and tests/engine/cluster/test_launch.py's)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import TextIO

import pytest
from distloop.engine.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED
from distloop.engine.cli.following import _StopAnswers
from distloop.engine.message_stream import CHANNEL_CLOSED_GRACE_S, ControlChannel
from distloop.engine.run_events import RunFailure, RunOutcome
from distloop.engine.run_model import RunModel
from distloop.engine.run_session import RunSession
from support.scripted_runs import Clock, ScriptedHandle

STOPPING = ("stopping after the current step", "to kill", "killing the engine")
STOPPED = RunOutcome("stopped", 4, 0.5, 4.0)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def cli_session(clock: Clock) -> tuple[RunSession, ScriptedHandle]:
    """The command line's session: a stop waits as long as the engine takes."""
    handle = ScriptedHandle()
    session = RunSession(RunModel(), kill_after_s=None, save_within_s=None, clock=clock)
    session.start(handle)
    return session, handle


@pytest.fixture
def channel() -> Iterator[tuple[ControlChannel, TextIO]]:
    """A control channel reading a pipe, and the pipe's end the launcher writes to."""
    read_end, write_end = os.pipe()
    with open(read_end) as stream, open(write_end, "w") as launcher:
        yield ControlChannel(stream), launcher


def send(launcher: TextIO, line: str, heard: threading.Event) -> None:
    launcher.write(line + "\n")
    launcher.flush()
    assert heard.wait(timeout=30)


def test_sigterm_stops_and_a_second_signal_kills(clock: Clock, capsys) -> None:
    session, handle = cli_session(clock)
    answers = _StopAnswers(session, STOPPING, None)
    answers.note(signal.SIGTERM, None)
    answers.answer()
    assert handle.stops == 1 and not handle.killed
    clock.now += 3600.0  # the step and the saves take what they take
    assert session.tick() is None and not handle.killed
    answers.note(signal.SIGINT, None)
    answers.answer()
    assert handle.kills == 1 and session.killed
    assert answers.exit_code(STOPPED) == EXIT_TERMINATED  # the first signal's code
    assert capsys.readouterr().err.splitlines() == [
        "distloop: SIGTERM: stopping after the current step (SIGTERM again to kill)",
        "distloop: Ctrl-C again: killing the engine",
    ]


def test_a_closed_control_channel_stops_then_kills_after_its_grace(
    clock: Clock, channel: tuple[ControlChannel, TextIO], capsys
) -> None:
    """The launcher that started the run is gone: no task may run on for ever, though it
    stopped stepping and saves."""
    session, handle = cli_session(clock)
    control, launcher = channel
    launcher.close()
    assert control.closed.wait(timeout=30)
    answers = _StopAnswers(session, STOPPING, control)
    answers.answer()
    assert handle.stops == 1 and not handle.killed
    assert session.due_in_s == CHANNEL_CLOSED_GRACE_S
    clock.now += CHANNEL_CLOSED_GRACE_S - 1.0
    answers.answer()  # the closed channel is answered once
    assert session.tick() is None and handle.stops == 1 and not handle.killed
    clock.now += 1.0
    assert session.tick() is not None and handle.kills == 1
    assert answers.exit_code(STOPPED) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines() == [
        "distloop: the control channel closed: stopping after the current step"
    ]


def test_the_control_channel_s_stop_is_a_ctrl_c(
    clock: Clock, channel: tuple[ControlChannel, TextIO], capsys
) -> None:
    session, handle = cli_session(clock)
    control, launcher = channel
    answers = _StopAnswers(session, STOPPING, control)
    send(launcher, "stop", control.stop_requested)
    answers.answer()
    answers.answer()  # the line is answered once
    assert handle.stops == 1 and not handle.killed and session.due_in_s is None
    assert answers.exit_code(STOPPED) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines() == [
        "distloop: Ctrl-C: stopping after the current step (Ctrl-C again to kill)",
    ]


def test_a_stop_line_and_the_channel_s_end_in_one_poll_stop_the_run(
    clock: Clock, channel: tuple[ControlChannel, TextIO], capsys
) -> None:
    """A launcher that writes ``stop`` and exits: both arrive before the next poll. They
    used to be answered end first, so the stop counted as a second Ctrl-C and killed the
    engine, losing the checkpoint the stop would have saved."""
    session, handle = cli_session(clock)
    control, launcher = channel
    answers = _StopAnswers(session, STOPPING, control)
    send(launcher, "stop", control.stop_requested)
    launcher.close()
    assert control.closed.wait(timeout=30)
    answers.answer()
    assert handle.stops == 1 and not handle.killed
    assert answers.exit_code(STOPPED) == EXIT_INTERRUPTED
    clock.now += CHANNEL_CLOSED_GRACE_S + 1  # no launcher: the grace still ends it
    session.tick()
    assert handle.killed
    assert capsys.readouterr().err.splitlines()[:2] == [
        "distloop: Ctrl-C: stopping after the current step (Ctrl-C again to kill)",
        "distloop: the control channel closed: stopping after the current step",
    ]


def test_the_control_channel_s_kill_kills(
    clock: Clock, channel: tuple[ControlChannel, TextIO], capsys
) -> None:
    session, handle = cli_session(clock)
    control, launcher = channel
    answers = _StopAnswers(session, STOPPING, control)
    send(launcher, "kill", control.kill_requested)
    answers.answer()
    assert handle.kills == 1 and session.killed and handle.stops == 0
    assert answers.exit_code(STOPPED) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines() == [
        "distloop: asked to kill the run: killing the engine"
    ]


def test_a_run_ends_with_its_own_exit_code_unless_a_stop_asked_for_another(clock: Clock) -> None:
    session, _ = cli_session(clock)
    answers = _StopAnswers(session, STOPPING, None)
    assert answers.exit_code(STOPPED) == EXIT_OK
    failed = RunOutcome("failed", None, failure=RunFailure("ValueError", "bad data"))
    answers.note(signal.SIGINT, None)
    answers.answer()
    assert answers.exit_code(STOPPED) == EXIT_INTERRUPTED
    assert answers.exit_code(failed) == EXIT_FAILED  # a failure is one, however it was stopped
