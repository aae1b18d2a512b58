"""What runs inside an engine process; TensorFlow-free until a run has set the stage.

Each is started as an ``engine.child_process.ChildProcess``: :class:`engine.process.EngineProcess`
hands its run to :func:`engine_main` (a cold one, or a warm one that loaded TensorFlow
ahead of time), ``engine.process.detect_devices`` starts :func:`detect_devices_main`, and
``engine.prediction.PredictionProcess`` :func:`predict_main`. Before
the run, the process: ignores Ctrl-C (the parent decides when to stop), watches
its parent so it never outlives it, exports TF_CONFIG, and routes its stdout and
stderr (where TensorFlow's C++ runtime writes) into log messages.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import phases
from .channel import Channel
from .child_process import ChildEnds
from .messages import (
    EngineJob,
    InputRefused,
    PredictionDone,
    PredictRequest,
    ProtocolError,
    RunFailed,
)
from .phases import Phases
from .run_folder import RunFolderLock, write_status
from .stack_dumps import write_stacks_on_signal
from .tf_config import TF_CONFIG_VAR

if TYPE_CHECKING:
    from .config import Project

PARENT_POLL_S = 0.5
# absl's prefix on TensorFlow's C++ log lines: I0000/W0000/E0000/F0000 or "... W tensorflow/...".
_ABSL_LEVEL = re.compile(r"^([IWEF])\d{4}|^\S+ \S+: ([IWEF]) ")
_LEVELS = {"I": "info", "W": "warning", "E": "error", "F": "error"}
# TensorFlow warnings and errors that describe expected behaviour, and the level they
# get instead: a red ERROR on every healthy run would teach users to ignore the log.
_EXPECTED_LINES = {
    # data.cache: a run stopped inside its first pass drops the partial cache (a run
    # planned to end there caches nothing and says so: engine.tf.data).
    "did not fully read the dataset being cached": "debug",
    # TensorFlow's CUDA build probing a machine without an NVIDIA driver; the run's
    # device list (the status panel, `distloop devices`) says which devices it has.
    "failed call to cuInit": "info",
}


def _watch_parent() -> None:
    """Exits this process when its parent is gone: no orphan engines, ever."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        while True:
            parent.join(PARENT_POLL_S)
            if not parent.is_alive():
                os._exit(3)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _stop_on_sigterm() -> threading.Event:
    """SIGTERM (a scheduler preempting the job, ``kill``) stops the run like Stop does.

    The run then ends between steps with a checkpoint, so it can be resumed. A
    multi-worker task passes the request to its whole cluster, which stops after
    one step every task agrees on (``engine.tf.preemption``; TensorFlow's own SIGTERM
    handler, installed with the strategy, is replaced by this one again). The
    handler only sets a thread-local event: touching the multiprocessing Event
    from a signal handler could deadlock on its lock.
    """
    terminated = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: terminated.set())
    return terminated


