"""Runs a local cluster: every task its own engine process, read as one run.

:class:`LocalCluster` starts the tasks where its placement puts them
(``engine.cluster.placement``: by default here, in a private network namespace where the
system allows, ``engine.netns``), merges their message streams into one that reads
like a single run's (see ``engine.messages``), and fails the whole run, naming the
task, as soon as any task fails or dies: a cluster never hangs silently.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from ..cluster_layout.plan import serves_only, task_dir_name, task_project
from ..config import Project
from ..engine_handle import TaskInfo, TaskState
from ..findings import Findings
from ..messages import (
    EnvironmentReady,
    EvalMetrics,
    Log,
    Message,
    Phase,
    Resources,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
    StrategyReady,
)
from ..resume_rules import refuse_strategy
from ..run_folder import TASKS_DIR, RunFolderError, RunFolderLock, prepare_resume
from ..run_lifecycle import RunLifecycle
from ..stack_dumps import TaskStack, diagnose
from ..tf_config import TaskSpec
from .blame import STALLED, cause
from .devices import DEVICES_DIFFER, devices_text, odd_worker
from .environments import environment_warning, same_environment
from .local_placement import LocalPlacement
from .placement import Placement, TaskEngine
from .top_folder import ClusterFolder

FAILURE_GRACE_S = 2.0
"""After a task failed, the others get this long to end before they are killed
(synchronous peers are usually stuck in a collective waiting for the failed one)."""
STOP_GRACE_S = 10.0
QUIET_DUMP_S = 30.0
"""A step of a small model takes milliseconds, of a big one seconds: half a minute without
one is worth a look at the stacks, and comes before the collective timeout (60 s)."""
"""After a stop request, tasks get this long to end between steps before they are killed."""


class _Task:
    def __init__(self, spec: TaskSpec, address: str, engine: TaskEngine, server: bool) -> None:
        self.spec = spec
        self.name = str(spec)
        self.address = address
        self.engine = engine
        self.server = server
        self.lifecycle = RunLifecycle(self.name)
        """What the task's messages said: its start, its last step, its end."""
        self.last_line = ""
        self.devices: list[str] | None = None
        """Where its replicas run, as its StrategyReady said (multi-worker tasks only)."""
        self.environment: EnvironmentReady | None = None
        """The software it runs, as it said before loading TensorFlow."""
        self.resources: Resources | None = None

    @property
    def state(self) -> TaskState:
        """Where the task stands, in the words the Cluster tab shows."""
        terminal = self.lifecycle.terminal
        if isinstance(terminal, RunFinished):
            return terminal.status
        if terminal is not None:
            return "failed"
        if self.lifecycle.started is None:
            return "starting"
        return "serving" if self.lifecycle.serving else "running"


Ending = Literal["finished", "stopped", "failed"]


