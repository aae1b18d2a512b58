"""Which engine a run gets, and the live state of a local cluster's tasks.

A ``multi_worker_mirrored`` or ``parameter_server`` project cannot train in one
process: its one task would wait for peers that never come. So Run starts such a
project as a :class:`engine.cluster.LocalCluster` (every task its own engine
process on this machine, on free ``127.0.0.1`` ports), which the run controller
drives exactly like one engine, because the cluster's merged stream reads like
one run's. :meth:`ClusterController.make_engine` is the run controller's engine
factory and makes that choice; while a cluster runs, the controller reads its
tasks a few times a second (cheap attribute reads, safe beside the poll running
in the executor) for the cluster panel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, Signal

from ..engine.cluster import LocalCluster, TaskInfo, local_cluster_tasks
from ..engine.config import Project
from ..engine.problems import Problem, ProblemsError
from ..engine.process import EngineProcess
from ..engine.tf_config import MULTI_MACHINE_STRATEGIES
from .run_controller import Engine, EngineFactory, ResumeFactory

REFRESH_MS = 250


class Cluster(Engine, Protocol):
    """What the GUI needs of a cluster: an engine that also lists its tasks."""

    def tasks(self) -> list[TaskInfo]: ...


class ClusterFactory(Protocol):
    """Lays out a local cluster in ``run_dir``; ``resume`` continues the one there."""

    def __call__(self, project: Project, run_dir: Path, *, resume: bool = False) -> Cluster: ...


def runs_as_cluster(project: Project) -> bool:
    """True for the strategies whose tasks are separate processes (a cluster)."""
    return project.strategy.kind in MULTI_MACHINE_STRATEGIES


@dataclass(frozen=True)
class ClusterPlan:
    """The tasks Run would start here, or why the project cannot run as a local cluster."""

    tasks: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def runnable(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """The status bar's words, like :meth:`gui.validation.Validation.summary`."""
        if self.problems:
            count = len(self.problems)
            return f"Cannot run as a local cluster: {count} problem{'s' if count != 1 else ''}"
        return f"Ready to run a local cluster: {', '.join(self.tasks)}"

    def describe(self) -> str:
        """One sentence for the Run button's tooltip and the status bar."""
        if self.problems:
            listed = "; ".join(str(problem) for problem in self.problems)
            return f"Cannot run as a local cluster: {listed}"
        return (
            f"Run starts a local cluster: {', '.join(self.tasks)}, each its own engine process "
            "on a free 127.0.0.1 port of this machine, chosen when it starts (Ctrl+R). To run "
            "one task of a real cluster, use File ▸ Export Cluster Setup or distloop run --task."
        )


def cluster_plan(project: Project | None) -> ClusterPlan | None:
    """None when ``project`` runs as one process; else the local cluster Run would start.

    The layout comes from the engine's own rule (:func:`local_cluster_tasks`), so a
    TF_CONFIG the launcher would refuse (an evaluator job) disables Run with the
    launcher's reason instead of failing after it was pressed. It runs on every edit,
    so it chooses no ports (that binds sockets): the cluster chooses them when it starts.
    """
    if project is None or not runs_as_cluster(project):
        return None
    try:
        tasks = local_cluster_tasks(project)
    except ProblemsError as exc:
        return ClusterPlan(problems=exc.problems)
    return ClusterPlan(tasks=[str(task) for task in tasks])


class ClusterController(QObject):
    """Builds each run's engine (a cluster when the strategy needs one) and follows its tasks."""

    cluster_started = Signal(object)  # list[TaskInfo]: a cluster run was created
    tasks_changed = Signal(object)  # list[TaskInfo]: the tasks' latest state

    def __init__(
        self,
        engine_factory: EngineFactory = EngineProcess,
        cluster_factory: ClusterFactory = LocalCluster,
        *,
        resume_factory: ResumeFactory = EngineProcess,
        refresh_ms: int = REFRESH_MS,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._engine_factory = engine_factory
        self._cluster_factory = cluster_factory
        self._resume_factory = resume_factory
        self._cluster: Cluster | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(refresh_ms)
        self._timer.timeout.connect(self.refresh)

    @property
    def cluster(self) -> Cluster | None:
        """The running cluster, or the last one (its tasks show how each ended)."""
        return self._cluster

    def make_engine(self, project: Project, run_dir: Path) -> Engine:
        """The run controller's engine factory: one engine process, or a local cluster."""
        if not runs_as_cluster(project):
            return self._engine_factory(project, run_dir)
        return self._follow(self._cluster_factory(project, run_dir))

    def make_resumed_engine(self, project: Project, run_dir: Path, *, resume: bool) -> Engine:
        """The run controller's resume factory: a cluster run resumes as the cluster it was.

        Its tasks continue in their folders under ``run_dir/tasks``, each from the
        chief's last checkpoint, as ``distloop cluster --resume`` does.
        """
        if not runs_as_cluster(project):
            return self._resume_factory(project, run_dir, resume=resume)
        return self._follow(self._cluster_factory(project, run_dir, resume=resume))

    def _follow(self, cluster: Cluster) -> Cluster:
        self._cluster = cluster
        self.cluster_started.emit(cluster.tasks())
        self._timer.start()
        return cluster

    def refresh(self) -> None:
        """Publishes the tasks' state; the first refresh after the cluster ended is the last."""
        cluster = self._cluster
        if cluster is None:
            return
        self.tasks_changed.emit(cluster.tasks())
        if cluster.done:
            self._timer.stop()