class _OutputCapture:
    """Sends everything written to file descriptors 1 and 2 to ``on_line``, line by line.

    TensorFlow's C++ runtime writes to fd 2 directly, below Python's ``sys.stderr``,
    so only a file-descriptor redirect catches its warnings for the log panel.
    """

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self._on_line = on_line
        self._read_fd, write_fd = os.pipe()
        self._saved = (os.dup(1), os.dup(2))
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        self._thread = threading.Thread(target=self._pump, name="output-capture", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        buffer = b""
        while chunk := os.read(self._read_fd, 65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self._emit(line)
        if buffer:
            self._emit(buffer)

    def _emit(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").rstrip()
        if text:
            self._on_line(text)

    def close(self) -> None:
        """Restores the original descriptors, so the pipe ends and the pump drains it."""
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        self._thread.join(timeout=5)


def _tensorflow_line(channel: Channel) -> Callable[[str], None]:
    def on_line(text: str) -> None:
        match = _ABSL_LEVEL.match(text)
        level = _LEVELS[(match.group(1) or match.group(2))] if match else "info"
        if "Traceback (most recent call last)" in text or text.startswith(("Error", "Fatal")):
            level = "error"
        else:
            level = next((lv for part, lv in _EXPECTED_LINES.items() if part in text), level)
        channel.log(text, level=level, source="tensorflow")

    return on_line


class _HeldLines:
    """Holds output lines until a run's channel exists to log them, then passes them on.

    A warm engine imports TensorFlow before it knows its run: what TensorFlow says
    then still belongs in that run's log, as it does in a cold engine's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[str] = []
        self._target: Callable[[str], None] | None = None

    def __call__(self, text: str) -> None:
        with self._lock:
            if self._target is None:
                self._held.append(text)
            else:
                self._target(text)

    def attach(self, target: Callable[[str], None]) -> None:
        with self._lock:
            for text in self._held:
                target(text)
            self._held.clear()
            self._target = target


def _prepare_process() -> threading.Event:
    """What every engine process does first: the parent decides when it ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    terminated = _stop_on_sigterm()
    _watch_parent()
    return terminated


def engine_main(ends: ChildEnds, warm: bool) -> None:
    """An engine: runs the one job the parent sends (``EngineJob``), and exits.

    A ``warm`` one loads TensorFlow first, before the job, and converts the step's code with
    AutoGraph (``engine.tf.autograph_warm_up``): loading it is most of an engine's start-up, and
    converting most of the rest, so a window keeps one of these ready. Either runs exactly one
    run and exits, so nothing of a run (TensorFlow's devices and graphs, seeds, imported user
    code) reaches the next. Loading it sets up no device: the run's own device setup (the CPU
    split into replicas) still comes first. The run folder's lock arrives after the job, as a
    file descriptor on the same pipe, and is held from then on: the lock stays held while this
    process writes there, even if the parent dies first. A closed pipe without a job (the window
    closed) ends the process.
    """
    terminated = _prepare_process()
    os.environ.pop(TF_CONFIG_VAR, None)  # the job says which TF_CONFIG the run sees
    lines = _HeldLines()
    capture = _OutputCapture(lines)
    if warm:
        # A failed import is not this process's to report: the run imports the same modules
        # again, and fails with TensorFlow's own error in the run's log and terminal message.
        # engine.tf.training imports TensorFlow, and TensorFlow imports Keras. AutoGraph's
        # conversions of the step and input code follow, until the job arrives.
        with contextlib.suppress(Exception):
            from .run_environment import installed_packages
            from .tf import training  # noqa: F401

            installed_packages()  # read once: the run's environment.json then takes no time
            from .tf.autograph_warm_up import warm_up_autograph

            warm_up_autograph(ends.requests.poll)
    try:
        job = ends.receive()
        if not isinstance(job, EngineJob):
            raise ProtocolError(f"an engine takes a job, not {job.type}")
        lock_fd = ends.receive_handle() if job.lock_follows else None
    except (EOFError, OSError):
        capture.close()
        return
    except ValueError as exc:  # not a job of this Distloop: the parent hears why, in one line
        capture.close()
        channel = Channel(ends.out, None, None)
        channel.send(_failure_message(exc))
        channel.close()
        sys.exit(1)
    finally:
        ends.requests.close()
    folder_lock = (
        RunFolderLock(Path(job.run_dir), lock_fd)
        if job.run_dir is not None and lock_fd is not None
        else None
    )
    sys.exit(_run(job, ends.out, ends.stop, terminated, lines, capture, folder_lock))


def _run(
    job: EngineJob,
    out: Any,
    stop_event: Any,
    terminated: threading.Event,
    lines: _HeldLines,
    capture: _OutputCapture,
    folder_lock: RunFolderLock | None,
) -> int:
    """The run itself, once the process is set up; returns the process's exit code."""
    task = job.task
    # The TF_CONFIG the parent passes (the project's, or the one `distloop run` read and
    # checked) is the only one the run sees. TensorFlow's strategies read the variable
    # themselves, even those that need no cluster, and fail on one that is not JSON.
    if job.tf_config_env is not None:
        os.environ[TF_CONFIG_VAR] = job.tf_config_env
    else:
        os.environ.pop(TF_CONFIG_VAR, None)
    folder = Path(job.run_dir) if job.run_dir else None
    channel = Channel(out, task, folder)
    if folder is not None:
        with contextlib.suppress(OSError):  # a hang then has no stacks; the run goes on
            write_stacks_on_signal(folder)
    lines.attach(_tensorflow_line(channel))
    phases.use(Phases(channel))
    started = time.time()
    exit_code = 0
    try:
        if channel.log_error is not None:
            raise channel.log_error
        from .memory_check import memory_problems
        from .problems import ProblemsError
        from .project_file import load_project_text

        project = load_project_text(job.project_json)
        too_big = memory_problems(project)  # refused with the estimate, not by the OOM killer
        if too_big:
            raise ProblemsError(too_big, "the project")
        if folder is not None:
            # The owner is the process that started this one (the CLI, the window): when it
            # and this one are gone and the status still says running, the run history
            # knows the run was interrupted (engine.run_history).
            write_status(
                folder,
                "running",
                started_at=started,
                pid=os.getpid(),
                owner_pid=os.getppid(),
                host=socket.gethostname(),
                task=task,
            )
            _record_environment(folder, project, channel, _task_of(job))
        if f"{__package__}.tf.training" not in sys.modules:  # a cold engine: not loaded yet
            phases.begin("loading TensorFlow")
        from .tf.training import train

        result = train(
            project,
            folder,
            channel,
            lambda: terminated.is_set() or stop_event.is_set(),
            resume=job.resume,
        )
        if folder is not None:
            write_status(
                folder, result.status, started_at=started, last_step=result.last_step, task=task
            )
        channel.send(result)
    except BaseException as exc:
        exit_code = 1
        failure = _failure_message(exc, channel.last_step)
        # The lock's reserve makes room on a full disk; should the write fail all the same,
        # the parent still learns why, from the message.
        if folder_lock is not None:
            folder_lock.free_reserve()
        if folder is not None:
            with contextlib.suppress(OSError):
                write_status(
                    folder,
                    "failed",
                    started_at=started,
                    error_type=failure.error_type,
                    error=failure.message,
                    last_step=failure.last_step,
                    task=task,
                )
        # A known failure's message says it all: its traceback is for engine.log only.
        channel.log(failure.traceback or failure.message, level="error", forward=not failure.known)
        with contextlib.suppress(Exception):
            channel.send(failure)
    finally:
        phases.end()
        phases.use(None)
        capture.close()
        channel.close()
        if folder_lock is not None:
            folder_lock.release()
    return exit_code


def _task_of(job: EngineJob) -> str | None:
    """The cluster task a run is: the job's, or its TF_CONFIG's (a task started over SSH or by
    Slurm is one ``distloop run`` of its own, told its task by TF_CONFIG alone)."""
    if job.task is not None or job.tf_config_env is None:
        return job.task
    from .tf_config import parse_tf_config_text

    try:
        return str(parse_tf_config_text(job.tf_config_env).task)
    except ValueError:  # checked before the job was sent: TensorFlow says what is wrong
        return None


def _record_environment(folder: Path, project: Project, channel: Channel, task: str | None) -> None:
    """Writes ``environment.json`` and tells the parent what software runs, before
    TensorFlow loads: a cluster's launcher then names a task whose software differs from
    the chief's before the first collective (``engine.cluster.supervisor``)."""
    from .messages import EnvironmentReady
    from .run_environment import record_environment, shared_variables, software

    record = record_environment(folder, project, task)
    channel.send(
        EnvironmentReady(
            digest=record["digest"],
            software=software(record),
            variables=shared_variables(record["variables"]),
        )
    )


KNOWN_FAILURES = (
    ("distloop.engine.problems", "ProblemsError"),
    ("distloop.engine.data_sources.base", "DataError"),
    ("distloop.engine.model_shapes", "ModelFileError"),
    ("distloop.engine.user_code", "UserCodeError"),
    ("distloop.engine.reporting", "NonFiniteLossError"),
    ("distloop.engine.tf.checkpoint", "CheckpointError"),
    ("distloop.engine.tf.strategy", "DeviceError"),
    ("distloop.engine.run_folder", "RunFolderError"),
)
"""The failures whose message says all a user needs (module, class; subclasses count):
the terminal shows that one line, and the traceback stays in engine.log."""


def is_known_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is one of :data:`KNOWN_FAILURES`.

    A class whose module was never imported cannot have been raised, so none is
    imported here (one of them imports TensorFlow).
    """
    for module, name in KNOWN_FAILURES:
        known = getattr(sys.modules.get(module), name, None)
        if isinstance(known, type) and isinstance(exc, known):
            return True
    return False


def _failure_message(exc: BaseException, last_step: int | None = None) -> RunFailed:
    """``last_step``: the last step the run reported, the step a failure stopped after (a
    non-finite loss names its own step, which is not kept)."""
    from .reporting import NonFiniteLossError

    return RunFailed(
        error_type=type(exc).__name__,
        message=str(exc) or type(exc).__name__,
        traceback="".join(traceback.format_exception(exc)),
        last_step=exc.step if isinstance(exc, NonFiniteLossError) else last_step,
        known=is_known_failure(exc),
    )


def detect_devices_main(ends: ChildEnds) -> None:
    """Answers a device probe: which CPUs, GPUs and TPUs TensorFlow sees here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent()
    channel = Channel(ends.out, None, None)
    capture = _OutputCapture(lambda text: None)
    try:
        from .tf.devices import detect_devices

        channel.send(detect_devices())
    except Exception as exc:
        channel.send(_failure_message(exc))
    finally:
        phases.end()
        phases.use(None)
        capture.close()
        channel.close()


def predict_main(ends: ChildEnds, folder: str) -> None:
    """A prediction process: loads ``folder``'s model once, then answers each request.

    Requests (``PredictRequest``) arrive on the parent's pipe; the answers go through a
    :class:`Channel`, as an engine's messages do, each request's ending with
    ``PredictionDone``. A closed ``requests`` pipe (the Try it window closed, the
    command done) ends the process. Any failure outside one input's answer is a
    RunFailed, never a silent death or a message the parent cannot read. TensorFlow's
    own output goes nowhere, up to the process's exit (its runtime writes there too):
    the messages say what happened, input by input, and ``distloop predict`` prints
    nothing else.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    channel = Channel(ends.out, None, None)
    try:
        from .tf.predict import InputError, load_for_prediction

        try:
            model = load_for_prediction(Path(folder))
        except InputError as exc:
            channel.send(InputRefused(error=str(exc)))
            return
        channel.send(model.loaded)
        channel.flush()
        while True:
            try:
                request = ends.receive()
            except EOFError:
                return
            if not isinstance(request, PredictRequest):
                raise ProtocolError(f"a prediction process takes requests, not {request.type}")
            model.answer([Path(path) for path in request.inputs], request.rows, channel.send)
            channel.send(PredictionDone())
            channel.flush()
    except Exception as exc:  # an answer, not a silent death: the parent shows one line
        channel.send(_failure_message(exc))
    finally:
        ends.requests.close()
        channel.close()
