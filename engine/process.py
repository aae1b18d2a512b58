"""The parent's handle on an engine process (TensorFlow-free: the GUI uses it).

One :class:`EngineProcess` is one run in its own ``spawn``-ed process. The parent
reads messages with :meth:`EngineProcess.poll` (never blocking longer than asked,
so a GUI can call it from a worker thread) and always gets exactly one terminal
message: the engine's own RunFinished/RunFailed, or, when the process died without
one (SIGKILL, segfault, out of memory), a RunFailed made here from its exit code
and the last lines of its log. A SIGKILL while the kernel's count of out-of-memory kills
rose is reported as running out of memory, with what to do, and without the log's lines
(the process had no last words).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from .child_main import detect_devices_main, engine_main
from .child_process import ChildProcess, describe_exit
from .config import Project
from .fileio import atomic_write_text
from .memory_check import memory_cgroups
from .messages import DevicesDetected, EngineJob, Log, Message, RunFailed, RunFinished
from .run_folder import (
    PROJECT_FILE,
    RunFolderLock,
    prepare_resume,
    read_status,
    tail_log,
    write_status,
)
from .run_lifecycle import RunLifecycle
from .tf_config import MULTI_MACHINE_STRATEGIES, TFConfig, parse_address

STOP_BEFORE_FIRST_STEP_S = 2.0
"""A stop request's grace for an engine that has not reported a step: before its first
step it may be blocked inside TensorFlow (waiting for a cluster peer, building a strategy)
where no stop request is seen, and it has nothing to checkpoint, so it is killed."""
PEER_CHECK_S = 5.0
"""A cluster task that has not started its run this long after its start is probably
waiting for peers: the parent then names the ones that do not answer. The engine cannot
say so itself: TensorFlow holds the GIL while it waits for the cluster."""
CLOSE_WAIT_S = 0.5
"""How long an idle warm engine may take to exit on its own when the window closes."""
EXIT_AFTER_REPORT_S = 10.0
"""How long an engine that reported its end may take to exit (closing its files, TensorFlow's
teardown; seconds on a busy machine) before :meth:`EngineProcess.close` kills it."""


OUT_OF_MEMORY = (
    "the engine process ran out of memory: the system's out-of-memory killer ended it "
    "(SIGKILL); give the run more memory or make it need less (data.stream: true reads a .npz "
    "or CSV file as batches instead of loading it; a smaller data.global_batch_size)"
)


def oom_kill_count() -> int | None:
    """Processes the kernel's out-of-memory killer has ended in this process's memory cgroup
    (an engine it starts lives there too), or on the whole machine where no cgroup counts
    them; None where the kernel does not say. Its rise while an engine died of SIGKILL tells
    running out of memory from a kill by hand."""
    for counter in _oom_counters():
        try:
            lines = counter.read_text(encoding="ascii").splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    return None


def _oom_counters() -> list[Path]:
    """The files that count OOM kills, the narrowest first: the memory cgroup's (v2 or v1),
    then the machine's."""
    counters = [
        folder / ("memory.events" if v2 else "memory.oom_control")
        for folder, _, v2 in memory_cgroups()
    ]
    return [*counters, Path("/proc/vmstat")]


class WarmEngine:
    """An engine process started ahead of its run: TensorFlow loaded, waiting for one job.

    Loading TensorFlow is most of an engine's start-up (6-10 s); a window keeps one
    of these ready so that Run reaches its first step in about a second. It takes
    exactly one run and then exits like any engine (never reused: nothing of one run
    reaches the next). Until :class:`EngineProcess` adopts it, :meth:`close` ends it.
    """

    def __init__(self) -> None:
        self.child = ChildProcess(engine_main, True, name="distloop-engine-warm")
        self._taken = False

    @property
    def ready(self) -> bool:
        """Not taken yet and alive (possibly still loading TensorFlow: a job then waits)."""
        return not self._taken and self.child.is_alive()

    def hand_over(self, job: EngineJob, folder_lock: RunFolderLock | None) -> bool:
        """Gives the process its run (and the folder's lock); False when it can take none.

        A refused hand-over closes this warm engine; the caller then starts a cold one.
        """
        if not self.ready:
            self.close()
            return False
        try:
            _send_job(self.child, job, folder_lock)
        except OSError:  # it died after the check; nothing of the run reached it
            self.close()
            return False
        self._taken = True
        return True

    def close(self) -> None:
        """Ends a warm engine that has no run, at once: it has nothing to save or report.

        Its closed pipe tells a waiting one to exit; one still loading TensorFlow
        would only notice after loading, so it is killed.
        """
        if self._taken:
            return
        self._taken = True
        self.child.close(wait_s=CLOSE_WAIT_S)