class LocalCluster:
    """Every task of a project's cluster as an engine process on this machine.

    Drive it like one :class:`EngineProcess`: :meth:`start`, then :meth:`poll`
    until :attr:`done`; :meth:`request_stop` / :meth:`stop` / :meth:`kill` /
    :meth:`close`. :meth:`poll` returns one run's stream: the reporting task's
    RunStarted and StepMetrics (the chief, else worker 0), every task's Log lines
    tagged with its task, and, last, exactly one RunFinished or RunFailed for the
    whole cluster. :meth:`tasks` gives each task's state, pid and last log line.

    The run ends when the trainers are done (every task under
    multi_worker_mirrored; the chief coordinator under parameter_server, whose ps
    and worker servers are then stopped). When any task fails or dies first, the
    run fails, naming it, and the other tasks are stopped, then killed.
    """

    stop_grace_s: float = STOP_GRACE_S
    quiet_dump_s: float = QUIET_DUMP_S
    """After this long without a step (once stepping began), every task writes its stacks
    (a launch's on their hosts, asked over ssh) and the run names the task not where its
    peers wait (``engine.stack_dumps``)."""
    """How long a requested stop may take before the cluster kills its own stragglers:
    a multi-worker stop first agrees on a step and saves a checkpoint there."""

    def __init__(
        self,
        project: Project,
        run_dir: Path,
        *,
        workers: int | None = None,
        resume: bool = False,
        folder_lock: RunFolderLock | None = None,
        placement: Placement | None = None,
    ) -> None:
        """Lays the cluster out (free ports, TF_CONFIGs); raises ProblemsError if it cannot.

        ``resume`` continues the cluster run in ``run_dir`` (``project`` is its
        ``project.json``): the same tasks, each from the chief's last checkpoint, on
        new ports (nothing in a checkpoint depends on them, and the old ones may be
        taken by now). ``folder_lock`` is ``run_dir``'s lock when the caller took it
        already; :meth:`start` takes it otherwise, and every task's folder's.
        ``placement``: where the tasks run (``engine.cluster.placement``): here, in a
        private network, unless told otherwise (``workers`` is that placement's), e.g.
        on the hosts the project's TF_CONFIG names, started over SSH
        (``engine.cluster.ssh``); this folder gets the run's top level wherever they run.
        """
        if resume:
            refuse_strategy(project)
        self._placement = placement or LocalPlacement(run_dir, workers=workers, fresh_ports=resume)
        self.tf_config = self._placement.tf_config(project)
        self.run_dir = run_dir
        self._resume = resume
        self._folder_lock = folder_lock
        self.reporting_task = str(self.tf_config.chief_task())
        kind = project.strategy.kind
        self._tasks: list[_Task] = []
        for spec in self.tf_config.tasks():
            engine = self._placement.engine(
                task_project(project, self.tf_config, spec), spec, self.tf_config, resume=resume
            )
            self._tasks.append(
                _Task(spec, self.tf_config.address(spec), engine, serves_only(kind, spec))
            )
        self._reporter = next(t for t in self._tasks if t.name == self.reporting_task)
        self.project = self._reporter.engine.project
        self._ending: Ending | None = None
        self._failures: list[RunFailed] = []
        self._killed: list[str] = []
        self._servers_asked = False
        self._kill_at: float | None = None
        self._done = False
        self._started_at = 0.0
        self._began = 0.0
        self._folder = ClusterFolder(run_dir, self._folder_failure)
        self._outbox: list[Message] = []
        # The reporter's RunStarted and what followed it, until every trainer has started.
        self._held_start: RunStarted | None = None
        self._last_step_at: float | None = None
        self._stopped: list[str] = []
        self._dumped = False
        self._held: list[Message] = []
        self._findings = Findings()
        """What slows the run, from every task's samples: said in the top-level engine.log
        as it changes, in a hang's dump and in status.json at the end."""

    # --- control ---------------------------------------------------------------------

    def start(self) -> None:
        """Writes the run folder's top level and starts every task at once.

        Order does not matter: TensorFlow's tasks wait for each other to come up.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._hold_folders()
            others = [t for t in self._trainers() if t is not self._reporter]
            if self._resume:
                self._placement.share_checkpoint(
                    self.tf_config, self._reporter.spec, [t.spec for t in others]
                )
            self._folder.write_project(self.project)
        except BaseException:
            self._release_folders()
            raise
        self._folder.open_log()
        self._started_at, self._began = time.time(), time.monotonic()
        try:
            network = self._placement.open_network()
            self._note(network.text, level=network.level)
            with self._placement.spawning():
                for task in self._tasks:
                    task.engine.start()
                    self._note(f"{task.name} at {task.address}: pid {task.engine.pid}")
        except BaseException:
            for task in self._tasks:
                task.engine.kill()
            self._release_folders()
            self._done = True
            self._close_files()
            raise
        self._folder.tasks_started(
            self._started_at,
            {
                t.name: {
                    "address": t.address,
                    "pid": t.engine.pid,
                    "run_dir": str(Path(TASKS_DIR) / task_dir_name(t.spec)),
                }
                for t in self._tasks
            },
        )

    def _hold_folders(self) -> None:
        """Locks the run folder, then every task's: a second launcher (a resume of the same
        folder) is refused before it touches anything. A resume refuses linked folders
        first, since even the task folders' lock files must not land elsewhere."""
        if self._folder_lock is None:
            self._folder_lock = RunFolderLock.acquire(self.run_dir)
        if self._resume:
            prepare_resume(self.run_dir)
        for task in self._tasks:
            task.engine.lock_folder()

    def _release_folders(self) -> None:
        for task in self._tasks:
            task.engine.close()
        if self._folder_lock is not None:
            self._folder_lock.release()
            self._folder_lock = None

    @property
    def done(self) -> bool:
        """True once the cluster's one terminal message has been handed out."""
        return self._done

    def tasks(self) -> list[TaskInfo]:
        return [
            TaskInfo(
                name=t.name,
                address=t.address,
                state=t.state,
                pid=t.engine.pid,
                last_line=t.last_line,
                last_step=t.lifecycle.last_step,
                run_dir=self.run_dir / TASKS_DIR / task_dir_name(t.spec),
                resources=t.resources,
            )
            for t in self._tasks
        ]

    def request_stop(self) -> None:
        """Asks the trainers to stop between steps; stragglers are killed after a grace.

        ``multi_worker_mirrored`` tasks agree on the step to stop after and all save
        a checkpoint there (``engine.tf.preemption``), as they do when one of them
        gets SIGTERM. A task that has not ended after :data:`STOP_GRACE_S` is
        killed; the trace is the chief's, complete to its last step.
        """
        if self._ending is None:
            self._end("stopped")

    def kill(self) -> None:
        """Kills every task now (a second Ctrl-C)."""
        for task in self._tasks:
            task.engine.kill()

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Asks politely, then kills; returns once every task has ended."""
        self.request_stop()
        deadline = time.monotonic() + grace_s
        while not self._done and time.monotonic() < deadline:
            self.poll(0.2)
        if not self._done:
            self.kill()
            while not self._done:
                self.poll(0.2)

    def close(self) -> None:
        """Ends whatever still runs and releases every task's resources."""
        if self._began and not self._done:
            self.stop()
        self._release_folders()
        self._close_files()

    # --- messages --------------------------------------------------------------------

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        """Messages of every task, waiting at most ``timeout_s`` for the first one."""
        if self._done or not self._began:
            return []
        deadline = time.monotonic() + timeout_s
        while True:
            for task in self._tasks:
                if not task.engine.done:
                    for message in task.engine.poll(0):
                        self._handle(task, message)
            self._advance()
            remaining = deadline - time.monotonic()
            if self._outbox or self._done or remaining <= 0:
                out, self._outbox = self._outbox, []
                return out
            time.sleep(min(0.05, remaining))

    def messages(self) -> Iterator[Message]:
        """Every message until the terminal one, blocking."""
        while not self._done:
            yield from self.poll(0.5)

    def _handle(self, task: _Task, message: Message) -> None:
        """Updates the task's state and passes on what belongs in the cluster's stream."""
        reporter = task is self._reporter
        task.lifecycle.note(message)
        if isinstance(message, Log):
            task.last_line = message.text
            if message.level in ("warning", "error"):
                self._folder.log(message.level, f"[{task.name}] {message.text}")
            self._outbox.append(message)
        elif isinstance(message, RunStarted):
            if reporter:
                if self._resume:  # the steps after the checkpoint are trained again
                    self._folder.resumed_at(message.first_step)
                self._held_start = message.model_copy(update={"run_dir": str(self.run_dir)})
            else:
                what = f"serves {message.serving}" if message.serving else "started its loop"
                self._note(f"{task.name} {what}", task=task.name)
        elif isinstance(message, Phase):
            task.last_line = message.name  # the Cluster tab shows what each task does
            if reporter:  # the reporting task's phases speak for the run, as its steps do
                self._pass_on(message)
        elif isinstance(message, StrategyReady):
            task.devices = message.devices
            self._compare_devices()
        elif isinstance(message, EnvironmentReady):
            task.environment = message
            self._compare_environments(task)
        elif isinstance(message, Resources):
            task.resources = message
            if self._findings.add(message):
                for finding in self._findings.new:
                    self._folder.log("warning", finding.line)
            self._outbox.append(message)  # every task's: the window shows each one's
        elif isinstance(message, StepMetrics):
            if reporter:
                self._last_step_at, self._dumped = time.monotonic(), False
                self._folder.record(message)
                self._pass_on(message)
        elif isinstance(message, RunFinished):
            self._note(f"{task.name} {message.status}", task=task.name)
        elif isinstance(message, RunFailed):
            if task.name not in self._killed:
                self._failures.append(message)
            self._note(
                f"{task.name} failed: {message.error_type}: {message.message}",
                level="error",
                task=task.name,
            )
        elif reporter:  # what a later protocol adds (within version 1) is the chief's to say
            if isinstance(message, EvalMetrics):
                self._folder.evaluated(message)
            self._pass_on(message)
        self._release_start()

    def _compare_devices(self) -> None:
        """Once every trainer's strategy exists: a worker whose devices are not its peers'
        fails the run now, before the first collective waits for it for ever."""
        trainers = self._trainers()
        if self._ending is not None or any(t.devices is None for t in trainers):
            return
        odd = odd_worker({t.name: t.devices or [] for t in trainers}, self.reporting_task)
        if odd is None:
            same = devices_text(trainers[0].devices or [])
            self._note(f"the workers' devices agree: {same} on each")
            return
        task, peer = (next(t for t in trainers if t.name == name) for name in odd)
        self._failures.append(
            RunFailed(
                error_type=DEVICES_DIFFER,
                message=f"its replicas run on {devices_text(task.devices or [])} "
                f"({task.address}), {peer.name}'s on {devices_text(peer.devices or [])} "
                f"({peer.address}): multi_worker_mirrored needs the same devices on every "
                "worker, else its first collective waits for ever; give each worker as many "
                "devices of one kind (CUDA_VISIBLE_DEVICES on each host)",
                task=task.name,
                known=True,
            )
        )

    def _compare_environments(self, task: _Task) -> None:
        """A task whose software or settings are not the chief's is named as soon as both
        said theirs (``environments``), long before the first collective."""
        chief = self._reporter.environment
        if chief is None:
            return
        name = self._reporter.name
        for other in [task] if task is not self._reporter else self._tasks:
            theirs = other.environment
            if other is self._reporter or theirs is None:
                continue
            warning = environment_warning(other.name, theirs, name, chief)
            if warning is not None:
                self._note(warning, level="warning", task=other.name)
        if all(t.environment and same_environment(t.environment, chief) for t in self._tasks):
            self._note(f"every task runs the same software (environment {chief.digest})")

    def _pass_on(self, message: Message) -> None:
        """The reporter's message, behind its RunStarted while that is held."""
        (self._outbox if self._held_start is None else self._held).append(message)

    def _release_start(self, *, now: bool = False) -> None:
        """Sends the reporter's RunStarted once it can speak for the whole cluster.

        A task's RunStarted names its own devices only; the run's names every
        trainer's (a multi-worker run's are on all its workers), so it waits until
        each trainer has started, or ended (``now``: the run ends before they all did).
        The top-level status then records what runs, as a single engine's does.
        """
        if self._held_start is None:
            return
        trainers = self._trainers()
        if not now and not all(t.lifecycle.started or t.lifecycle.ended for t in trainers):
            return
        devices = list(
            dict.fromkeys(
                d for t in trainers if t.lifecycle.started for d in t.lifecycle.started.devices
            )
        )
        started = self._held_start.model_copy(update={"devices": devices})
        self._outbox += [started, *self._held]
        self._held_start, self._held = None, []
        self._folder.run_started(started)

    def _folder_failure(self, exc: RunFolderError) -> None:
        """The launcher cannot write the run folder: the run fails (a failure of no task)."""
        self._failures.append(RunFailed(error_type=type(exc).__name__, message=str(exc)))

    # --- how the run ends ------------------------------------------------------------

    def _trainers(self) -> list[_Task]:
        return [t for t in self._tasks if not t.server]

    def _advance(self) -> None:
        now = time.monotonic()
        self._release_start(now=self._ending is not None)
        if (
            self._ending is None
            and self._last_step_at is not None
            and not self._dumped
            and now - self._last_step_at > self.quiet_dump_s
        ):
            self._dumped = True
            self._dump_stacks(now - self._last_step_at)
        if self._ending is None:
            ended = [
                t for t in self._tasks if t.server and isinstance(t.lifecycle.terminal, RunFinished)
            ]
            if ended:
                self._failures.append(
                    RunFailed(
                        error_type="TaskEnded",
                        message="it ended while the coordinator was still training",
                        task=ended[0].name,
                    )
                )
            if self._failures:
                self._end("failed")
            elif all(t.lifecycle.ended for t in self._trainers()):
                self._end("finished")
        if self._ending is None:
            return
        if not self._servers_asked and all(t.engine.done for t in self._trainers()):
            self._servers_asked = True
            for task in self._tasks:
                if task.server:
                    task.engine.request_stop()
            self._kill_at = max(self._kill_at or now, now + FAILURE_GRACE_S)
        if self._kill_at is not None and now >= self._kill_at:
            for task in self._tasks:
                if not task.engine.done and task.engine.exit_code is None:
                    self._note(f"killing {task.name}: it did not end in time", task=task.name)
                    self._killed.append(task.name)
                    task.engine.kill()
            self._kill_at = None
        if all(t.engine.done for t in self._tasks):
            self._outbox.append(self._final())

    def dump_stacks(self) -> list[TaskStack]:
        """Every running task writes its Python stacks into its folder (``stacks.txt``), on
        this machine or on its host; where each stands. Takes seconds: call it beside the
        poll (it reads only the tasks' pids and folders), never on a window's thread."""
        pids = {
            t.name: t.engine.pid
            for t in self._tasks
            if t.engine.pid is not None and not t.engine.done
        }
        running = [t.spec for t in self._tasks if t.name in pids]
        return self._placement.ask_for_stacks(self.tf_config, running, pids)

    def _dump_stacks(self, quiet_s: float) -> None:
        """Where each task stands, in the log: a hang says where it is before it times out.
        A launch's tasks are asked over ssh, all at once (a few seconds, as a local dump)."""
        stacks = self.dump_stacks()
        where = self._placement.stacks_where(stacks)
        straggler = self._findings.straggler()
        before = f"; before it, {straggler.line}" if straggler is not None else ""
        self._note(
            f"no step for {quiet_s:.0f} s: "
            + "; ".join(diagnose(stacks))
            + f" (each task's stacks: {where}){before}",
            level="warning",
        )

    def _end(self, ending: Ending) -> None:
        self._ending = ending
        if ending == "failed":
            # Seen now, while a stopped task is still stopped (it is killed on the way out).
            self._stopped = self._placement.stopped_tasks(
                {t.name: t.engine.pid for t in self._tasks}
            )
            blamed = self._cause()
            what = "stopped responding" if blamed.error_type == STALLED else "failed"
            who = f"{blamed.task} {what}" if blamed.task else "the launcher failed"  # its folder
            self._note(f"{who}: stopping the other tasks", level="error")
            for task in self._tasks:
                task.engine.request_stop()
            self._kill_at = time.monotonic() + FAILURE_GRACE_S
        elif ending == "stopped":
            self._note("stop requested: stopping the trainers between steps")
            for task in self._trainers():
                task.engine.request_stop()
            self._kill_at = time.monotonic() + STOP_GRACE_S

    def _final(self) -> RunFinished | RunFailed:
        self._done = True
        reporter = self._reporter
        last_step = reporter.lifecycle.last_step
        final: RunFinished | RunFailed
        if self._ending == "failed":
            failure = self._cause()
            forced = [name for name in self._killed if name != failure.task]
            killed = (
                f" (then stopped by force, not having ended when asked: {', '.join(forced)})"
                if forced
                else ""
            )
            final = RunFailed(
                error_type=failure.error_type,
                message=f"{_who(failure)}{failure.message}{killed}",
                traceback=failure.traceback,
                last_step=last_step,
                exit_code=failure.exit_code,
                task=failure.task,
                known=failure.known,
            )
            details = {"error_type": final.error_type, "error": final.message, "task": final.task}
            status = "failed"
        else:
            if isinstance(reporter.lifecycle.terminal, RunFinished):
                final = reporter.lifecycle.terminal
            else:  # the reporting task was killed on its way to a stop
                final = reporter.lifecycle.stopped(killed=False)
            details, status = {}, final.status
        if self._folder_lock is not None:
            self._folder_lock.free_reserve()  # on a full disk, the room to record the end
        self._folder.finish(
            status,
            started_at=self._started_at,
            last_step=last_step,
            findings=[f.line for f in self._findings.current],
            **details,
        )
        self._note(f"the cluster run {status}")
        self._close_files()
        return final

    def _cause(self) -> RunFailed:
        """The failure to blame (``engine.cluster.blame``): a task that died, one that
        stopped responding, else one that failed on its own."""
        return cause(self._failures, [t.name for t in self._tasks], self._stopped)

    # --- the launcher's notes -------------------------------------------------------

    def _note(self, text: str, *, level: str = "info", task: str | None = None) -> None:
        """The launcher's own line: into the top-level engine.log and the message stream."""
        self._folder.log(level, text)
        self._outbox.append(Log(level=level, source="engine", text=text, task=task))

    def _close_files(self) -> None:
        """Releases what the run holds: its files and its placement's network."""
        self._placement.close_network()
        self._folder.close()


def _who(failure: RunFailed) -> str:
    """How the run's one line starts: ``worker:1 failed: `` (``worker:1 `` for a task that
    stopped responding, whose message says so)."""
    if failure.task is None:
        return ""
    return f"{failure.task} " if failure.error_type == STALLED else f"{failure.task} failed: "
