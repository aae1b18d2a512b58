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

from ..cluster_layout import runs_as_cluster
from ..cluster_layout.plan import local_cluster_tasks, run_problems
from ..config import Project, SshHost
from ..problems import Problem, ProblemsError
from ..tf_config import parse_address
from .preflight import is_loopback


@dataclass(frozen=True)
class ClusterPlan:
    """The tasks Run would start here, or why the project cannot run as a local cluster."""

    tasks: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def runnable(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """The status bar's words, like :meth:`engine.validation.Validation.summary`."""
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


@dataclass(frozen=True)
class HostsPlan:
    """The hosts Run on Hosts would start the tasks on, or why it does not apply."""

    hosts: dict[str, list[str]] = field(default_factory=dict)
    """Each TF_CONFIG host (as its addresses name it) and its tasks, in TF_CONFIG's order."""
    ways_in: dict[str, SshHost] = field(default_factory=dict)
    """The project's ``launch.hosts``: how ssh reaches a host when not by its name."""
    refusal: str = ""
    """Why the project cannot run on hosts; empty when it can."""

    @property
    def runnable(self) -> bool:
        return not self.refusal


def hosts_plan(project: Project | None) -> HostsPlan:
    """Whether the project's TF_CONFIG names other machines to run its tasks on, over SSH.

    A cluster on this machine alone (``localhost`` everywhere) is Run Cluster's: its
    tasks would reach each other on loopback anyway, and need no ssh.
    """
    if project is None:
        return HostsPlan(refusal="the project has problems: fix them first")
    if not runs_as_cluster(project):
        return HostsPlan(
            refusal=f"strategy {project.strategy.kind} runs in one process: choose "
            "multi_worker_mirrored or parameter_server to run on several machines"
        )
    config = project.tf_config
    if config is None:
        return HostsPlan(
            refusal="TF_CONFIG is off: list the hosts in the TF_CONFIG tab (host:port per task)"
        )
    hosts: dict[str, list[str]] = {}
    for task in config.tasks():
        hosts.setdefault(parse_address(config.address(task))[0], []).append(str(task))
    ways_in = dict(project.launch.hosts) if project.launch else {}
    problems = run_problems(config, project.strategy.kind)
    if problems:
        return HostsPlan(hosts, ways_in, "; ".join(str(problem) for problem in problems))
    if all(is_loopback(host) for host in hosts):
        return HostsPlan(
            hosts,
            ways_in,
            "TF_CONFIG names only this machine (localhost): Run Cluster runs it here",
        )
    return HostsPlan(hosts, ways_in)
