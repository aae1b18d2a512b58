"""Whether a run may continue, and as what, decided once for every way to resume (TF-free).

``distloop run/cluster/launch --resume``, a requeued Slurm task, a local cluster and the
window's Resume all ask this module. A run folder says by itself how its run was laid
out (one engine, a local cluster with ``tasks/``, a launch over SSH with its settings in
``status.json``), so each command can name the one that continues it instead of
guessing, and a strategy that cannot resume is refused with the same words everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .config import Project
from .config.launch import LaunchSettings
from .problems import Problem, ProblemsError, problems_from_validation_error
from .project_file import load_project
from .run_folder import (
    FINDER_FILE,
    PROJECT_FILE,
    STATUS_FILE,
    TASKS_DIR,
    RunFolderError,
    read_status,
    refuse_links,
)
from .run_history import INTERRUPTED
from .tf_config import MULTI_MACHINE_STRATEGIES, NO_RESUME

RESUMABLE_STATUSES = ("stopped", "failed", INTERRUPTED)
"""The statuses a run continues from (its last checkpoint); a finished run is done."""


class Layout(StrEnum):
    """How a run ran, named by the command that continues it."""

    RUN = "run"
    """One engine process: a single-process run, or one task of a cluster whose other
    tasks ran elsewhere (each resumes where it ran)."""
    CLUSTER = "cluster"
    """Every task a process on this machine, each in its folder under ``tasks/``."""
    LAUNCH = "launch"
    """Every task on its host over SSH; ``status.json`` keeps the launch's settings."""


@dataclass(frozen=True)
class ResumableRun:
    """A run folder that can continue: its project, and how it ran."""

    run_dir: Path
    project: Project
    layout: Layout
    launch: LaunchSettings | None = None
    """A launch's SSH settings (``engine.cluster.ssh.SshLaunch.settings``), checked."""

    @property
    def command(self) -> str:
        """What continues it from a terminal."""
        return f"distloop {self.layout} --resume {self.run_dir}"

    @property
    def described(self) -> str:
        """How it ran, in words."""
        return _DESCRIBED[self.layout]


_DESCRIBED = {
    Layout.RUN: "the run of one engine process",
    Layout.CLUSTER: "a local cluster's run",
    Layout.LAUNCH: "a run launched on its hosts over SSH",
}


def layout_of(run_dir: Path) -> Layout:
    """How the run in ``run_dir`` ran, from what its folder holds."""
    if _launch_settings(run_dir) is not None:
        return Layout.LAUNCH
    return Layout.CLUSTER if (run_dir / TASKS_DIR).is_dir() else Layout.RUN


def _launch_settings(run_dir: Path) -> dict[str, Any] | None:
    try:
        settings = read_status(run_dir).get("launch")
    except (OSError, ValueError):  # no status yet, or a damaged one: no launch to redo
        return None
    return settings if isinstance(settings, dict) else None


def resumable_run(run_dir: Path) -> ResumableRun:
    """The run in ``run_dir`` as it would continue.

    Raises RunFolderError when ``run_dir`` is not a run folder or holds a link (its
    ``project.json`` is read before anything is locked, and a ``project.json ->
    /dev/zero`` would never end), ProblemsError when its project is unreadable.
    """
    if not (run_dir / PROJECT_FILE).is_file():
        raise RunFolderError(f"{run_dir} is not a run folder (it has no {PROJECT_FILE})")
    refuse_links(run_dir)
    if (run_dir / FINDER_FILE).exists():
        raise RunFolderError(
            f"{run_dir} is a finder's trial run (it has {FINDER_FILE}), not a training run: "
            "there is nothing to resume"
        )
    project = load_project(run_dir / PROJECT_FILE)
    settings = _launch_settings(run_dir)
    launch = None if settings is None else checked_launch_settings(run_dir, settings)
    return ResumableRun(run_dir, project, layout_of(run_dir), launch)


def checked_launch_settings(run_dir: Path, settings: dict[str, Any]) -> LaunchSettings:
    """A launch's settings from its folder's ``status.json``, checked as strictly as the
    project's ``launch`` section (a crafted folder may name ``../../elsewhere`` as its
    run, or a command line that rewrites the terminal); RunFolderError, one line, when
    they are not."""
    try:
        return LaunchSettings.model_validate(settings)
    except ValidationError as exc:
        problem = problems_from_validation_error(exc, ("launch",), LaunchSettings)[0]
        raise RunFolderError(
            f"{run_dir / STATUS_FILE} cannot be used: {problem}; a launch writes none such"
        ) from None


def refuse_strategy(project: Project) -> None:
    """Raises ProblemsError when ``project``'s strategy keeps nothing to resume from (a
    cluster's launcher, a requeued Slurm task)."""
    refusal = NO_RESUME.get(project.strategy.kind)
    if refusal is not None:
        raise ProblemsError([Problem(("strategy", "kind"), refusal)], "resume")


def command_refusal(run: ResumableRun, layout: Layout) -> str | None:
    """Why ``distloop {layout} --resume`` cannot continue ``run``; None when it can."""
    refusal = NO_RESUME.get(run.project.strategy.kind)
    if refusal is not None:
        return refusal
    if run.layout is layout:
        return None
    return f"{run.run_dir} holds {run.described}: use {run.command}"


def window_refusal(run: ResumableRun) -> str | None:
    """Why the window cannot continue ``run``; None when it can.

    A local cluster's run resumes as that cluster, a launch's on its hosts; the folder
    of one task of a cluster that ran on several machines cannot, since its peers are
    elsewhere.
    """
    kind = run.project.strategy.kind
    if kind in NO_RESUME:
        return NO_RESUME[kind]
    if kind in MULTI_MACHINE_STRATEGIES and run.layout is Layout.RUN:
        return (
            f"this folder holds one task of a {kind} cluster that ran elsewhere (it has no "
            f"{TASKS_DIR}/ folder); resume every task where it ran, with "
            "`distloop run --resume <its folder>`."
        )
    return None
