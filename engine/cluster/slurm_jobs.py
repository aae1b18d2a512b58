"""A Slurm batch job submitted and followed as one run: ``distloop submit`` and the window.

:func:`submit_job` writes the job folder (``engine.exports.slurm``'s ``slurm.sbatch``, the one
place the script is written) and runs ``sbatch``; :func:`resubmit_job` submits a new job
that resumes a stopped run in its own folder; :func:`follow_job` follows the job that
runs a run folder now. Each returns a :class:`SlurmRun`, an ``EngineHandle`` like a
local engine's, so the CLI's printer and the window's ``RunModel`` read it unchanged.

The job's tasks run on other machines; what comes back is each task's
``messages.jsonl`` (``distloop run --record-messages``) on the shared file system, read
as it grows (the chief's for the run, every other task's for its resource samples, so
the straggler is named as in a local cluster), and the job's state from Slurm
(``scontrol``, else ``sacct``). A requeued
job (preemption, ``scontrol requeue``) resumes from its checkpoint by itself, so the
chief's ``stopped`` is the run's end only once Slurm says the job has ended.

Where things are::

    JOB_FOLDER/slurm.sbatch, project.json, README.md   written by export
    JOB_FOLDER/slurm-<job id>.out                      the job's output (every attempt)
    JOB_FOLDER/runs/<first job id>/                    the run folder
        status.json                                    {"slurm": {"job": ..., ...}}
        tasks/<task>/                                  each task's run folder

For a window (nothing here blocks for long but a stack dump, which takes up to
:data:`DUMP_ANSWER_S`)::

    run = submit_job(project, job_folder, SlurmJob(nodes=2), base_dir=project_dir)
    model = RunModel(run_dir=run.run_dir)       # the live plot, as for any run
    run.on_state = show_state                    # JobState: PENDING (Resources), RUNNING, ...
    run.start()
    while not run.done:
        for message in run.poll(0.1):
            model.apply(message)
    run.request_stop()   # Stop: scancel, every task saves a checkpoint: ``stopped``
    run.kill()           # stop following; the job goes on in Slurm (run.detached)
    resubmit_job(run.run_dir)                    # Resume: a new job, from the checkpoint

A runs list tells a submitted run by :func:`job_of` and asks :func:`job_state` for it.
SlurmJobError (one line) says why Slurm refused or cannot be asked.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster_layout import task_dir_name
from ..config import Project
from ..export import export_cluster
from ..exports.slurm import SBATCH_FILE, SlurmJob
from ..fileio import open_bytes
from ..findings import Findings
from ..messages import (
    EnvironmentReady,
    Log,
    Message,
    Resources,
    RunFailed,
    RunFinished,
    StepMetrics,
)
from ..problems import ProblemsError
from ..project_file import load_project
from ..run_folder import (
    MESSAGES_FILE,
    PROJECT_FILE,
    STATUS_FILE,
    TASKS_DIR,
    read_status,
    update_status,
)
from ..run_lifecycle import RunLifecycle
from ..stack_dumps import DUMP_SIGNAL, collect_stacks, diagnose
from ..tf_config import chief_of
from .environments import environment_warning
from .message_files import MessagesTail
from .scheduler import SchedulerError
from .supervisor import QUIET_DUMP_S

RUNS_DIR = "runs"
STATE_EVERY_S = 2.0
"""How often Slurm is asked for the job's state: ``scontrol`` asks the controller."""
END_WAIT_S = 60.0
"""After the chief's last message, how long the job may stay RUNNING before the message
is taken as the run's end anyway (a task that never exits holds the job)."""
SETTLE_S = 5.0
"""After the job ended without the chief's last message, how long a shared file system may
take to show the lines written last on another node."""
COMMAND_TIMEOUT_S = 30.0
DUMP_ANSWER_S = 10.0
"""How long the tasks of a job have to write their stacks: the signal goes through
slurmctld, each node's slurmd and the task's ``distloop run`` first."""
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "UNKNOWN",
    }
)
"""A job in one of these has ended (UNKNOWN: Slurm has forgotten it: it ended long ago)."""
REQUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD"})
_JOB_ID = re.compile(r"[0-9]+")
_TASK_FOLDER = re.compile(r"[a-z]+-\d+")
_FIELD = re.compile(r"\b(JobState|Reason|Restarts)=(\S*)")
_SBATCH_NOISE = re.compile(r"^(sbatch: )?(error: )?(Batch job submission failed: )?")


