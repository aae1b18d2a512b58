"""The window's Slurm jobs as rows of its runs list (TF-free, Qt-free).

A job's run folder (``JOB_FOLDER/runs/<job id>/``) records only the job; the run's
metrics, checkpoints and model are in its chief's task folder. So a job's row is the
chief's summary, named after the job, whose status Slurm has the last word on while it
still holds the job (a requeued job's chief says ``stopped`` while the job waits to
resume by itself).

Reading the folders (:func:`list_jobs`) is quick, for the window's thread; asking Slurm
(:func:`with_job_state`) can take seconds (a controller that is down keeps ``scontrol``
retrying), so it is a worker thread's work, bounded by :data:`STATE_TIMEOUT_S`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from ..run_folder import CREATED, PROJECT_FILE, STATUS_FILE, load_json
from ..run_history import INTERRUPTED, SUBMITTED, RunSummary, SubmittedJob, summarize
from .slurm_jobs import RUNS_DIR, SlurmJobError, chief_folder, job_of, job_state

STATE_TIMEOUT_S = 5.0
"""How long one Slurm command may take for a row: the list waits for every job in turn."""
ELSEWHERE_FILE = "elsewhere.txt"
"""In the jobs' root: the job folders the user chose outside it, one a line."""


def list_jobs(jobs_root: Path, *, scan: bool = True) -> list[RunSummary]:
    """A row for every job run in ``jobs_root``'s job folders and in those it remembers
    (:func:`remember_job`); ``scan`` as for :func:`engine.run_history.summarize`."""
    return [summarize_job(run_dir, scan=scan) for run_dir in _job_runs(jobs_root)]


def remember_job(jobs_root: Path, job_folder: Path) -> None:
    """Lists a job submitted into a folder outside ``jobs_root`` too (the user chose it)."""
    job_folder = job_folder.resolve()
    if job_folder.is_relative_to(jobs_root.resolve()) or job_folder in _elsewhere(jobs_root):
        return
    jobs_root.mkdir(parents=True, exist_ok=True)
    with (jobs_root / ELSEWHERE_FILE).open("a", encoding="utf-8") as remembered:
        remembered.write(f"{job_folder}\n")


def is_job_run(path: Path) -> bool:
    """Whether ``path`` is a submitted job's run folder (not a run folder of its own)."""
    return not (path / PROJECT_FILE).exists() and job_of(path) is not None


def summarize_job(run_dir: Path, *, scan: bool = True) -> RunSummary:
    """The job's row from its folders alone: status ``submitted`` until a task started."""
    job_id = job_of(run_dir) or run_dir.name
    name, kind = _project_name_and_kind(run_dir)
    chief = chief_folder(run_dir, kind)
    summary = summarize(chief, scan=scan, name=f"{name} (Slurm job {job_id})")
    started = summary.started_at
    if started is None:  # no task yet: the row sorts by when the job was submitted
        with contextlib.suppress(OSError):
            started = (run_dir / STATUS_FILE).stat().st_mtime
    return replace(
        summary,
        status=summary.status if (chief / STATUS_FILE).exists() else SUBMITTED,
        started_at=started,
        job=SubmittedJob(run_dir, job_id),
    )


def with_job_state(summary: RunSummary, env: Mapping[str, str] | None = None) -> RunSummary:
    """The row with Slurm's word on its job: the job's state (``PENDING``, ``RUNNING``) as
    its status while Slurm holds it, the run's own once it ended; the reason in the
    tooltip when Slurm cannot be asked."""
    job = summary.job
    if job is None:
        return summary
    try:
        state = job_state(job.job_id, env, timeout_s=STATE_TIMEOUT_S)
    except SlurmJobError as exc:
        return replace(summary, job=replace(job, held=False, note=f"Slurm not asked: {exc}"))
    said = f"Slurm job {job.job_id}: {state}"
    if not state.ended:
        # the state's word alone fits the column; the name says the job, the tooltip the reason
        return replace(summary, status=state.state, job=replace(job, held=True, note=said))
    status = summary.status
    if status == SUBMITTED:  # it ended before any task started: Slurm's word is all there is
        status, said = state.state, f"{said} before any task started"
    elif status in ("running", CREATED):  # nothing runs it any more: resumable
        status = INTERRUPTED
    return replace(summary, status=status, job=replace(job, held=False, note=said))


def _job_runs(jobs_root: Path) -> Iterator[Path]:
    """The run folders (``runs/<job id>/``) of the job folders in and named by ``jobs_root``."""
    try:
        here = sorted(path for path in jobs_root.iterdir() if path.is_dir())
    except OSError:
        here = []
    for folder in dict.fromkeys([*here, *_elsewhere(jobs_root)]):
        try:
            runs = sorted((folder / RUNS_DIR).iterdir())
        except OSError:  # a job folder sbatch refused, or one moved away since
            continue
        yield from (run for run in runs if run.is_dir() and is_job_run(run))


def _elsewhere(jobs_root: Path) -> list[Path]:
    try:
        lines = (jobs_root / ELSEWHERE_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [Path(line) for line in lines if line.strip()]


def _project_name_and_kind(run_dir: Path) -> tuple[str, str]:
    """The job's project's name and strategy, read leniently: a row is listed whatever its
    project holds (Resume reads it strictly)."""
    try:
        project = load_json(run_dir.parent.parent / PROJECT_FILE)
    except (OSError, ValueError):
        project = {}
    project = project if isinstance(project, dict) else {}
    strategy = project.get("strategy")
    kind = strategy.get("kind") if isinstance(strategy, dict) else None
    name = project.get("name")
    return (
        name.strip() if isinstance(name, str) and name.strip() else "job",
        kind if isinstance(kind, str) else "multi_worker_mirrored",
    )
