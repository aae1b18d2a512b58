"""Which tasks a cluster has, and the TF_CONFIG and project each task runs with.

The same rules serve the local cluster (every task on this machine, laid out here)
and ``distloop run --task`` (one task of a cluster on real hosts), so a project is
judged the same way by the window's plan, ``distloop cluster`` and a cluster node.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Mapping

from pydantic import ValidationError

from ..config import Project
from ..problems import Problem, ProblemsError, problems_from_validation_error
from ..tf_config import (
    DEFAULT_WORKERS,
    JOB_TYPES,
    MULTI_MACHINE_STRATEGIES,
    TaskSpec,
    TFConfig,
    chief_of,
    parse_address,
    parse_task,
    strategy_problems,
    tf_config_from_env,
)
from . import ports

DEFAULT_COMMUNICATION_TIMEOUT_S = 60.0
"""Given to multi_worker_mirrored tasks whose project sets none: without it, a worker
that stalls (rather than dies) leaves its peers waiting in a collective forever."""
LOOPBACK_HOSTS = ("localhost",)
SERVER_JOBS = {"parameter_server": ("ps", "worker")}
"""Per strategy, the jobs whose tasks only serve (``tf.distribute.Server``): the chief
coordinates and trains; a cluster's run ends when its trainers are done."""


def runs_as_cluster(project: Project) -> bool:
    """True for the strategies whose tasks are separate processes (a cluster): such a
    project cannot train in one process, its one task would wait for peers that never
    come (:func:`engine.run_handle.open_run` and the window's plan ask this)."""
    return project.strategy.kind in MULTI_MACHINE_STRATEGIES


def task_dir_name(task: TaskSpec) -> str:
    """``worker-1``: a task's folder under ``tasks/`` (no colon, for every file system)."""
    return f"{task.type}-{task.index}"


def serves_only(strategy_kind: str, task: TaskSpec) -> bool:
    """True for the tasks that serve variables or steps rather than run the loop."""
    return task.type in SERVER_JOBS.get(strategy_kind, ())


def run_problems(config: TFConfig, strategy_kind: str) -> list[Problem]:
    """What stops this TF_CONFIG from running under Distloop with this strategy."""
    problems = strategy_problems(config, strategy_kind)
    if "evaluator" in config.cluster:
        problems.append(
            Problem(
                ("tf_config", "cluster", "evaluator"),
                "Distloop's loops only train; no task would run an evaluator: remove the job",
            )
        )
    return problems


def _raise_if(problems: list[Problem], what: str) -> None:
    if problems:
        raise ProblemsError(problems, what)


def _is_loopback(address: str) -> bool:
    host, _ = parse_address(address)
    if host in LOOPBACK_HOSTS:
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def local_cluster_config(
    project: Project, workers: int | None = None, *, fresh_ports: bool = False
) -> TFConfig:
    """The cluster to start here: the project's jobs (or ``workers`` workers), on 127.0.0.1.

    The project's own addresses are kept when they are all loopback ones (unless
    ``fresh_ports``); any other host gets replaced by a free local port, so a project
    written for real hosts runs unchanged on this machine. The returned config's
    task is the chief's. Binds a socket per chosen port: call it when the cluster starts.
    """
    return _local_layout(project, workers, fresh_ports, ports.free_local_ports)


def local_cluster_tasks(project: Project, workers: int | None = None) -> list[TaskSpec]:
    """The tasks :func:`local_cluster_config` would lay out, without choosing their ports.

    For showing the plan while a project is edited: the same rule and the same
    ProblemsError, but no socket is bound; the ports are chosen when the cluster starts.
    Stand-in ports (1, 2, ...) only make the layout checkable; nothing listens on them.
    """
    return _local_layout(project, workers, False, lambda count: list(range(1, count + 1))).tasks()


def _local_layout(
    project: Project,
    workers: int | None,
    fresh_ports: bool,
    choose_ports: Callable[[int], list[int]],
) -> TFConfig:
    kind = project.strategy.kind
    if kind not in MULTI_MACHINE_STRATEGIES:
        raise ProblemsError(
            [
                Problem(
                    ("strategy", "kind"),
                    f"a cluster runs {' or '.join(MULTI_MACHINE_STRATEGIES)}, not {kind}",
                )
            ],
            "project",
        )
    given = project.tf_config
    if (
        given is not None
        and workers is None
        and not fresh_ports
        and all(_is_loopback(a) for addresses in given.cluster.values() for a in addresses)
    ):
        cluster = given.cluster
    else:
        sizes = {job: len(addresses) for job, addresses in (given.cluster if given else {}).items()}
        sizes["worker"] = workers or sizes.get("worker") or DEFAULT_WORKERS
        chosen = iter(choose_ports(sum(sizes.values())))
        cluster = {
            job: [f"127.0.0.1:{next(chosen)}" for _ in range(sizes[job])]
            for job in JOB_TYPES
            if job in sizes
        }
    config = _validated(cluster, chief_of(cluster), "cluster")
    _raise_if(run_problems(config, kind), "cluster")
    return config


def _validated(cluster: dict[str, list[str]], task: TaskSpec, what: str) -> TFConfig:
    try:
        return TFConfig.model_validate({"cluster": cluster, "task": task.model_dump()})
    except ValidationError as exc:
        raise ProblemsError(problems_from_validation_error(exc, ("tf_config",)), what) from None


def task_project(project: Project, config: TFConfig, task: TaskSpec) -> Project:
    """The project one task of a local cluster runs: its own TF_CONFIG, and a collective
    timeout (:data:`DEFAULT_COMMUNICATION_TIMEOUT_S`) where a multi-worker project sets none."""
    strategy = project.strategy
    if strategy.kind == "multi_worker_mirrored" and strategy.communication_timeout_s is None:
        strategy = strategy.model_copy(
            update={"communication_timeout_s": DEFAULT_COMMUNICATION_TIMEOUT_S}
        )
    return project.model_copy(
        update={"strategy": strategy, "tf_config": config.for_task(task.type, task.index)}
    )


def tf_config_for_run(
    project: Project, task: str | None, environ: Mapping[str, str] | None = None
) -> TFConfig | None:
    """The TF_CONFIG ``distloop run`` gives its engine, for one task of a real cluster.

    A TF_CONFIG in the environment (set by Kubeflow's TFJob or a launch script)
    wins over the project's; ``task`` (``worker:1``) then picks this process's
    task in that cluster. Strategies that need no cluster ignore the environment.
    """
    kind = project.strategy.kind
    if kind not in MULTI_MACHINE_STRATEGIES:
        if task is not None:
            raise ProblemsError(
                [
                    Problem(
                        ("strategy", "kind"), f"--task needs a multi-machine strategy, not {kind}"
                    )
                ],
                "--task",
            )
        return project.tf_config
    config = tf_config_from_env(environ) or project.tf_config
    if task is not None:
        if config is None:
            raise ProblemsError(
                [
                    Problem(
                        ("tf_config",),
                        "--task needs a cluster: set the project's tf_config, or TF_CONFIG "
                        "in the environment",
                    )
                ],
                "--task",
            )
        try:
            spec = parse_task(task)
        except ValueError as exc:
            raise ProblemsError([Problem((), str(exc))], "--task") from None
        config = _validated(config.cluster, spec, "--task")
    if config is not None:
        _raise_if(run_problems(config, kind), "TF_CONFIG")
    return config
