"""A run in the foreground: the engine started, its messages printed (or, with
``--messages``, passed on as JSON lines), Ctrl-C, SIGTERM and SIGUSR1 answered, until it
ends.

Every command that runs something ends here: a single run, a local or launched cluster
and a followed Slurm job alike, so each prints, stops and exits the same way; a
cluster's ``--max-restarts`` is answered here too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TextIO

from ..cluster.blame import PEER_ERRORS, STALLED
from ..engine_handle import ClusterHandle, EngineHandle
from ..fileio import open_text
from ..formatting import format_duration
from ..message_stream import CHANNEL_CLOSED_GRACE_S, ControlChannel, write_message
from ..messages import Message, secondary_losses
from ..mlflow_log import LiveLogger, LiveSettings
from ..run_events import (
    Evaluated,
    Logged,
    PhaseChanged,
    RunEvent,
    RunOutcome,
    RunPhase,
    Started,
    StatusChanged,
    SteppingStopped,
    StepsAdded,
)
from ..run_folder import MESSAGES_FILE, format_loss, read_status, update_status
from ..run_model import RunModel
from ..run_session import RunSession
from ..run_start import OpenedRun, RunRefused, RunRequest, open_requested
from .common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, _err
from .mlflow_command import live_settings


def run_in_foreground(
    opened: OpenedRun,
    *,
    quiet: bool,
    verbose: bool,
    as_messages: bool = False,
    record_messages: bool = False,
    mlflow: LiveSettings | None = None,
) -> int:
    """Runs the opened run's engine and prints its messages; Ctrl-C stops it between steps.

    ``record_messages`` appends every message to the run folder's ``messages.jsonl``
    too (a resumed run's after its first start's), for a follower elsewhere.
    """
    engine, run_dir = opened.handle, opened.folder
    if not record_messages:
        return follow(
            engine, run_dir, quiet=quiet, verbose=verbose, as_messages=as_messages, mlflow=mlflow
        )
    try:
        record = open_text(run_dir / MESSAGES_FILE, "a")
    except OSError as exc:
        engine.close()  # never started: its folder's lock is let go
        _err(f"distloop: cannot write {run_dir / MESSAGES_FILE}: {exc.strerror or exc}")
        return EXIT_FAILED
    with record:
        return follow(
            engine,
            run_dir,
            quiet=quiet,
            verbose=verbose,
            as_messages=as_messages,
            record=record,
            mlflow=mlflow,
        )


_STOP_SIGNALS = {
    signal.SIGINT: ("Ctrl-C", EXIT_INTERRUPTED),
    signal.SIGTERM: ("SIGTERM", EXIT_TERMINATED),
}


def follow(
    engine: EngineHandle,
    run_dir: Path,
    *,
    quiet: bool,
    verbose: bool,
    as_messages: bool = False,
    record: TextIO | None = None,
    mlflow: LiveSettings | None = None,
    stopping: tuple[str, str, str] = (
        "stopping after the current step",
        "to kill",
        "killing the engine",
    ),
) -> int:
    """Starts the run and prints its messages until it ends; Ctrl-C stops it between steps.

    ``as_messages`` (``--messages``): stdout carries the protocol messages as JSON
    lines and standard input is the control channel (``engine.message_stream``): a
    ``stop`` line is a Ctrl-C, and its end stops the run, then kills it after
    :data:`CHANNEL_CLOSED_GRACE_S`: the launcher that started it is gone.

    SIGTERM (kill, systemd, Slurm, Kubernetes) is a Ctrl-C too, with exit code 143
    instead of 130. The second of either kills the engine: the run then ends
    ``stopped (killed on request)``, resumable from its last checkpoint. The loop
    answers each between polls (``_StopAnswers``) by asking the run's session
    (``engine.run_session``) to stop or kill, as the window's Stop does. The printer is
    a view of the run's model, as the window's panels are.

    ``stopping`` says what the first stop does, what a second would, and what it does
    (a Slurm job's differ).
    ``record`` gets every message as a JSON line too. SIGUSR1 (``scancel --signal=USR1``,
    which reaches a Slurm task's first process only) is passed on to the engine process,
    which writes its stacks (``engine.stack_dumps``); it would otherwise end this one.
    ``mlflow`` logs the run to MLflow as it trains, as one run (``engine.mlflow_log``).
    """
    session = RunSession(RunModel(run_dir=run_dir), kill_after_s=None, save_within_s=None)
    try:  # a stop waits as long as the step and the saves take: a second Ctrl-C kills
        session.start(engine)
    except OSError as exc:
        _err(f"distloop: cannot start the run in {run_dir}: {exc.strerror or exc}")
        return EXIT_FAILED
    answers = _StopAnswers(session, stopping, ControlChannel() if as_messages else None)
    previous = _note_signals(engine, answers)
    live = _live_logger(mlflow, run_dir)
    if live is not None:
        session.model.subscribe(live.on_event)
    if not as_messages:
        session.model.subscribe(_printer(session.model, quiet=quiet, verbose=verbose))
    try:
        _err(f"distloop: run folder {run_dir}")
        while not session.done:
            for message in session.poll(0.5):
                session.take(message)
                _pass_on(message, record, as_messages=as_messages)
                if session.outcome is not None:
                    return answers.exit_code(session.outcome)
            answers.answer()
            session.tick()
    finally:
        engine.close()
        for number, handler in previous.items():
            signal.signal(number, handler)
        if live is not None:
            _close_live_logger(live)
    return EXIT_FAILED


class _StopAnswers:
    """Ctrl-C, SIGTERM and the control channel's lines, answered between polls by the
    run's session: the first asks it to stop, the second kills; a closed channel stops,
    then kills after :data:`CHANNEL_CLOSED_GRACE_S`. The signal handlers only note the
    signal (:meth:`note`): an exception raised wherever a signal lands could cut a
    message or the cleanup in half.
    """

    def __init__(
        self,
        session: RunSession,
        stopping: tuple[str, str, str],
        control: ControlChannel | None,
    ) -> None:
        self._session = session
        self._stopping = stopping
        self._control = control
        self._received: list[int] = []
        self._answered = 0
        self._channel_closed = False
        self._stop_exit: int | None = None
        """The exit code of the first Ctrl-C or SIGTERM (or the control channel's stop)."""

    def note(self, signum: int, _frame: FrameType | None) -> None:
        self._received.append(signum)

    def answer(self) -> None:
        """Answers what came since the last poll: a ``stop`` line and the signals, in the
        order they came, then the control channel's ``kill`` and its end, so a stop and
        the launcher's exit in one poll stop the run rather than kill it."""
        control = self._control
        if control is not None and control.stop_requested.is_set() and self._stop_exit is None:
            self._received.append(signal.SIGINT)  # a ``stop`` line is a Ctrl-C
        for number in self._received[self._answered :]:
            self._answered += 1
            how, code = _STOP_SIGNALS[number]
            if self._stop_exit is not None:
                _err(f"distloop: {how} again: {self._stopping[2]}")
                self._session.kill()
            else:
                self._stop_exit = code
                _err(f"distloop: {how}: {self._stopping[0]} ({how} again {self._stopping[1]})")
                self._session.request_stop()
        if control is not None:
            self._answer_control(control)

    def _answer_control(self, control: ControlChannel) -> None:
        """A ``kill`` line kills, and the channel's end means the launcher that started the
        run is gone."""
        if control.kill_requested.is_set():
            control.kill_requested.clear()
            _err("distloop: asked to kill the run: killing the engine")
            self._stop_exit = self._stop_exit or EXIT_INTERRUPTED
            self._session.kill()
        if control.closed.is_set() and not self._channel_closed:
            self._channel_closed = True
            _err("distloop: the control channel closed: stopping after the current step")
            self._stop_exit = self._stop_exit or EXIT_INTERRUPTED
            self._session.request_stop()
            self._session.kill_after(CHANNEL_CLOSED_GRACE_S)

    def exit_code(self, outcome: RunOutcome) -> int:
        """The command's exit code for the run's end: a run stopped by a signal exits as
        the signal asks (130, 143), a failed one with 1."""
        if outcome.failure is not None:
            return EXIT_FAILED
        return self._stop_exit or EXIT_OK


_Handler = Callable[[int, FrameType | None], object] | int | None
"""A signal's handler as ``signal.signal`` returns it, to put back."""


def _note_signals(engine: EngineHandle, answers: _StopAnswers) -> dict[int, _Handler]:
    """Installs the run's signal handlers; returns the ones they replace, to restore."""
    previous = {number: signal.signal(number, answers.note) for number in _STOP_SIGNALS}
    if hasattr(signal, "SIGUSR1"):
        previous[signal.SIGUSR1] = signal.signal(
            signal.SIGUSR1, lambda signum, frame: _pass_dump_signal(engine)
        )
    return previous


def _printer(model: RunModel, *, quiet: bool, verbose: bool) -> Callable[[RunEvent], None]:
    """The run's model as the terminal shows it (a view, as the window's panels are):
    phases, saves, steps, and at the end what slowed the run."""
    phases = _PhasePrinter(quiet=quiet)
    saves = _SavePrinter()

    def show(event: RunEvent) -> None:
        if isinstance(event, PhaseChanged):
            phases.show(event.phase)
        saves.show(event)
        if _print_event(event, quiet=quiet, verbose=verbose) is not None:
            for finding in model.findings:  # the run's summary: what slowed it
                _err(f"distloop: what slowed the run: {finding.line}")

    return show


def _pass_on(message: Message, record: TextIO | None, *, as_messages: bool) -> None:
    """The message into ``messages.jsonl``, and on stdout with ``--messages``."""
    if record is not None:
        _record(message, record)
    if as_messages:
        write_message(message)


def _live_logger(settings: LiveSettings | None, run_dir: Path) -> LiveLogger | None:
    if settings is None:
        return None
    return LiveLogger(settings, run_dir, on_error=lambda line: _err(f"distloop: {line}"))


def _close_live_logger(live: LiveLogger) -> None:
    """Waits for the last steps and the run's end to reach MLflow, and says where they are."""
    if not live.failed:
        _err("distloop: MLflow: sending the rest of the run")
    live.close()
    if live.run_id is not None:
        _err(f"distloop: MLflow run {live.run_id}: {live.logged:,} metric values logged")


def _pass_dump_signal(engine: EngineHandle) -> None:
    """Asks the engine process (one run's, not a cluster's) for its stacks."""
    pid = getattr(engine, "pid", None)
    if isinstance(pid, int):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGUSR1)


def _record(message: Message, record: TextIO) -> None:
    """One message into ``messages.jsonl``; a full disk costs the follower, not the run."""
    with contextlib.suppress(OSError, ValueError):
        write_message(message, record)


PHASE_PROGRESS_SHARE = 10
"""A phase's progress is printed each time another tenth of it is done, not at each report."""


class _PhasePrinter:
    """Prints each phase of the run as it starts (``distloop: checking 100,000 images…``),
    then its progress by tenths unless ``quiet``: between two prints, the terminal tells
    a working run from a hung one."""

    def __init__(self, *, quiet: bool) -> None:
        self._quiet = quiet
        self._name: str | None = None
        self._share = 0

    def show(self, phase: RunPhase | None) -> None:
        if phase is None:
            self._name = None
            return
        if phase.name != self._name:
            self._name, self._share = phase.name, 0
            task = f"{phase.task}: " if phase.task else ""
            _err(f"distloop: {task}{phase.name}…")
            return
        if self._quiet or not phase.total or phase.done is None:
            return
        share = phase.done * PHASE_PROGRESS_SHARE // phase.total
        if share > self._share:
            self._share = share
            _err(f"distloop: {phase.name}… {phase.done:,} of {phase.total:,}")


class _SavePrinter:
    """What a stop does once the engine left its loop, and how long its saves took, as the
    window's log says: a large model's saves take seconds that looked like a hang."""

    def __init__(self) -> None:
        self._stopped: tuple[float, SteppingStopped] | None = None

    def show(self, event: RunEvent) -> None:
        if isinstance(event, SteppingStopped) and self._stopped is None:
            self._stopped = (time.monotonic(), event)
            saving = " and ".join(event.saving)
            _err(
                f"distloop: stopping after step {event.last_step:,}"
                + (f": saving {saving}" if saving else "")
            )
        elif isinstance(event, StatusChanged) and event.outcome is not None and self._stopped:
            stopped_at, stopping = self._stopped
            if stopping.saving:
                took = format_duration(time.monotonic() - stopped_at)
                _err(f"distloop: saving {' and '.join(stopping.saving)} took {took}")


def _print_event(event: RunEvent, *, quiet: bool, verbose: bool) -> int | None:
    """Prints what changed in the run; returns the exit code once the run has ended."""
    if isinstance(event, StepsAdded):
        if not quiet:
            named = event.named_losses
            shown = secondary_losses(named)
            lines = (
                f"step={step} loss={format_loss(loss)}"
                + "".join(f" {name}={format_loss(named[name][i])}" for name in shown)
                for i, (step, loss) in enumerate(zip(event.steps, event.losses, strict=True))
            )
            print("\n".join(lines), flush=True)
    elif isinstance(event, Evaluated):
        if not quiet:
            values = "".join(f" {k}={format_loss(v)}" for k, v in event.metrics.items())
            print(f"eval step={event.step}{values}", flush=True)
    elif isinstance(event, Started):
        started = event
        if started.serving:
            _err(f"distloop: serving {started.serving} until the coordinator is done")
        else:
            _err(
                f"distloop: {started.strategy_kind or started.strategy} with "
                f"{started.num_replicas} replica(s) on "
                f"{', '.join(started.devices)} (TensorFlow {started.tensorflow_version})"
            )
    elif isinstance(event, Logged):
        # Engine errors arrive again, whole, as RunFailed; only warnings need a line here.
        line = event
        if verbose or (line.source == "engine" and line.level == "warning"):
            task = f"{line.task} " if line.task else ""
            _err(f"[{task}{line.source}] {line.text}")
    elif isinstance(event, StatusChanged) and event.outcome is not None:
        ended, failed = event.outcome, event.outcome.failure
        if failed is None:
            loss = "n/a" if ended.final_loss is None else format_loss(ended.final_loss)
            how = " (killed on request)" if ended.killed else ""
            _err(
                f"distloop: {ended.status}{how} after step {ended.last_step}, final loss {loss}, "
                f"{format_duration(ended.elapsed_s or 0.0)}"
            )
            return EXIT_OK
        _err(f"distloop: the run failed: {failed.error_type}: {failed.message}")
        if failed.traceback and not failed.known:  # a known failure's stays in engine.log
            _err(failed.traceback.rstrip())
        return EXIT_FAILED
    return None


RESTARTABLE = frozenset({"EngineDied", "ConnectionLost", "TaskEnded", STALLED, *PEER_ERRORS})
"""How a task fails when its process, host or network goes away, not its project: worth a
restart from the last checkpoint (a NaN loss or bad data would only fail again)."""


def follow_restarting(opened: OpenedRun, args: argparse.Namespace, request: RunRequest) -> int:
    """Follows the cluster; after a task died or was preempted, ``--max-restarts`` times
    starts the whole cluster again from its last checkpoint (``request``, resumed), as
    torchrun does.

    A stop asked for here (Ctrl-C) is no preemption: it ends the run.
    """
    cluster, run_dir = opened.handle, opened.folder
    # A resumed cluster's tasks are the ones in its folder.
    again = replace(request, folder=run_dir, resume=True, overwrite=False, workers=None)
    restarts = 0
    while True:
        code = follow_cluster(cluster, run_dir, args)
        status = read_status(run_dir)
        died = code == EXIT_FAILED and status.get("error_type") in RESTARTABLE
        preempted = code == EXIT_OK and status.get("status") == "stopped"
        if restarts >= args.max_restarts or not (died or preempted):
            return code
        restarts += 1
        why = f"{status.get('task') or 'a task'} failed" if died else "a task was preempted"
        _err(
            f"distloop: {why}: restart {restarts} of {args.max_restarts}, the whole cluster "
            "from its last checkpoint"
        )
        try:
            cluster = open_requested(again).handle
        except RunRefused as exc:
            _err(f"distloop: cannot restart: {exc}")
            return code
        update_status(run_dir, restarts=restarts)


def follow_cluster(cluster: EngineHandle, run_dir: Path, args: argparse.Namespace) -> int:
    if isinstance(cluster, ClusterHandle):
        for task in cluster.tasks():
            _err(f"distloop: {task.name} at {task.address}, folder {task.run_dir}")
    return follow(
        cluster, run_dir, quiet=args.quiet, verbose=args.verbose, mlflow=live_settings(args)
    )
