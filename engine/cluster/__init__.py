"""The launchers: a whole cluster on this machine, or its tasks on hosts (TensorFlow-free).

``distloop cluster`` and the GUI start every task of a ``multi_worker_mirrored``
or ``parameter_server`` project as its own engine process
(:class:`engine.process.EngineProcess`) with its own TF_CONFIG, so a
multi-machine program can be tried on one machine before it goes to real hosts.

Which tasks a cluster has, their TF_CONFIG, ports and folder names are
``engine.cluster_layout``'s, below the launchers here and the exports alike. One job a
module:

``supervisor``  :class:`LocalCluster`: starts, follows, merges and stops the tasks
``placement``   where each task's engine runs, the one interface the supervisor asks;
                ``local_placement``: here, in a private network (``ssh``: on hosts)
``blame``       which task a failed run names: one that died, one that stopped
                responding (its peers' errors name it), one that failed on its own
``devices``     whether a multi-worker cluster's workers run on the same devices,
                from what each task says as its strategy exists
``scheduler``   batch systems that hold jobs, found by name (``slurm_scheduler``: Slurm's,
                over ``slurm_jobs`` and ``slurm_runs``)
``top_folder``  the top level of the cluster's run folder (each task writes its own
                under ``tasks/``), which the launcher writes; it says why

A stopped, failed or killed ``multi_worker_mirrored`` run resumes with
``LocalCluster(..., resume=True)`` (``distloop cluster --resume DIR``): every task
restarts in its own folder from the chief's last checkpoint, on new ports.

Security: TensorFlow's gRPC servers are unauthenticated, and they listen on every
network interface whatever host TF_CONFIG names (TensorFlow has no setting for the
bind address). So the launcher puts all the tasks into one private network
namespace (``engine.netns``) whose only interface is its own loopback, and gives
every task a ``127.0.0.1`` address there: no port of the cluster is open on the
machine's network, nor on its loopback. Where the system does not allow that, the
tasks run in the machine's network with a warning, and their ports are open to
the network while the run lasts: run it on a trusted network or behind a firewall.
"""

from __future__ import annotations

from .supervisor import FAILURE_GRACE_S, STOP_GRACE_S, LocalCluster

__all__ = [
    "FAILURE_GRACE_S",
    "STOP_GRACE_S",
    "LocalCluster",
]