def _send_job(child: ChildProcess, job: EngineJob, folder_lock: RunFolderLock | None) -> None:
    """Sends an engine its run, then the run folder lock's descriptor, and no more."""
    handle = folder_lock.handle() if folder_lock is not None else None
    child.send(job.model_copy(update={"lock_follows": handle is not None}))
    if handle is not None:
        child.send_handle(handle)
    child.close_requests()


class WarmEngines:
    """Keeps one warm engine ready and makes the window's single-process engines with it.

    The next warm engine is started by :meth:`prepare`, which the window calls when
    it has shown itself and again once a run took the last one.
    """

    def __init__(self) -> None:
        self._warm: WarmEngine | None = None

    @property
    def warm(self) -> WarmEngine | None:
        return self._warm

    def prepare(self) -> None:
        """Starts a warm engine unless one is ready."""
        if self._warm is None or not self._warm.ready:
            self._warm = WarmEngine()

    def engine(self, project: Project, run_dir: Path, *, resume: bool = False) -> EngineProcess:
        """An engine for one single-process run: the warm one when it is ready, else cold."""
        warm, self._warm = self._warm, None
        return EngineProcess(project, run_dir, resume=resume, warm=warm)

    def close(self) -> None:
        """Ends the idle warm engine (the window closes): no process outlives the window."""
        if self._warm is not None:
            self._warm.close()
            self._warm = None


