"""Slurm as a scheduler (``engine.cluster.scheduler``): the CLI's and the window's way to
Slurm's jobs, made of what ``slurm_jobs`` (submit, follow, signal) and ``slurm_runs`` (the
Runs list's rows) do."""

from __future__ import annotations

from pathlib import Path

from ..config import Project
from ..exports.slurm import SlurmJob
from ..run_history import RunSummary, slurm_jobs_root
from . import slurm_jobs, slurm_runs
from .slurm_jobs import JobState, SlurmRun


class Slurm:
    """Jobs submitted with ``sbatch``, asked about with ``scontrol``/``sacct``, cancelled
    and signalled with ``scancel``; each job's folder on the file system every node shares."""

    name = "slurm"
    title = "Slurm"

    def submit(
        self, project: Project, job_folder: Path, shape: SlurmJob, *, base_dir: Path | None = None
    ) -> SlurmRun:
        return slurm_jobs.submit_job(project, job_folder, shape, base_dir=base_dir)

    def resubmit(self, run_dir: Path) -> SlurmRun:
        return slurm_jobs.resubmit_job(run_dir)

    def follow(self, run_dir: Path) -> SlurmRun:
        return slurm_jobs.follow_job(run_dir)

    def job_of(self, run_dir: Path) -> str | None:
        return slurm_jobs.job_of(run_dir)

    def state(self, job_id: str, *, timeout_s: float) -> JobState:
        return slurm_jobs.job_state(job_id, timeout_s=timeout_s)

    def cancel(self, job_id: str) -> None:
        slurm_jobs.cancel_job(job_id)

    def dump_stacks(self, run_dir: Path, job_id: str) -> list[str]:
        return slurm_jobs.dump_job_stacks(run_dir, job_id)

    def project_of(self, run_dir: Path) -> Project:
        return slurm_jobs.job_project(run_dir)

    def jobs_root(self, runs_root: Path) -> Path:
        return slurm_jobs_root(runs_root)

    def list_jobs(self, runs_root: Path, *, scan: bool = True) -> list[RunSummary]:
        return slurm_runs.list_jobs(slurm_jobs_root(runs_root), scan=scan)

    def summarize(self, run_dir: Path, *, scan: bool = True) -> RunSummary:
        return slurm_runs.summarize_job(run_dir, scan=scan)

    def with_state(self, summary: RunSummary) -> RunSummary:
        return slurm_runs.with_job_state(summary)

    def remember(self, runs_root: Path, run_dir: Path) -> None:
        """The job's folder (``JOB_FOLDER/runs/<job id>/``'s ``JOB_FOLDER``) is listed."""
        slurm_runs.remember_job(slurm_jobs_root(runs_root), run_dir.parent.parent)


SCHEDULER = Slurm()
