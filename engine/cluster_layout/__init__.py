"""A cluster's layout, as numbers and names: which tasks it has, the TF_CONFIG and project
each runs with, its ports, its task folders' names (TensorFlow-free, no processes).

Below both users of it: the launchers (``engine.cluster``: the local cluster, SSH, Slurm)
start tasks laid out here, and the exports (``engine.exports``) write the same layout into
scripts, manifests and job files, so an exported cluster and a launched one agree.

``plan``   which tasks a cluster has, each task's TF_CONFIG and project (also
           ``distloop run --task``'s TF_CONFIG, for a cluster on real hosts), and which
           projects run as a cluster at all
``ports``  free 127.0.0.1 ports, chosen when a local cluster starts, never before
``slurm``  a task's TF_CONFIG computed from the variables ``srun`` sets
           (``distloop run --task-from slurm``)
"""

from __future__ import annotations

from .plan import (
    DEFAULT_COMMUNICATION_TIMEOUT_S,
    local_cluster_config,
    local_cluster_tasks,
    run_problems,
    runs_as_cluster,
    serves_only,
    task_dir_name,
    task_project,
    tf_config_for_run,
)

__all__ = [
    "DEFAULT_COMMUNICATION_TIMEOUT_S",
    "local_cluster_config",
    "local_cluster_tasks",
    "run_problems",
    "runs_as_cluster",
    "serves_only",
    "task_dir_name",
    "task_project",
    "tf_config_for_run",
]