class EngineProcess:
    def __init__(
        self,
        project: Project,
        run_dir: Path | None,
        *,
        task: str | None = None,
        tf_config: TFConfig | None = None,
        resume: bool = False,
        folder_lock: RunFolderLock | None = None,
        name_missing_peers: bool = False,
        warm: WarmEngine | None = None,
    ) -> None:
        """``tf_config`` overrides the project's (one cluster, a different task per process).

        ``resume`` continues the run in ``run_dir`` from its last checkpoint.
        ``folder_lock`` is ``run_dir``'s lock when the caller took it already (to
        look into the folder first); otherwise :meth:`start` takes it.
        ``name_missing_peers``: this is one task of a cluster whose other tasks run
        elsewhere (``distloop run --task``); if it waits long for them, :meth:`poll`
        names those that do not answer (:data:`PEER_CHECK_S`).
        ``warm``: a :class:`WarmEngine` to run in, if it is still ready at :meth:`start`
        (from then on this object owns it); otherwise a process is started cold.
        """
        self.project = project
        self.run_dir = run_dir
        self.task = task
        self._tf_config = tf_config if tf_config is not None else project.tf_config
        self._resume = resume
        self._folder_lock = folder_lock
        self._warm = warm
        self._child: ChildProcess | None = None
        self._lifecycle = RunLifecycle(task)
        """What the run said of itself: what a report after its kill needs, and its end."""
        self._started_at = 0.0
        self._stop_requested_at: float | None = None
        self._killed_on_request = False
        self._peers_checked = not name_missing_peers
        self._oom_kills_at_start: int | None = None

    def start(self) -> None:
        """Writes the project into the run folder and starts the engine."""
        try:
            self._start()
        except BaseException:
            self._release_folder()
            raise

    def lock_folder(self) -> None:
        """Takes the run folder's lock, once: from now on no other run may write there.

        Raises RunFolderBusy (naming the holder) when another run has it.
        """
        if self.run_dir is not None and self._folder_lock is None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._folder_lock = RunFolderLock.acquire(self.run_dir)

    def _release_folder(self) -> None:
        if self._folder_lock is not None:
            self._folder_lock.release()
            self._folder_lock = None

    def _start(self) -> None:
        if self.run_dir is not None:
            self.lock_folder()
            if self._resume:
                prepare_resume(self.run_dir)
            atomic_write_text(
                self.run_dir / PROJECT_FILE, self.project.to_json(), follow_symlinks=False
            )
        job = EngineJob(
            project_json=self.project.to_json(),
            run_dir=str(self.run_dir) if self.run_dir else None,
            task=self.task,
            tf_config_env=self._tf_config.to_env() if self._tf_config else None,
            resume=self._resume,
        )
        warm, self._warm = self._warm, None
        self._started_at = time.monotonic()
        self._oom_kills_at_start = oom_kill_count()
        if warm is not None and warm.hand_over(job, self._folder_lock):
            self._child = warm.child
            return
        name = f"distloop-engine{'-' + self.task if self.task else ''}"
        self._child = ChildProcess(engine_main, False, name=name)
        # A child that died before reading its job is reported by poll, as any death is.
        with contextlib.suppress(OSError):
            _send_job(self._child, job, self._folder_lock)

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    @property
    def exit_code(self) -> int | None:
        return self._child.exitcode if self._child else None

    @property
    def done(self) -> bool:
        """True once the terminal message has been handed out."""
        return self._lifecycle.ended

    def request_stop(self) -> None:
        """Asks the engine to stop after the current step; it then reports "stopped".

        An engine that has reported no step yet is killed if it has not ended after
        :data:`STOP_BEFORE_FIRST_STEP_S` (see :meth:`poll`).
        """
        if self._child is not None:
            self._child.stop_event.set()
        if self._stop_requested_at is None:
            self._stop_requested_at = time.monotonic()

    def kill(self) -> None:
        """Ends the engine now; the run is reported ``stopped`` (killed on request), not failed.

        Only the parent kills this way (a second Ctrl-C, a stop that took too long), so
        the SIGKILL is not the out-of-memory killer's, and the run resumes from its
        last checkpoint.
        """
        if self._child is not None and self._child.is_alive():
            self._killed_on_request = True
            self._child.kill()

    def stop(self, grace_s: float = 5.0) -> None:
        """Asks politely, then kills: the way Stop and closing the window end a run."""
        self.request_stop()
        if self._child is None:
            return
        self._child.join(grace_s)
        if self._child.is_alive():
            self.kill()
            self._child.join(5)

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        """Messages that arrived, waiting at most ``timeout_s`` for the first one."""
        if self._lifecycle.ended or self._child is None:
            return []
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                message = self._receive(remaining if not out else 0)
            except queue.Empty:
                break
            self._lifecycle.note(message)
            out.append(message)
            if self._lifecycle.ended:
                # Handed out at once: the run has ended. The process's own exit (closing
                # its files, TensorFlow's teardown) is :meth:`close`'s to wait for.
                return out
        if self._stuck_before_first_step():
            self.kill()
            self._child.join(1)
        if self._peer_check_due():
            self._peers_checked = True
            out += self._missing_peers()
        if not self._child.is_alive():
            out += self._drain_after_death()
        return out

    def _peer_check_due(self) -> bool:
        return (
            not self._peers_checked
            and self._lifecycle.started is None
            and self._tf_config is not None
            and self.project.strategy.kind in MULTI_MACHINE_STRATEGIES
            and time.monotonic() - self._started_at >= PEER_CHECK_S
            and self._child is not None
            and self._child.is_alive()
        )

    def _missing_peers(self) -> list[Message]:
        """A warning naming the cluster's other tasks that accept no connection (if any)."""
        assert self._tf_config is not None
        config = self._tf_config
        missing = []
        for task in config.tasks():
            if task == config.task:
                continue
            address = config.address(task)
            try:
                with socket.create_connection(parse_address(address), timeout=0.5):
                    pass
            except OSError:
                missing.append(f"{task} at {address}")
        if not missing:
            return []
        text = (
            f"{config.task} is waiting for the other tasks of its cluster; not reachable yet: "
            f"{', '.join(missing)}"
        )
        return [Log(level="warning", text=text, task=self.task)]

    def _stuck_before_first_step(self) -> bool:
        """A stop was asked for long enough ago, and the engine has yet to report a step.

        A ps or worker server reports no step at all: it ends on its own when asked.
        """
        return (
            self._stop_requested_at is not None
            and not self._lifecycle.stepped
            and not self._lifecycle.serving
            and time.monotonic() - self._stop_requested_at >= STOP_BEFORE_FIRST_STEP_S
            and self._child is not None
            and self._child.is_alive()
        )

    def _receive(self, timeout_s: float) -> Message:
        """The engine's next message (queue.Empty when none came): one that is not a
        message of this Distloop is logged as such, and the run goes on."""
        assert self._child is not None
        try:
            return self._child.receive(timeout_s)
        except ValueError as exc:  # ProtocolError, or a message that does not validate
            return Log(level="error", text=f"unreadable engine message: {exc}", task=self.task)

    def _drain_after_death(self) -> list[Message]:
        """Collects what a dead engine left in the queue, then reports the death."""
        out: list[Message] = []
        while True:
            try:
                message = self._receive(0.2)
            except (queue.Empty, EOFError, OSError):
                break
            self._lifecycle.note(message)
            out.append(message)
            if self._lifecycle.ended:
                return out
        ending = self._death_report()
        self._lifecycle.note(ending)
        out.append(ending)
        return out

    def _death_report(self) -> RunFinished | RunFailed:
        """How the engine ended without saying so: stopped when the parent killed it."""
        assert self._child is not None
        self._child.join(1)
        code = self._child.exitcode
        reason = describe_exit(code)
        out_of_memory = self._killed_by_oom(code)
        if out_of_memory:
            reason = OUT_OF_MEMORY
        last_lines: list[str] = []
        last_step = self._lifecycle.last_step
        if self.run_dir is not None and last_step is None:
            with contextlib.suppress(OSError, ValueError):
                last_step = read_status(self.run_dir).get("last_step")
        if self._killed_on_request:
            if self.run_dir is not None:
                with contextlib.suppress(OSError):
                    write_status(self.run_dir, "stopped", last_step=last_step, task=self.task)
            return self._lifecycle.stopped(killed=True, last_step=last_step)
        if self.run_dir is not None:
            last_lines = tail_log(self.run_dir, 10)
            if self._folder_lock is not None:
                self._folder_lock.free_reserve()
            with contextlib.suppress(OSError):  # a full disk: the message still says why
                write_status(
                    self.run_dir, "failed", error_type="EngineDied", error=reason, task=self.task
                )
        return RunFailed(
            error_type="EngineDied",
            message=reason,
            traceback="\n".join(last_lines),
            last_step=last_step,
            exit_code=code,
            task=self.task,
            known=out_of_memory,  # the log's last lines say nothing about it
        )

    def _killed_by_oom(self, code: int | None) -> bool:
        """Killed by the out-of-memory killer: SIGKILL, not asked for, and the kernel's
        count of its kills rose while this engine ran."""
        if code != -signal.SIGKILL or self._killed_on_request:
            return False
        before, now = self._oom_kills_at_start, oom_kill_count()
        return before is not None and now is not None and now > before

    def messages(self) -> Iterator[Message]:
        """Every message until the terminal one, blocking: the CLI's way of listening."""
        while not self.done:
            yield from self.poll(0.5)

    def close(self) -> None:
        """Ends the process if it still runs and releases the queue and the run folder.

        An engine that reported its end is let exit on its own; one that did not is
        asked to stop, then killed.
        """
        if self._child is not None and self._lifecycle.ended:
            self._child.join(EXIT_AFTER_REPORT_S)
        if self._child is not None and self._child.is_alive():
            self.stop()
        if self._warm is not None:  # never started: the warm engine it was given ends here
            self._warm.close()
            self._warm = None
        if self._child is not None:
            self._child.close()
        self._release_folder()


def detect_devices(timeout_s: float = 60.0) -> DevicesDetected:
    """Asks a short-lived engine process which devices TensorFlow sees (blocking)."""
    child = ChildProcess(detect_devices_main, name="distloop-detect")
    try:
        message = child.receive(timeout_s)
    except queue.Empty:
        raise TimeoutError(f"device detection took longer than {timeout_s:.0f} s") from None
    finally:
        child.close(wait_s=5)
    if isinstance(message, RunFailed):
        raise RuntimeError(f"device detection failed: {message.message}")
    assert isinstance(message, DevicesDetected)
    return message
