"""Batch systems that hold a cluster's jobs, as plug-ins found by name (Slurm; the next one,
Kubernetes Jobs, is its module plus its line in :data:`SCHEDULERS`).

A scheduler takes a project's cluster as a job (:meth:`Scheduler.submit`), says a job's
state, follows a job as a handle the CLI's printer and the window's ``RunModel`` read like
any run's (:class:`JobRun`), cancels it, signals its tasks for their stacks, and lists its
jobs as rows of the Runs list. The CLI (``distloop submit --follow/--resume``,
``distloop cluster --dump-task``), the window's Follow Job, Resume and Dump Stacks and the
Runs list ask a job's scheduler (:func:`scheduler_of`, :func:`listed_jobs`), never a
concrete type, so a new batch system needs no other file.

Each scheduler's module holds ``SCHEDULER``, an object with :class:`Scheduler`'s members;
:data:`SCHEDULERS` maps its name to that module, imported when first asked for (as
``engine.exports`` and ``engine.data_sources`` find theirs), so listing the names loads
none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..engine_handle import EngineHandle
from ..run_folder import PROJECT_FILE

if TYPE_CHECKING:
    from ..config import Project
    from ..run_history import RunSummary

SCHEDULERS: dict[str, str] = {"slurm": f"{__package__}.slurm_scheduler"}
"""Every scheduler by name: the module whose ``SCHEDULER`` it is."""
ASK_TIMEOUT_S = 30.0
"""How long one question to a batch system may take (a controller that is down keeps
Slurm's ``scontrol`` retrying)."""


class SchedulerError(Exception):
    """A batch system refused, or cannot be asked: one line that says why."""


class JobState(Protocol):
    """A job as its batch system sees it: ``state`` in its words (PENDING, RUNNING, ...),
    shown in the status panel and the Runs list; ``ended`` once it holds the job no more."""

    @property
    def state(self) -> str: ...

    @property
    def ended(self) -> bool: ...

    @property
    def running(self) -> bool:
        """Its tasks run now (they can be asked for their stacks)."""
        ...


class JobRun(EngineHandle, Protocol):
    """A job followed as one run: driven like a local engine (``start``, ``poll`` until
    ``done``), with a batch system's meanings: ``request_stop`` cancels the job (its tasks
    save a checkpoint), ``kill`` stops following and leaves the job to its scheduler
    (``detached``), ``close`` never ends the job."""

    project: Project
    run_dir: Path
    """The job's run folder: what Resume resubmits and Follow follows."""
    job_id: str
    detached: bool
    on_state: Callable[[JobState], None] | None
    """Hears each change of the job's state (the status panel, the CLI's stderr)."""


class Scheduler(Protocol):
    """A batch system that holds jobs (see the module)."""

    name: str
    """Its name in :data:`SCHEDULERS`."""
    title: str
    """How rows and messages name it (``Slurm``)."""

    def submit(
        self, project: Project, job_folder: Path, shape: object, *, base_dir: Path | None = None
    ) -> JobRun:
        """Writes ``job_folder`` and submits the job (``shape``: how many machines and for
        how long, in the scheduler's own terms); the returned handle is not started."""
        ...

    def resubmit(self, run_dir: Path) -> JobRun:
        """A new job that continues the stopped run in ``run_dir`` from its checkpoint."""
        ...

    def follow(self, run_dir: Path) -> JobRun:
        """The handle of the job that runs (or last ran) ``run_dir``."""
        ...

    def job_of(self, run_dir: Path) -> str | None:
        """The id of the latest job of this scheduler that ran ``run_dir``; None for a
        folder it never ran."""
        ...

    def state(self, job_id: str, *, timeout_s: float) -> JobState:
        """What the batch system says of the job now; its own error (one line) when it
        cannot be asked."""
        ...

    def cancel(self, job_id: str) -> None:
        """Ends the job; its tasks get SIGTERM and save a checkpoint."""
        ...

    def dump_stacks(self, run_dir: Path, job_id: str) -> list[str]:
        """Signals every task of the job to write its stacks into its folder; one line per
        task not where its peers wait (``engine.stack_dumps.diagnose``)."""
        ...

    def project_of(self, run_dir: Path) -> Project:
        """The project ``run_dir``'s jobs run; the scheduler's error when it cannot be read."""
        ...

    def jobs_root(self, runs_root: Path) -> Path:
        """Where the window puts this scheduler's job folders, beside ``runs_root``."""
        ...

    def list_jobs(self, runs_root: Path, *, scan: bool = True) -> list[RunSummary]:
        """A Runs-list row for each of its jobs (read from their folders, quickly: no
        question to the batch system); ``scan`` as ``engine.run_history.summarize``'s."""
        ...

    def summarize(self, run_dir: Path, *, scan: bool = True) -> RunSummary:
        """The row of the job that runs ``run_dir``, from its folders alone."""
        ...

    def with_state(self, summary: RunSummary) -> RunSummary:
        """The row with the batch system's word on its job (seconds at worst: a worker
        thread's work)."""
        ...

    def remember(self, runs_root: Path, run_dir: Path) -> None:
        """Lists the job that runs ``run_dir`` too when the user put its folder outside
        :meth:`jobs_root`."""
        ...


def scheduler_named(name: str) -> Scheduler:
    """The scheduler called ``name`` (one of :data:`SCHEDULERS`)."""
    if name not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {name!r}; use one of {', '.join(SCHEDULERS)}")
    found: Scheduler = import_module(SCHEDULERS[name]).SCHEDULER
    assert found.name == name
    return found


def scheduler_of(run_dir: Path) -> Scheduler:
    """The scheduler whose job runs (or ran) ``run_dir``; SchedulerError for a folder no
    scheduler's job runs."""
    found = _job_scheduler(run_dir)
    if found is None:
        raise SchedulerError(f"{run_dir} is not the run folder of a job distloop submit submitted")
    return found


def job_run_scheduler(path: Path) -> Scheduler | None:
    """The scheduler of the job whose run folder ``path`` is; None for any other folder (a
    run folder of its own holds its project; a job's has the job's record only)."""
    return None if (path / PROJECT_FILE).exists() else _job_scheduler(path)


def _job_scheduler(run_dir: Path) -> Scheduler | None:
    for name in SCHEDULERS:
        scheduler = scheduler_named(name)
        if scheduler.job_of(run_dir) is not None:
            return scheduler
    return None


def listed_jobs(runs_root: Path, *, scan: bool = True) -> list[RunSummary]:
    """The Runs-list rows of every scheduler's jobs."""
    return [
        row for name in SCHEDULERS for row in scheduler_named(name).list_jobs(runs_root, scan=scan)
    ]


def jobs_roots(runs_root: Path) -> list[Path]:
    """Every scheduler's folder of job folders (the Runs list watches them)."""
    return list(dict.fromkeys(scheduler_named(name).jobs_root(runs_root) for name in SCHEDULERS))
