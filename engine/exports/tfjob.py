"""``tfjob``: ``tfjob.yaml``, a Kubeflow ``TFJob`` (``kubeflow.org/v1``, Trainer v1) with
Chief, Worker and PS replica specs; the training operator sets TF_CONFIG itself."""

from __future__ import annotations

from ..config import Project
from ..run_folder import PROJECT_FILE
from ..tf_config import JOB_TYPES, TFConfig
from .base import ExportRequest, PodStorage
from .cluster_format import ClusterFormat
from .pods import (
    POD_NAME_VAR,
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

_REPLICAS = {"chief": "Chief", "worker": "Worker", "ps": "PS"}
_USAGE = """\
`tfjob.yaml` holds a ConfigMap with the project, a NetworkPolicy admitting only the
cluster's own pods, and a Kubeflow `TFJob` `{name}` (needs the Kubeflow training
operator). The operator sets each pod's TF_CONFIG itself, from the replica counts;
its addresses are not the ones in `project.json`.

```sh
kubectl apply -f tfjob.yaml
kubectl get tfjob {name}
```

Each pod's run folder is `{runs}/<pod name>` (`{name}-worker-0`, ...).
{volumes}"""


class TFJobFormat(ClusterFormat):
    name = "tfjob"
    description = (
        "tfjob.yaml: a Kubeflow TFJob (kubeflow.org/v1); Trainer v1's operator sets TF_CONFIG. "
        "Choose trainjob for Kubeflow Trainer v2"
    )
    pods = True

    def cluster_files(
        self, project: Project, config: TFConfig, name: str, request: ExportRequest
    ) -> tuple[dict[str, str], str]:
        text = tfjob_manifest(project, config, name, request.image, request.storage)
        usage = _USAGE.format(name=name, runs=RUNS_MOUNT, volumes=VOLUMES_USAGE)
        return {"tfjob.yaml": text}, usage


def tfjob_manifest(
    project: Project, config: TFConfig, name: str, image: str, storage: PodStorage
) -> str:
    """A Kubeflow TFJob; the training operator gives each pod its TF_CONFIG.

    Every replica runs the same command, so each names its run folder after its pod
    (``<name>-worker-1``; Kubernetes expands ``$(VAR)`` in a command): on a shared runs
    volume, replicas never write into one folder.
    """
    run_dir = f"{RUNS_MOUNT}/$({POD_NAME_VAR})"
    command = ["distloop", "run", f"{PROJECT_MOUNT}/{PROJECT_FILE}", "--out", run_dir]
    pod_name = {"name": POD_NAME_VAR, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    replica_specs = {}
    for job in JOB_TYPES:
        if job not in config.cluster:
            continue
        replica_specs[_REPLICAS[job]] = {
            "replicas": len(config.cluster[job]),
            "restartPolicy": "Never",
            "template": {
                "metadata": {"labels": labels(name)},
                "spec": {
                    # TFJob finds the training container by this name and port name.
                    "containers": [
                        container("tensorflow", image, command, "tfjob-port", [pod_name], storage)
                    ],
                    "volumes": pod_volumes(name, storage),
                },
            },
        }
    tfjob = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "labels": labels(name)},
        "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": replica_specs},
    }
    return manifest(config_map(project, name), network_policy(name), tfjob)


FORMAT = TFJobFormat()
