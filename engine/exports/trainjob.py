"""``trainjob``: ``trainjob.yaml``, a Kubeflow Trainer v2 ``TrainJob`` and the
``TrainingRuntime`` it runs (``trainer.kubeflow.org/v1alpha1``), for clusters where TFJob
is gone (Trainer v2 has no TensorFlow runtime that sets TF_CONFIG).

Trainer v2 runs a TrainJob as a JobSet: one Indexed Job (``node``) whose pods are the
ranks 0..N-1, reachable as ``<name>-node-0-<rank>.<name>`` through the JobSet's headless
Service. Every pod has one template, so the TF_CONFIG cannot sit in its environment:
the ConfigMap holds each task's TF_CONFIG, and the container's entry (a few lines of
``sh``) takes its rank from the Job's completion index (the downward API, as Trainer's
own JAX runtime reads it), picks the task of that rank (the cluster's tasks in order:
chief, workers, parameter servers), and runs ``distloop run`` with that task's TF_CONFIG.
"""

from __future__ import annotations

import shlex
from typing import Any

from ..cluster_layout import task_dir_name
from ..config import Project
from ..run_folder import PROJECT_FILE
from ..tf_config import TFConfig
from .base import ExportRequest, PodStorage
from .cluster_format import ClusterFormat, task_env
from .pods import (
    K8S_PORT,
    PROJECT_MOUNT,
    VOLUMES_USAGE,
    config_map,
    container,
    labels,
    manifest,
    network_policy,
    pod_volumes,
)
from .storage import RUNS_MOUNT

API_VERSION = "trainer.kubeflow.org/v1alpha1"
NODE = "node"
"""The replicated job, and its container, that Trainer counts as the training nodes."""
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
RANK_VAR = "DISTLOOP_RANK"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
"""Where an Indexed Job's pod finds its index (Trainer's JAX runtime reads it there too)."""

_USAGE = """\
`trainjob.yaml` holds a ConfigMap with the project and every task's TF_CONFIG, a
NetworkPolicy admitting only the cluster's own pods, a `TrainingRuntime` `{name}` and
a `TrainJob` `{name}` that runs it (`trainer.kubeflow.org/v1alpha1`: Kubeflow Trainer
v2; for the training operator of Trainer v1 export `tfjob`). Its {count} pods are the
ranks 0 to {last}, `{name}-node-0-<rank>.{name}`; each takes the TF_CONFIG of its rank's
task ({ranks}). The image must have Distloop installed (`pip install distloop`).

```sh
kubectl apply -f trainjob.yaml
kubectl get trainjob {name}
# rank 0: the chief (worker 0 when there is no chief)
kubectl logs -f -l jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=0
```

Each task's run folder is `{runs}/{name}/<type>-<index>` in its pod.
{volumes}"""


class TrainJobFormat(ClusterFormat):
    name = "trainjob"
    description = (
        "trainjob.yaml: a Kubeflow Trainer v2 TrainJob and its TrainingRuntime "
        "(trainer.kubeflow.org/v1alpha1); each pod takes its rank's TF_CONFIG. "
        "Choose tfjob for clusters still on Trainer v1"
    )
    pods = True

    def cluster_config(self, config: TFConfig, name: str) -> TFConfig:
        """The cluster at the pods' JobSet names: rank ``r`` is the ``r``-th task."""
        cluster: dict[str, list[str]] = {}
        for rank, task in enumerate(config.tasks()):
            address = f"{name}-{NODE}-0-{rank}.{name}:{K8S_PORT}"
            cluster.setdefault(task.type, []).append(address)
        return TFConfig(cluster=cluster, task=config.task)

    def cluster_files(
        self, project: Project, config: TFConfig, name: str, request: ExportRequest
    ) -> tuple[dict[str, str], str]:
        text = trainjob_manifest(project, config, name, request.image, request.storage)
        ranks = [task_dir_name(task) for task in config.tasks()]
        usage = _USAGE.format(
            name=name,
            count=len(ranks),
            last=len(ranks) - 1,
            ranks=", ".join(f"{rank}: `{task}`" for rank, task in enumerate(ranks)),
            runs=RUNS_MOUNT,
            volumes=VOLUMES_USAGE,
        )
        return {"trainjob.yaml": text}, usage


def tf_config_key(task: str) -> str:
    """The ConfigMap key of a task's TF_CONFIG (``tf-config-worker-1.json``)."""
    return f"tf-config-{task}.json"


def rank_entry(name: str, tasks: list[str]) -> str:
    """The container's ``sh`` entry: its rank's task, that task's TF_CONFIG, then Distloop.

    Too few or too many pods for the cluster stops at ``shift`` (``set -e``), never
    running a task twice.
    """
    return "\n".join(
        [
            "set -eu",
            f"set -- {' '.join(shlex.quote(task) for task in tasks)}",
            f'shift "${RANK_VAR}"',
            f'TF_CONFIG="$(cat "{PROJECT_MOUNT}/{tf_config_key("$1")}")"',
            "export TF_CONFIG",
            f'exec distloop run {PROJECT_MOUNT}/{PROJECT_FILE} --out "{RUNS_MOUNT}/{name}/$1"',
        ]
    )


def trainjob_manifest(
    project: Project, config: TFConfig, name: str, image: str, storage: PodStorage
) -> str:
    """ConfigMap, NetworkPolicy, TrainingRuntime and TrainJob, as YAML documents."""
    tasks = config.tasks()
    names = [task_dir_name(task) for task in tasks]
    tf_configs = {
        tf_config_key(task_name): task_env(config, task) + "\n"
        for task_name, task in zip(names, tasks, strict=True)
    }
    rank = {"name": RANK_VAR, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}
    command = ["sh", "-c", rank_entry(name, names)]
    pod: dict[str, Any] = {
        "metadata": {"labels": labels(name)},
        "spec": {
            "restartPolicy": "Never",
            "containers": [container(NODE, image, command, "grpc", [rank], storage)],
            "volumes": pod_volumes(name, storage),
        },
    }
    runtime = {
        "apiVersion": API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "labels": labels(name)},
        "spec": {
            "mlPolicy": {"numNodes": len(tasks)},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": NODE,
                            "replicas": 1,
                            "template": {
                                "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                                "spec": {
                                    "completionMode": "Indexed",
                                    "backoffLimit": 0,
                                    "template": pod,
                                },
                            },
                        }
                    ]
                }
            },
        },
    }
    trainjob = {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": labels(name)},
        "spec": {
            "runtimeRef": {
                "apiGroup": API_VERSION.split("/")[0],
                "kind": "TrainingRuntime",
                "name": name,
            },
            "trainer": {"numNodes": len(tasks)},
        },
    }
    return manifest(config_map(project, name, tf_configs), network_policy(name), runtime, trainjob)


FORMAT = TrainJobFormat()
