"""Whether Run starts a local cluster, and the tasks it would start, shown while editing.

A ``multi_worker_mirrored`` or ``parameter_server`` project cannot train in one
process: its one task would wait for peers that never come. So Run starts such a
project as a local cluster (the choice is :func:`engine.run_handle.open_run`'s,
the same as ``distloop``'s); this module says so in the window's words before Run
is pressed, and disables Run with the launcher's reason when the cluster cannot be
laid out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine.cluster import local_cluster_tasks
from ..engine.config import Project
from ..engine.problems import Problem, ProblemsError
from ..engine.run_handle import runs_as_cluster


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