class SlurmJobError(SchedulerError):
    """Slurm refused, or cannot be asked: one line that says why."""


@dataclass(frozen=True)
class JobState:
    """A job as Slurm sees it: ``state`` as Slurm names it (PENDING, RUNNING, COMPLETED,
    CANCELLED, ...), ``reason`` why it waits (Resources, BeginTime; empty when none), and
    how often it was requeued."""

    state: str
    reason: str = ""
    restarts: int = 0

    @property
    def ended(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    def __str__(self) -> str:
        return f"{self.state} ({self.reason})" if self.reason else self.state


def _slurm(
    argv: list[str], env: Mapping[str, str] | None, timeout_s: float = COMMAND_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            env=None if env is None else dict(env),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise SlurmJobError(
            f"{argv[0]} is not on PATH: run this on a machine that submits Slurm jobs "
            "(Slurm's client commands installed and configured)"
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmJobError(
            f"{argv[0]} did not answer in {timeout_s:g} s: is slurmctld up?"
        ) from None


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """The last line a Slurm command printed, without its ``sbatch: error:`` prefixes."""
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return _SBATCH_NOISE.sub("", lines[-1]) if lines else f"exit code {done.returncode}"


def job_state(
    job_id: str, env: Mapping[str, str] | None = None, *, timeout_s: float = COMMAND_TIMEOUT_S
) -> JobState:
    """The job's state: from the controller while it knows the job (``scontrol``), then
    from accounting (``sacct``) where there is one; UNKNOWN when neither knows it.

    ``timeout_s`` bounds each command: with slurmctld down, ``scontrol`` retries for a
    while, and a runs list asks for many jobs in turn."""
    shown = _slurm(["scontrol", "show", "job", "-o", job_id], env, timeout_s)
    fields = dict(_FIELD.findall(shown.stdout)) if shown.returncode == 0 else {}
    if "JobState" in fields:
        reason = fields.get("Reason", "")
        restarts = fields.get("Restarts", "0")
        return JobState(
            fields["JobState"],
            "" if reason == "None" else reason,
            int(restarts) if _JOB_ID.fullmatch(restarts) else 0,
        )
    with contextlib.suppress(SlurmJobError):
        accounted = _slurm(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"], env, timeout_s)
        words = accounted.stdout.split()
        if accounted.returncode == 0 and words:
            return JobState(words[0].rstrip("+"))
    return JobState("UNKNOWN")


def chief_folder(run_dir: Path, strategy_kind: str) -> Path:
    """The reporting task's folder: rank 0 is the chief (parameter_server) or worker 0."""
    cluster = {"chief": ()} if strategy_kind == "parameter_server" else {"worker": ()}
    return run_dir / TASKS_DIR / task_dir_name(chief_of(cluster))


def submit_job(
    project: Project,
    job_folder: Path,
    job: SlurmJob,
    *,
    base_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> SlurmRun:
    """Writes the job folder and submits ``slurm.sbatch``; the run is followed from the
    returned handle (not started yet: :meth:`SlurmRun.start` begins following).

    ``base_dir`` is the project file's folder. Raises ProblemsError for a project or job
    shape the script cannot run, SlurmJobError when Slurm refuses (one line), OSError when
    the folder cannot be written.
    """
    job_folder = job_folder.resolve()
    export_cluster(project, job_folder, "slurm", base_dir=base_dir, slurm=job)
    job_id = _sbatch(job_folder, env, run_dir=None)
    run_dir = job_folder / RUNS_DIR / job_id
    if (run_dir / STATUS_FILE).exists():  # Slurm counts job ids from 1 again when reset
        cancel_job(job_id, env)
        raise SlurmJobError(
            f"{run_dir} holds the run of an earlier job {job_id} (Slurm hands out job ids "
            "again after a reset): the new job is cancelled; submit into another --out folder"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    _record_job(run_dir, job_id, job_folder, 0, {})
    return SlurmRun(project, run_dir, job_id, job_folder, env=env)


def resubmit_job(run_dir: Path, *, env: Mapping[str, str] | None = None) -> SlurmRun:
    """A new job from the same folder that resumes the run in ``run_dir`` from its last
    checkpoint (the script resumes ``DISTLOOP_RUN_DIR`` when given ``DISTLOOP_RESUME``)."""
    project, job_folder = _submitted_run(run_dir)
    chief = chief_folder(run_dir, project.strategy.kind)
    if not chief.is_dir():
        raise SlurmJobError(f"{run_dir} holds no task's folder yet: nothing to resume")
    with contextlib.suppress(OSError, ValueError):
        if read_status(chief).get("status") == "finished":
            raise SlurmJobError(f"the run in {run_dir} has finished: nothing to resume")
    state = job_state(_recorded(run_dir)["job"], env)
    if not state.ended:
        raise SlurmJobError(
            f"job {_recorded(run_dir)['job']} still runs this run ({state}): follow it with "
            f"distloop submit --follow {run_dir}"
        )
    # the earlier jobs' messages are theirs: this job's follower starts after them
    ends = {name: _size(folder / MESSAGES_FILE) for name, folder in task_folders(run_dir).items()}
    start = ends.pop(chief.name, 0)
    job_id = _sbatch(job_folder, env, run_dir=run_dir.resolve())
    _record_job(run_dir, job_id, job_folder, start, ends)
    return SlurmRun(
        project, run_dir, job_id, job_folder, env=env, messages_from=start, peers_from=ends
    )


def follow_job(run_dir: Path, *, env: Mapping[str, str] | None = None) -> SlurmRun:
    """The handle of the job that runs (or last ran) ``run_dir``."""
    project, job_folder = _submitted_run(run_dir)
    record = _recorded(run_dir)
    return SlurmRun(
        project,
        run_dir,
        record["job"],
        job_folder,
        env=env,
        messages_from=record["messages_from"],
        peers_from=record["peers_from"],
    )


def job_of(run_dir: Path) -> str | None:
    """The id of the latest job that ran ``run_dir``; None for a run no submit made."""
    try:
        return _recorded(run_dir)["job"]
    except SlurmJobError:
        return None


def _recorded(run_dir: Path) -> dict[str, Any]:
    """What submit recorded: the run's latest job, its folder, and where in the chief's
    ``messages.jsonl`` (and in each other task's, by its folder's name) that job's
    messages begin."""
    try:
        record = read_status(run_dir).get("slurm")
    except (OSError, ValueError):
        record = None
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("job"), str)
        or not _JOB_ID.fullmatch(record["job"])
        or not isinstance(record.get("folder"), str)
        or not isinstance(record.get("messages_from"), int)
        or record["messages_from"] < 0
    ):
        raise SlurmJobError(f"{run_dir} is not the run folder of a job distloop submit submitted")
    peers = record.get("peers_from", {})  # none before a resubmission, or in older folders
    if not isinstance(peers, dict) or not all(
        isinstance(offset, int) and offset >= 0 for offset in peers.values()
    ):
        raise SlurmJobError(f"{run_dir}: what submit recorded of its tasks is not offsets")
    return {**record, "peers_from": peers}


def job_project(run_dir: Path) -> Project:
    """The project the jobs of ``run_dir`` run (their folder's ``project.json``); raises
    SlurmJobError for a folder no submit made or a project that cannot be read."""
    return _submitted_run(run_dir)[0]


def _submitted_run(run_dir: Path) -> tuple[Project, Path]:
    """The run's project and its job folder, from what submit recorded."""
    job_folder = Path(_recorded(run_dir)["folder"])
    try:
        return load_project(job_folder / PROJECT_FILE).resolve_paths(job_folder), job_folder
    except ProblemsError as exc:
        raise SlurmJobError(f"cannot read the job's project: {exc}") from None


def _record_job(
    run_dir: Path, job_id: str, job_folder: Path, messages_from: int, peers_from: dict[str, int]
) -> None:
    update_status(
        run_dir,
        slurm={
            "job": job_id,
            "folder": str(job_folder),
            "messages_from": messages_from,
            "peers_from": peers_from,
        },
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _task_name(folder_name: str) -> str:
    """``worker:1`` for its folder ``worker-1``."""
    return folder_name.replace("-", ":", 1)


def task_folders(run_dir: Path) -> dict[str, Path]:
    """The job's task folders that exist now, by name (``worker-1``); a link or a name no
    task has is none (the folder is on a file system others write)."""
    tasks = run_dir / TASKS_DIR
    try:
        listed = sorted(tasks.iterdir()) if tasks.is_dir() else []
    except OSError:
        return {}
    return {
        folder.name: folder
        for folder in listed
        if _TASK_FOLDER.fullmatch(folder.name) and folder.is_dir() and not folder.is_symlink()
    }


def _sbatch(job_folder: Path, env: Mapping[str, str] | None, *, run_dir: Path | None) -> str:
    environ = dict(os.environ if env is None else env)
    if run_dir is not None:
        environ["DISTLOOP_RUN_DIR"] = str(run_dir)
        environ["DISTLOOP_RESUME"] = "1"
    try:
        done = subprocess.run(
            ["sbatch", "--parsable", SBATCH_FILE],
            cwd=job_folder,
            env=environ,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise SlurmJobError(
            "sbatch is not on PATH: submit from a machine with Slurm's client commands "
            "(or write the script with distloop export --format slurm)"
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmJobError(f"sbatch did not answer in {COMMAND_TIMEOUT_S:.0f} s") from None
    job_id = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not _JOB_ID.fullmatch(job_id):
        raise SlurmJobError(f"sbatch refused the job: {_said(done)}")
    return job_id


def cancel_job(job_id: str, env: Mapping[str, str] | None = None) -> None:
    """``scancel``: Slurm sends every task SIGTERM (the preemption path saves a checkpoint
    at one step), then SIGKILL after its KillWait (30 s by default). A job Slurm cannot be
    asked about is left as it is: its state says what became of it."""
    with contextlib.suppress(SlurmJobError):
        _slurm(["scancel", job_id], env)


def dump_job_stacks(run_dir: Path, job_id: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Every task of the job writes its stacks into its folder (``stacks.txt``); one line
    per task that is not where its peers wait (``engine.stack_dumps.diagnose``).

    ``scancel --signal=USR1`` reaches each task's first process, the task's ``distloop
    run``, which passes it to its engine (the batch script itself is not signalled).
    """
    folders = {_task_name(name): path for name, path in task_folders(run_dir).items()}
    if not folders:
        raise SlurmJobError(f"job {job_id} has no task folders in {run_dir / TASKS_DIR} yet")

    def signal_job() -> None:
        done = _slurm(["scancel", f"--signal={DUMP_SIGNAL.name[3:]}", job_id], env)
        if done.returncode != 0:
            raise SlurmJobError(f"scancel could not signal job {job_id}: {_said(done)}")

    return diagnose(collect_stacks(folders, signal_job, DUMP_ANSWER_S))


class SlurmRun:
    """A submitted job read as one run: the chief's messages, and the job's ends.

    Driven like a local engine (``start``, ``poll`` until ``done``, ``request_stop``,
    ``close``), with Slurm's meanings: :meth:`request_stop` is ``scancel`` (every task
    gets SIGTERM and stops at one step with a checkpoint: ``stopped``, resumable with
    :func:`resubmit_job`); :meth:`kill` stops following and leaves the job to Slurm
    (``done`` with no last message, :attr:`detached` set); :meth:`close` never ends the job.
    :attr:`state` is the job's latest :class:`JobState`, and ``on_state`` hears each change.
    """

    quiet_dump_s: float = QUIET_DUMP_S
    """After this long without a step (once stepping began), every task dumps its stacks
    and the run names the task not where its peers wait, as a local cluster does."""

    def __init__(
        self,
        project: Project,
        run_dir: Path,
        job_id: str,
        job_folder: Path,
        *,
        env: Mapping[str, str] | None = None,
        on_state: Callable[[JobState], None] | None = None,
        messages_from: int = 0,
        peers_from: Mapping[str, int] | None = None,
    ) -> None:
        self.project = project
        self.run_dir = run_dir
        self.job_id = job_id
        self.job_folder = job_folder
        self.on_state = on_state
        self.state: JobState | None = None
        self.detached = False
        self._env = env
        chief = chief_folder(run_dir, project.strategy.kind)
        self._chief = MessagesTail(chief / MESSAGES_FILE, messages_from)
        self._chief_task = _task_name(chief.name)
        self._peers_from = dict(peers_from or {})
        """Where each other task's messages of this job begin (by folder name)."""
        self._peers: dict[str, MessagesTail] = {}
        self._peers_listed_at = 0.0
        self._findings = Findings()
        self._environments: dict[str, EnvironmentReady] = {}
        """Each task's software as it said it; the chief's under its own name."""
        self._compared: set[str] = set()
        """Every task's samples: names the straggler in a stall's line, as a local
        cluster does (a RunModel reading the same samples says it as it happens)."""
        self._started = False
        self._done = False
        self._stop_sent = False
        self._asked_at = 0.0
        self._held: tuple[RunFinished | RunFailed, float, int] | None = None
        """The chief's last message, its time, and the job's restarts when that attempt
        started: the run's end once the job has ended, or an attempt's end when the job
        was requeued (and so restarted once more)."""
        self._attempt_restarts = 0
        self._earlier_end: RunFinished | RunFailed | None = None
        self._ended_at: float | None = None
        self._last_step_at: float | None = None
        self._dumped = False
        self._lifecycle = RunLifecycle()
        """The chief's messages, every attempt's: its last step and its last message."""

    @property
    def done(self) -> bool:
        return self._done

    @property
    def pid(self) -> None:
        """No process here: the tasks run where Slurm placed them."""
        return None

    def start(self) -> None:
        self._started = True

    def request_stop(self) -> None:
        """Cancels the job (:func:`cancel_job`): every task saves a checkpoint."""
        if self._stop_sent or self._done:
            return
        self._stop_sent = True
        cancel_job(self.job_id, self._env)

    def kill(self) -> None:
        """Stops following; the job goes on (or ends) in Slurm."""
        self.detached = True
        self._done = True
        self._close_stream()

    def stop(self, grace_s: float = 30.0) -> None:
        self.request_stop()
        deadline = time.monotonic() + grace_s
        while not self._done and time.monotonic() < deadline:
            self.poll(0.5)
        if not self._done:
            self.kill()

    def close(self) -> None:
        self._close_stream()

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        """The chief's new messages, the job's state changes as log lines, and once the job
        has ended, exactly one RunFinished or RunFailed."""
        if self._done or not self._started:
            return []
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_job(out)  # first: a replayed attempt's end is judged by the job's restarts
            if not self._done:  # nothing follows the last message
                self._read(out)
                self._quiet_dump(time.monotonic(), out)
            remaining = deadline - time.monotonic()
            if out or self._done or remaining <= 0:
                return out
            time.sleep(min(0.2, remaining))

    # --- the chief's messages ---------------------------------------------------------

    def _read(self, out: list[Message]) -> None:
        for message in self._chief.read():
            self._take(message, out)
        self._read_peers(out)

    def _read_peers(self, out: list[Message]) -> None:
        """The other tasks' resource samples (their steps are the chief's): every task's
        load, for the Resources view and the straggler. Their folders appear as they
        start, so they are looked for again every :data:`STATE_EVERY_S`."""
        now = time.monotonic()
        if now - self._peers_listed_at >= STATE_EVERY_S:
            self._peers_listed_at = now
            for name, folder in task_folders(self.run_dir).items():
                if name != self._chief.path.parent.name and name not in self._peers:
                    start = self._peers_from.get(name, 0)
                    self._peers[name] = MessagesTail(folder / MESSAGES_FILE, start)
        for name, tail in self._peers.items():
            for message in tail.read():
                if isinstance(message, Resources):
                    self._sampled(message, _task_name(name), out)
                elif isinstance(message, EnvironmentReady):
                    self._environments[_task_name(name)] = message
                    self._compare_environments(out)
                elif isinstance(message, Log) and message.task is None:  # the file's own fault
                    out.append(message)

    def _take(self, message: Message, out: list[Message]) -> None:
        self._lifecycle.note(message)
        ended = self._lifecycle.terminal
        if ended is not None and message is ended:
            self._held = (ended, time.monotonic(), self._attempt_restarts)
            return
        if message is self._lifecycle.started:  # an attempt begins: the first, or a requeue's
            if self._held is not None:
                self._requeued(out)
            self._attempt_restarts = self.state.restarts if self.state else 0
        if isinstance(message, StepMetrics) and message.steps:
            self._last_step_at, self._dumped = time.monotonic(), False
        if isinstance(message, Resources):
            self._sampled(message, self._chief_task, out)
            return
        if isinstance(message, EnvironmentReady):
            self._environments[self._chief_task] = message
            self._compare_environments(out)
        out.append(message)

    def _compare_environments(self, out: list[Message]) -> None:
        """Each task whose software is not the chief's, named once, as soon as both said
        theirs: long before the first collective (``environments``)."""
        chief = self._environments.get(self._chief_task)
        if chief is None:
            return
        for task, theirs in sorted(self._environments.items()):
            if task == self._chief_task or task in self._compared:
                continue
            self._compared.add(task)
            warning = environment_warning(task, theirs, self._chief_task, chief)
            if warning is not None:
                out.append(Log(level="warning", text=warning, task=task))

    def _sampled(self, sample: Resources, task: str, out: list[Message]) -> None:
        """A task's sample, named by its folder: each task of a job runs alone and sends
        its own unnamed (and what a file on a shared file system claims counts for nothing)."""
        sample = sample.model_copy(update={"task": task})
        self._findings.add(sample)
        out.append(sample)

    def _requeued(self, out: list[Message]) -> None:
        """The attempt's end was no run's end: Slurm starts the job again."""
        if self._held is None:
            return
        self._earlier_end, self._held = self._held[0], None
        self._last_step_at = None
        out.append(
            Log(
                level="warning",
                text=f"job {self.job_id} was requeued: its tasks resume from the last "
                "checkpoint when it starts again",
            )
        )

    # --- the job ----------------------------------------------------------------------

    def _check_job(self, out: list[Message]) -> None:
        now = time.monotonic()
        if now - self._asked_at < (0.5 if self._held else STATE_EVERY_S):
            return
        self._asked_at = now
        try:
            state = job_state(self.job_id, self._env)
        except SlurmJobError as exc:
            out.append(Log(level="warning", text=str(exc)))
            return
        if state != self.state:
            self.state = state
            out.append(Log(text=f"job {self.job_id}: {state}"))
            if self.on_state is not None:
                self.on_state(state)
        if self._held is not None:
            message, since, restarts = self._held
            if state.ended or now - since > END_WAIT_S:
                self._end(message, out)
            elif state.state in REQUEUED_STATES or state.restarts > restarts:
                self._requeued(out)
            return
        if not state.ended:
            self._ended_at = None
            return
        self._ended_at = self._ended_at or now
        if now - self._ended_at > SETTLE_S:
            self._end(self._without_last_message(state), out)

    def _quiet_dump(self, now: float, out: list[Message]) -> None:
        if (
            self._last_step_at is None
            or self._dumped
            or self._held is not None
            or self.state is None
            or self.state.state != "RUNNING"
            or now - self._last_step_at <= self.quiet_dump_s
        ):
            return
        self._dumped = True
        try:
            lines = dump_job_stacks(self.run_dir, self.job_id, self._env)
        except (SlurmJobError, OSError) as exc:
            out.append(Log(level="warning", text=f"no step for a while, and no stacks: {exc}"))
            return
        straggler = self._findings.straggler()
        before = f"; before it, {straggler.line}" if straggler is not None else ""
        out.append(
            Log(
                level="warning",
                text=f"no step for {now - self._last_step_at:.0f} s: "
                + "; ".join(lines)
                + f" (each task's stacks: {self.run_dir / TASKS_DIR}/*/stacks.txt){before}",
            )
        )

    def _without_last_message(self, state: JobState) -> RunFinished | RunFailed:
        """How a job that ended without the chief's last message ended: an earlier
        attempt's end (it was requeued, then cancelled while it waited), a stop
        (cancelled), or a failure that names the job's state and last output."""
        if self._earlier_end is not None:
            return self._earlier_end
        if state.state == "CANCELLED":
            return self._lifecycle.stopped(killed=self._lifecycle.stepped)
        return RunFailed(
            error_type="SlurmJobEnded",
            message=f"job {self.job_id} ended {state} before its chief's last message: "
            f"{self._output_tail()}",
            last_step=self._lifecycle.last_step,
            known=True,
        )

    def _output_tail(self, lines: int = 5) -> str:
        path = self.job_folder / f"slurm-{self.job_id}.out"
        try:
            with open_bytes(path) as output:
                output.seek(max(0, os.fstat(output.fileno()).st_size - 16384))
                text = output.read().decode("utf-8", "replace")
        except OSError:
            return f"see {path}"
        said = [line.strip() for line in text.splitlines() if line.strip()]
        return " | ".join(said[-lines:]) or f"{path} is empty"

    def _end(self, message: RunFinished | RunFailed, out: list[Message]) -> None:
        out.append(message)
        self._done = True
        self._close_stream()

    def _close_stream(self) -> None:
        for tail in (self._chief, *self._peers.values()):
            tail.close()
