"""What the Kubernetes formats share: the image their pods run, the project's ConfigMap,
the NetworkPolicy, each pod's volumes and container, and the YAML they are written in.

Every pod reads ``project.json`` from a ConfigMap mounted read-only at
:data:`PROJECT_MOUNT`, keeps its run folders on the runs volume (an ``emptyDir``
without one: lost with the pod) and reads the project's files from the data volume
(both PersistentVolumeClaims, ``engine.exports.storage``). YAML is PyYAML's safe emitter;
every value is a string, number or mapping the emitter quotes as needed, so none changes
type.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ..cluster_layout import task_dir_name
from ..config import Project
from ..run_folder import PROJECT_FILE
from ..tf_config import TaskSpec
from .base import SECURITY_NOTE, PodStorage, comment_lines
from .storage import DATA_MOUNT, RUNS_MOUNT

DEFAULT_IMAGE = "distloop:latest"
K8S_PORT = 2222
"""The port every pod serves on: TFJob's default, kept for the plain manifests too."""
PROJECT_MOUNT = "/etc/distloop"
POD_NAME_VAR = "DISTLOOP_POD_NAME"
"""A TFJob pod's own name (downward API): its run folder's name on a shared runs volume."""
_DOMAIN_PART = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_PATH_PART = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    re.ASCII,
)
"""A container image reference, as Docker's distribution/reference grammar has it (less
IPv6 registries): ``[registry[:port]/]path[:tag][@digest]``."""
_MAX_IMAGE_LENGTH = 512


def valid_image(image: str) -> bool:
    """Whether ``image`` is a container image reference a pod spec can name."""
    return len(image) <= _MAX_IMAGE_LENGTH and _IMAGE.fullmatch(image) is not None


def labels(name: str, task: TaskSpec | None = None) -> dict[str, str]:
    """The labels of every object of the cluster ``name`` (and of ``task``'s pod)."""
    found = {"app.kubernetes.io/name": "distloop", "distloop/cluster": name}
    if task is not None:
        found["distloop/task"] = task_dir_name(task)
    return found


def pod_volumes(name: str, storage: PodStorage) -> list[dict[str, Any]]:
    """A pod's volumes: the project's ConfigMap, the runs volume and the data volume."""
    runs: dict[str, Any] = (
        {"persistentVolumeClaim": {"claimName": storage.runs_volume}}
        if storage.runs_volume
        else {"emptyDir": {}}
    )
    volumes = [
        {"name": "project", "configMap": {"name": f"{name}-project"}},
        {"name": "runs", **runs},
    ]
    if storage.data_volume:
        volumes.append(
            {
                "name": "data",
                "persistentVolumeClaim": {"claimName": storage.data_volume, "readOnly": True},
            }
        )
    return volumes


def config_map(project: Project, name: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    """The ConfigMap the pods read ``project.json`` (and ``extra``'s files) from."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-project", "labels": labels(name)},
        "data": {PROJECT_FILE: project.to_json(), **(extra or {})},
    }


def network_policy(name: str) -> dict[str, Any]:
    """Admits only the cluster's own pods: the gRPC servers have no authentication."""
    match = {"distloop/cluster": name}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "labels": labels(name)},
        "spec": {
            # Copies: one mapping twice in a document would be a YAML anchor and alias.
            "podSelector": {"matchLabels": dict(match)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(match)}}]}],
        },
    }


def container(
    name: str,
    image: str,
    command: list[str],
    port_name: str,
    env: list[dict[str, Any]],
    storage: PodStorage,
) -> dict[str, Any]:
    """The training container: the project, runs and data mounts, the gRPC port."""
    mounts = [
        {"name": "project", "mountPath": PROJECT_MOUNT, "readOnly": True},
        {"name": "runs", "mountPath": RUNS_MOUNT},
    ]
    if storage.data_volume:
        mounts.append({"name": "data", "mountPath": DATA_MOUNT, "readOnly": True})
    found: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": command,
        "ports": [{"name": port_name, "containerPort": K8S_PORT}],
        "volumeMounts": mounts,
    }
    if env:
        found["env"] = env
    return found


def manifest(*documents: dict[str, Any]) -> str:
    """The documents as one YAML file, under a header with the security note."""
    header = "\n".join(
        [
            "# Generated by distloop export.",
            *comment_lines(SECURITY_NOTE, "# "),
            "",
        ]
    )
    return header + to_yaml(*documents)


class _ManifestDumper(yaml.SafeDumper):
    """PyYAML's safe emitter, with multi-line strings (the project's JSON in the
    ConfigMap) as literal blocks, so the manifest reads like the file it holds."""


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # PyYAML falls back to a quoted scalar when a literal block cannot hold the text.
    style = "|" if "\n" in text.rstrip("\n") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_ManifestDumper.add_representer(str, _string)


def to_yaml(*documents: dict[str, Any]) -> str:
    """Block-style YAML documents, separated by ``---``, in plain ASCII (every other
    character escaped: kubectl and every YAML parser read it back unchanged)."""
    return yaml.dump_all(
        documents,
        Dumper=_ManifestDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=False,
        width=88,
    )


VOLUMES_USAGE = f"""\
With a runs volume (a PersistentVolumeClaim) the run folders are on it, and stay
after the pods end; its claim must be `ReadWriteMany` when the pods may run on
different nodes. Without one they are an `emptyDir`, lost with the pod. A data
volume is mounted read-only at `{DATA_MOUNT}`, and `project.json` reads the
project's files from there.
"""
