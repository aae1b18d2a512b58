"""``k8s``: ``kubernetes.yaml``, a ConfigMap with the project, a headless Service that gives
every pod a DNS name, a NetworkPolicy that admits only the cluster's own pods, and one Job
per task with its TF_CONFIG in the pod's environment."""

from __future__ import annotations

from typing import Any

from ..cluster_layout import task_dir_name
from ..config import Project
from ..run_folder import PROJECT_FILE
from ..tf_config import TF_CONFIG_VAR, TFConfig
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

_USAGE = """\
`kubernetes.yaml` holds a ConfigMap with the project, a headless Service `{name}`
(every pod is reachable as `<type>-<index>.{name}`), a NetworkPolicy admitting only
the cluster's own pods, and one Job per task with its TF_CONFIG in the environment.
The image must have Distloop installed (`pip install distloop`).

```sh
kubectl apply -f kubernetes.yaml
kubectl logs -f job/{name}-chief-0   # or job/{name}-worker-0 when there is no chief
```

Each task's run folder is `{runs}/{name}/<type>-<index>` in its pod.
{volumes}"""


class KubernetesFormat(ClusterFormat):
    name = "k8s"
    description = "kubernetes.yaml: ConfigMap, headless Service, NetworkPolicy and one Job per task"
    pods = True

    def cluster_config(self, config: TFConfig, name: str) -> TFConfig:
        return kubernetes_tf_config(config, name)

    def cluster_files(
        self, project: Project, config: TFConfig, name: str, request: ExportRequest
    ) -> tuple[dict[str, str], str]:
        text = kubernetes_manifests(project, config, name, request.image, request.storage)
        usage = _USAGE.format(name=name, runs=RUNS_MOUNT, volumes=VOLUMES_USAGE)
        return {"kubernetes.yaml": text}, usage


def kubernetes_tf_config(config: TFConfig, name: str) -> TFConfig:
    """The same cluster with pod DNS names: ``worker-1.<name>:2222`` (the headless Service)."""
    cluster = {
        job: [f"{job}-{i}.{name}:{K8S_PORT}" for i in range(len(addresses))]
        for job, addresses in config.cluster.items()
    }
    return TFConfig(cluster=cluster, task=config.task)


def kubernetes_manifests(
    project: Project, config: TFConfig, name: str, image: str, storage: PodStorage
) -> str:
    """ConfigMap, headless Service, NetworkPolicy and one Job per task, as YAML documents.

    Each task's run folder is ``runs/<cluster>/<type>-<index>``: unique on a runs volume
    that several clusters share.
    """
    documents: list[dict[str, Any]] = [
        config_map(project, name),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "labels": labels(name)},
            "spec": {
                "clusterIP": "None",
                # Pods must resolve each other while TensorFlow starts, before any is ready.
                "publishNotReadyAddresses": True,
                "selector": {"distloop/cluster": name},
                "ports": [{"name": "grpc", "port": K8S_PORT, "targetPort": K8S_PORT}],
            },
        },
        network_policy(name),
    ]
    for task in config.tasks():
        hostname = task_dir_name(task)
        command = [
            "distloop",
            "run",
            f"{PROJECT_MOUNT}/{PROJECT_FILE}",
            "--task",
            str(task),
            "--out",
            f"{RUNS_MOUNT}/{name}/{hostname}",
        ]
        env = [{"name": TF_CONFIG_VAR, "value": task_env(config, task)}]
        documents.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"{name}-{hostname}", "labels": labels(name, task)},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"labels": labels(name, task)},
                        "spec": {
                            "hostname": hostname,
                            "subdomain": name,
                            "restartPolicy": "Never",
                            "containers": [
                                container("distloop", image, command, "grpc", env, storage)
                            ],
                            "volumes": pod_volumes(name, storage),
                        },
                    },
                },
            }
        )
    return manifest(*documents)


FORMAT = KubernetesFormat()
