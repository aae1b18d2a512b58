"""A project's cluster as files for real hosts: TF_CONFIGs, scripts, Kubernetes (TF-free).

``distloop export`` writes one format per folder, all from the same validated
:class:`engine.tf_config.TFConfig`:

``json``
    ``tf_config/<type>-<index>.json``: each task's TF_CONFIG.
``shell``
    ``run-<host>.sh``: per host, a script that starts that host's tasks, each as
    ``TF_CONFIG=... distloop run project.json --task TYPE:INDEX``.
``k8s``
    ``kubernetes.yaml``: a ConfigMap with the project, a headless Service that gives
    every pod a DNS name, a NetworkPolicy that admits only the cluster's own pods,
    and one Job per task with its TF_CONFIG in the pod's environment.
``tfjob``
    ``tfjob.yaml``: a Kubeflow ``TFJob`` (``kubeflow.org/v1``) with Chief, Worker and
    PS replica specs; the training operator sets TF_CONFIG itself.
``slurm``
    ``slurm.sbatch``: a batch script whose tasks each compute their TF_CONFIG from
    Slurm's variables (``engine.cluster.slurm``), so it needs no cluster in the project.

Every folder also gets ``project.json`` (its ``tf_config`` is the exported
cluster) and a ``README.md``, which lists what the hosts or pods need
(:func:`engine.export_storage.storage_notes`: the project's local paths, and on
Kubernetes where the run folders live). ``k8s`` and ``tfjob`` take a runs volume and
a data volume (PersistentVolumeClaim names); without a runs volume the run folders
are an ``emptyDir``, lost with the pod. YAML is written by a small emitter here (PyYAML is
not a dependency); every string is double-quoted, so no value changes type.

Security: TensorFlow's gRPC servers are unauthenticated, so every file that can
carry a comment, and every README, says so (:data:`SECURITY_NOTE`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from .cluster import run_problems, task_dir_name
from .cluster.slurm import DEFAULT_PORT_BASE as SLURM_PORT_BASE
from .code_text import inert, shown
from .config import Project, load_project_data
from .export_storage import (
    DATA_MOUNT,
    RUNS_MOUNT,
    VOLUME_FORMATS,
    data_volume_paths,
    storage_notes,
    volume_name_problem,
)
from .fileio import atomic_write_text
from .problems import Problem, ProblemsError
from .run_folder import PROJECT_FILE
from .tf_config import (
    DEFAULT_WORKERS,
    JOB_TYPES,
    MULTI_MACHINE_STRATEGIES,
    TF_CONFIG_VAR,
    TaskSpec,
    TFConfig,
    parse_address,
)

FORMATS = ("json", "shell", "k8s", "tfjob", "slurm")
DEFAULT_IMAGE = "distloop:latest"
K8S_PORT = 2222
"""The port every pod serves on: TFJob's default, kept for the plain manifests too."""
PROJECT_MOUNT = "/etc/distloop"
POD_NAME_VAR = "DISTLOOP_POD_NAME"
"""A TFJob pod's own name (downward API): its run folder's name on a shared runs volume."""
SECURITY_NOTE = (
    "SECURITY: TensorFlow's gRPC servers are unauthenticated and unencrypted: anyone who "
    "can reach a task's port can run code in it. They listen on every network interface, "
    "whatever host TF_CONFIG names. Run the cluster only on a trusted network (a private "
    "subnet, a VPN, a Kubernetes namespace whose NetworkPolicy admits only the cluster's "
    "own pods), never on ports reachable from the internet."
)
_TFJOB_REPLICAS = {"chief": "Chief", "worker": "Worker", "ps": "PS"}
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


def export_cluster(
    project: Project,
    out_dir: Path,
    fmt: str,
    *,
    tf_config: TFConfig | None = None,
    image: str = DEFAULT_IMAGE,
    base_dir: Path | None = None,
    runs_volume: str | None = None,
    data_volume: str | None = None,
    slurm: SlurmJob | None = None,
) -> list[Path]:
    """Writes ``fmt``'s files for the project's cluster (or ``tf_config``'s) into ``out_dir``.

    ``base_dir`` is the project file's folder (its relative paths start there);
    ``runs_volume`` and ``data_volume`` name PersistentVolumeClaims (``k8s`` and
    ``tfjob``); ``slurm`` shapes the ``slurm`` format's job. Returns the files
    written. Raises ProblemsError when there is no cluster to export or it cannot run
    under the project's strategy, ValueError for an unknown format, or a volume that is
    no Kubernetes name or whose format has none.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    volumes = {"runs volume": runs_volume, "data volume": data_volume}
    for what, claim in volumes.items():
        if claim is None:
            continue
        if fmt not in VOLUME_FORMATS:
            raise ValueError(f"a {what} is for the {' and '.join(VOLUME_FORMATS)} formats")
        problem = volume_name_problem(claim)
        if problem is not None:
            raise ValueError(f"{what}: {problem}")
    if fmt in VOLUME_FORMATS and not valid_image(image):
        raise ProblemsError(
            [
                Problem(
                    (),
                    f"{image!r} is not a container image reference; write "
                    "[registry[:port]/]name[:tag][@digest], e.g. registry.example.org/distloop:1.0",
                )
            ],
            "export",
        )
    if fmt == "slurm":
        return _write_files(out_dir, _slurm_files(project, slurm or SlurmJob(), base_dir))
    config = tf_config or project.tf_config
    if config is None:
        raise ProblemsError(
            [
                Problem(
                    ("tf_config",),
                    "export needs a cluster: set the project's tf_config, or pass a TF_CONFIG file",
                )
            ],
            "export",
        )
    chief = config.chief_task()
    config = config.for_task(chief.type, chief.index)
    problems = run_problems(config, project.strategy.kind)
    if problems:
        raise ProblemsError(problems, "export")
    name = cluster_name(project)
    if fmt == "k8s":
        config = kubernetes_tf_config(config, name)
    notes = storage_notes(
        project, fmt, base_dir=base_dir, runs_volume=runs_volume, data_volume=data_volume
    )
    if fmt in VOLUME_FORMATS and base_dir is not None:
        # A pod reads project.json from a read-only ConfigMap: nothing can sit beside it.
        project = project.resolve_paths(base_dir)
    exported = _on_data_volume(project, base_dir) if data_volume else project
    exported = exported.model_copy(update={"tf_config": config})
    files: dict[str, str] = {PROJECT_FILE: exported.to_json()}
    storage = PodStorage(runs_volume, data_volume)
    if fmt == "json":
        usage = _json_files(config, files)
    elif fmt == "shell":
        usage = _shell_files(config, files)
    elif fmt == "k8s":
        files["kubernetes.yaml"] = kubernetes_manifests(exported, config, name, image, storage)
        usage = _K8S_USAGE.format(name=name, runs=RUNS_MOUNT, volumes=_VOLUMES_USAGE)
    else:
        files["tfjob.yaml"] = tfjob_manifest(exported, config, name, image, storage)
        usage = _TFJOB_USAGE.format(name=name, runs=RUNS_MOUNT, volumes=_VOLUMES_USAGE)
    files["README.md"] = _readme(exported, config, fmt, usage, notes)
    return _write_files(out_dir, files)


def _write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for relative, text in files.items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        if relative.endswith((".sh", ".sbatch")):
            path.chmod(0o755)
        written.append(path)
    return written


def _on_data_volume(project: Project, base_dir: Path | None) -> Project:
    """The project reading every local path from the data volume's mount."""
    data = project.model_dump(mode="json")
    for field, path in data_volume_paths(project, base_dir).items():
        *sections, name = field.split(".")
        section = data
        for key in sections:
            section = section[key]
        section[name] = path
    return load_project_data(data, "export")


def _slurm_files(project: Project, job: SlurmJob, base_dir: Path | None) -> dict[str, str]:
    if job.nodes is None:
        cluster = project.tf_config
        nodes = len(cluster.tasks()) if cluster else DEFAULT_WORKERS
        per_node = max(1, job.tasks_per_node)  # a count below 1 is the problem said below
        job = replace(job, nodes=max(1, nodes // per_node))
    problems = job.problems(project.strategy.kind)
    if problems:
        raise ProblemsError(problems, "export")
    usage = _SLURM_USAGE.format(
        nodes=job.nodes,
        per_node=job.tasks_per_node,
        tasks=job.nodes * job.tasks_per_node,
        port=job.port_base,
    )
    notes = storage_notes(project, "slurm", base_dir=base_dir)
    if base_dir is not None:  # the job reads the project from the export folder
        project = project.resolve_paths(base_dir)
    return {
        PROJECT_FILE: project.to_json(),
        SBATCH_FILE: sbatch_script(cluster_name(project), PROJECT_FILE, job),
        "README.md": _readme_text(project, "slurm", usage, notes),
    }


def valid_image(image: str) -> bool:
    """Whether ``image`` is a container image reference a pod spec can name."""
    return len(image) <= _MAX_IMAGE_LENGTH and _IMAGE.fullmatch(image) is not None


def cluster_name(project: Project) -> str:
    """A Kubernetes name for the project's cluster: ``distloop-<project-name>``.

    Short enough (at most 50 characters) that ``<name>-worker-99`` is a valid
    label value and DNS label (63 characters).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", project.name.lower()).strip("-")[:41].strip("-")
    return f"distloop-{slug}" if slug else "distloop"


def kubernetes_tf_config(config: TFConfig, name: str) -> TFConfig:
    """The same cluster with pod DNS names: ``worker-1.<name>:2222`` (the headless Service)."""
    cluster = {
        job: [f"{job}-{i}.{name}:{K8S_PORT}" for i in range(len(addresses))]
        for job, addresses in config.cluster.items()
    }
    return TFConfig(cluster=cluster, task=config.task)


# --- json and shell --------------------------------------------------------------------


def _json_files(config: TFConfig, files: dict[str, str]) -> str:
    for task in config.tasks():
        files[f"tf_config/{task_dir_name(task)}.json"] = _task_env(config, task) + "\n"
    return _JSON_USAGE


def _task_env(config: TFConfig, task: TaskSpec) -> str:
    return config.for_task(task.type, task.index).to_env()


def _shell_files(config: TFConfig, files: dict[str, str]) -> str:
    by_host: dict[str, list[TaskSpec]] = {}
    for task in config.tasks():
        host, _ = parse_address(config.address(task))
        by_host.setdefault(host, []).append(task)
    for host, tasks in by_host.items():
        files[f"run-{_file_safe(host)}.sh"] = _shell_script(config, host, tasks)
    return _SHELL_USAGE


def _file_safe(host: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", host)


def _shell_script(config: TFConfig, host: str, tasks: list[TaskSpec]) -> str:
    names = ", ".join(str(t) for t in tasks)
    lines = [
        "#!/usr/bin/env bash",
        f"# Distloop: the tasks of this cluster that run on {inert(host)}: {names}.",
        "# Copy this folder to the host and run: bash " + f"run-{_file_safe(host)}.sh",
        "# Each task's run folder is runs/<type>-<index>/ beside this script.",
        "#",
        *_comment_lines(SECURITY_NOTE, "# "),
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
        "pids=()",
        "# Ctrl-C or a failed task ends every task this script started.",
        "trap 'kill \"${pids[@]}\" 2>/dev/null || true' EXIT",
    ]
    for task in tasks:
        lines += [
            f"TF_CONFIG={shlex.quote(_task_env(config, task))} \\",
            f"  distloop run {PROJECT_FILE} --task {task} --out runs/{task_dir_name(task)} &",
            "pids+=($!)",
        ]
    lines += [
        "status=0",
        'for pid in "${pids[@]}"; do',
        '  wait "$pid" || status=$?',
        "done",
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


def _comment_lines(text: str, prefix: str, width: int = 88) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(prefix + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, prefix + line]


# --- Kubernetes ------------------------------------------------------------------------


def _labels(name: str, task: TaskSpec | None = None) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": "distloop", "distloop/cluster": name}
    if task is not None:
        labels["distloop/task"] = task_dir_name(task)
    return labels


class PodStorage(NamedTuple):
    """The PersistentVolumeClaims a pod mounts; None: an emptyDir (runs) or none (data)."""

    runs_volume: str | None = None
    data_volume: str | None = None


def _pod_volumes(name: str, storage: PodStorage) -> list[dict[str, Any]]:
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


def _config_map(project: Project, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-project", "labels": _labels(name)},
        "data": {PROJECT_FILE: project.to_json()},
    }


def _network_policy(name: str) -> dict[str, Any]:
    """Admits only the cluster's own pods: the gRPC servers have no authentication."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "labels": _labels(name)},
        "spec": {
            "podSelector": {"matchLabels": {"distloop/cluster": name}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"distloop/cluster": name}}}]}],
        },
    }


def _container(
    name: str,
    image: str,
    command: list[str],
    port_name: str,
    env: list[dict[str, Any]],
    storage: PodStorage,
) -> dict[str, Any]:
    mounts = [
        {"name": "project", "mountPath": PROJECT_MOUNT, "readOnly": True},
        {"name": "runs", "mountPath": RUNS_MOUNT},
    ]
    if storage.data_volume:
        mounts.append({"name": "data", "mountPath": DATA_MOUNT, "readOnly": True})
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": command,
        "ports": [{"name": port_name, "containerPort": K8S_PORT}],
        "volumeMounts": mounts,
    }
    if env:
        container["env"] = env
    return container


def kubernetes_manifests(
    project: Project, config: TFConfig, name: str, image: str, storage: PodStorage
) -> str:
    """ConfigMap, headless Service, NetworkPolicy and one Job per task, as YAML documents.

    Each task's run folder is ``runs/<cluster>/<type>-<index>``: unique on a runs volume
    that several clusters share.
    """
    documents: list[dict[str, Any]] = [
        _config_map(project, name),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "labels": _labels(name)},
            "spec": {
                "clusterIP": "None",
                # Pods must resolve each other while TensorFlow starts, before any is ready.
                "publishNotReadyAddresses": True,
                "selector": {"distloop/cluster": name},
                "ports": [{"name": "grpc", "port": K8S_PORT, "targetPort": K8S_PORT}],
            },
        },
        _network_policy(name),
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
        env = [{"name": TF_CONFIG_VAR, "value": _task_env(config, task)}]
        documents.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"{name}-{hostname}", "labels": _labels(name, task)},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"labels": _labels(name, task)},
                        "spec": {
                            "hostname": hostname,
                            "subdomain": name,
                            "restartPolicy": "Never",
                            "containers": [
                                _container("distloop", image, command, "grpc", env, storage)
                            ],
                            "volumes": _pod_volumes(name, storage),
                        },
                    },
                },
            }
        )
    return _yaml_header() + to_yaml(*documents)


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
        replica_specs[_TFJOB_REPLICAS[job]] = {
            "replicas": len(config.cluster[job]),
            "restartPolicy": "Never",
            "template": {
                "metadata": {"labels": _labels(name)},
                "spec": {
                    # TFJob finds the training container by this name and port name.
                    "containers": [
                        _container("tensorflow", image, command, "tfjob-port", [pod_name], storage)
                    ],
                    "volumes": _pod_volumes(name, storage),
                },
            },
        }
    tfjob = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "labels": _labels(name)},
        "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": replica_specs},
    }
    documents = [_config_map(project, name), _network_policy(name), tfjob]
    return _yaml_header() + to_yaml(*documents)


def _yaml_header() -> str:
    return "\n".join(
        [
            "# Generated by distloop export.",
            *_comment_lines(SECURITY_NOTE, "# "),
            "",
        ]
    )


# --- YAML ------------------------------------------------------------------------------


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


# --- README ----------------------------------------------------------------------------


def _readme(project: Project, config: TFConfig, fmt: str, usage: str, notes: list[str]) -> str:
    tasks = "\n".join(f"- `{task}`: {inert(config.address(task))}" for task in config.tasks())
    return _readme_text(project, fmt, f"Tasks:\n\n{tasks}\n\n{usage}", notes)


def _readme_text(project: Project, fmt: str, usage: str, notes: list[str]) -> str:
    storage = ""
    if notes:
        listed = "\n".join(f"- {inert(note)}" for note in notes)
        storage = f"\n## Before you start\n\n{listed}\n"
    return (
        f"# Distloop cluster export: {inert(project.name)}\n\n"
        f"Strategy `{project.strategy.kind}`, format `{fmt}`. {usage}{storage}\n"
        f"## Security\n\n{SECURITY_NOTE}\n"
    )


_JSON_USAGE = """\
`tf_config/<type>-<index>.json` holds each task's TF_CONFIG. On each host, for each
of its tasks:

```sh
TF_CONFIG="$(cat tf_config/worker-1.json)" distloop run project.json
```

A TF_CONFIG in the environment wins over the project's `tf_config`, and its `task`
says which task the process is.
"""

_SHELL_USAGE = """\
`run-<host>.sh` starts the tasks that live on that host. Copy this folder to every
host, then run each host's script (in any order: tasks wait for each other):

```sh
bash run-<host>.sh
```

Each task writes its run folder under `runs/`. The run's trace is the chief's
(worker 0's when there is no chief). Ctrl-C stops the script's tasks.
"""


@dataclass(frozen=True)
class SlurmJob:
    """What ``sbatch`` is asked for: the step's shape, and where and how long it may run."""

    nodes: int | None = None
    """None: one node per task of the project's cluster, else :data:`DEFAULT_WORKERS`."""
    tasks_per_node: int = 1
    time: str | None = None
    partition: str | None = None
    port_base: int = SLURM_PORT_BASE

    def problems(self, strategy_kind: str) -> list[Problem]:
        found = []
        if not 1 <= self.nodes <= 10_000:
            found.append(Problem(("nodes",), f"{self.nodes} nodes: give 1 to 10000"))
        if not 1 <= self.tasks_per_node <= 1024:
            found.append(Problem(("ntasks_per_node",), "give 1 to 1024 tasks per node"))
        if self.time is not None:
            found += [Problem(("time",), message) for message in _time_problems(self.time)]
        if self.partition is not None and not _SLURM_NAME.fullmatch(self.partition):
            found.append(
                Problem(("partition",), f"{shown(self.partition)} is not a partition name")
            )
        if not 1 <= self.port_base <= 65535 - self.tasks_per_node + 1:
            found.append(Problem(("port_base",), "the tasks' ports must fit in 1-65535"))
        tasks = self.nodes * self.tasks_per_node
        if strategy_kind == "parameter_server" and tasks < 3:
            found.append(
                Problem(
                    ("nodes",), f"parameter_server needs 3 tasks (chief, ps, worker), not {tasks}"
                )
            )
        elif strategy_kind not in MULTI_MACHINE_STRATEGIES:
            found.append(
                Problem(
                    ("strategy", "kind"),
                    f"a Slurm job runs {' or '.join(MULTI_MACHINE_STRATEGIES)}, "
                    f"not {strategy_kind}",
                )
            )
        return found


def _time_problems(time: str) -> list[str]:
    """Why sbatch would refuse ``--time``, or read it as another limit than was meant.

    Slurm holds a limit as minutes in 32 bits, its largest value meaning no limit: a
    larger number is not a longer job but a job sbatch refuses, or one whose limit
    wraps. ``UNLIMITED``/``INFINITE`` say no limit in Slurm's own words.
    """
    if time in ("UNLIMITED", "INFINITE"):
        return []
    match = _SLURM_TIME.fullmatch(time)
    if match is None:
        return [f"{shown(time)} is not a Slurm time (e.g. 90, 1:30:00, 2-0)"]
    if _time_minutes(match) > MAX_SLURM_MINUTES:
        return [f"{shown(time)} is longer than Slurm's longest limit: give UNLIMITED"]
    return []


def _time_minutes(match: re.Match[str]) -> float:
    """The minutes of a ``--time`` in any of sbatch's forms: ``M``, ``M:S``, ``H:M:S``,
    ``D-H``, ``D-H:M``, ``D-H:M:S``."""
    days, clock = match.group("days"), [int(part) for part in match.group("clock").split(":")]
    if days is None:
        seconds = {1: [60], 2: [60, 1], 3: [3600, 60, 1]}[len(clock)]
        return sum(a * b for a, b in zip(clock, seconds, strict=True)) / 60
    seconds = [3600, 60, 1][: len(clock)]
    return int(days) * 1440 + sum(a * b for a, b in zip(clock, seconds, strict=True)) / 60


MAX_SLURM_MINUTES = 2**32 - 3
"""Slurm's longest finite time limit: a uint32 of minutes, the top two values meaning
"infinite" and "not set"."""
_SLURM_TIME = re.compile(
    r"(?:(?P<days>[0-9]{1,30})-)?(?P<clock>[0-9]{1,30}(?::[0-9]{1,2}){0,2})", re.ASCII
)
_SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
SBATCH_FILE = "slurm.sbatch"
STOP_WARNING_S = 120
"""Seconds before the time limit at which Slurm sends SIGTERM: a stop at the next step
with a checkpoint, well before the SIGKILL."""


def sbatch_script(job_name: str, project_file: str, job: SlurmJob) -> str:
    """The batch script: every task one ``distloop run --task-from slurm``, and a job that
    Slurm requeues (preemption, ``scontrol requeue``) resumes from its last checkpoint, as
    does a new job given ``DISTLOOP_RESUME=1`` and an earlier job's ``DISTLOOP_RUN_DIR``
    (``distloop submit --resume``); any other job starts afresh, so a job id Slurm hands
    out again never continues another job's run. The chief's messages go to its
    ``messages.jsonl`` too, where ``distloop submit --wait`` follows them.

    ``job_name`` and ``project_file`` are the exporter's own (already safe) names; every
    value here is validated, and the run folder is quoted, so nothing in the script is
    text a user could turn into a command.
    """
    directives = [
        f"--job-name={job_name}",
        f"--nodes={job.nodes}",
        f"--ntasks-per-node={job.tasks_per_node}",
        *([f"--time={job.time}"] if job.time else []),
        *([f"--partition={job.partition}"] if job.partition else []),
        f"--signal=TERM@{STOP_WARNING_S}",
        "--requeue",
        "--open-mode=append",
        "--output=slurm-%j.out",
    ]
    return "\n".join(
        [
            "#!/usr/bin/env bash",
            *(f"#SBATCH {directive}" for directive in directives),
            "# Distloop: submit from this folder with `sbatch slurm.sbatch`. Every task computes",
            "# its TF_CONFIG from Slurm's variables; the run folder is runs/<job id>/ here",
            "# (DISTLOOP_RUN_DIR chooses another). DISTLOOP is the command that runs distloop",
            "# on the nodes (default: distloop). A requeued job resumes from its checkpoint, as",
            "# does one given DISTLOOP_RESUME=1 and an earlier job's DISTLOOP_RUN_DIR.",
            "#",
            *_comment_lines(SECURITY_NOTE, "# "),
            "set -euo pipefail",
            'cd "${SLURM_SUBMIT_DIR:-.}"',
            'run_dir="${DISTLOOP_RUN_DIR:-runs/$SLURM_JOB_ID}"',
            'if [ -d "$run_dir/tasks" ] && { [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] '
            '|| [ -n "${DISTLOOP_RESUME:-}" ]; }; then',
            '  start=(--resume "$run_dir")',
            "else",
            f'  start=({project_file} --out "$run_dir")',
            "fi",
            "# shellcheck disable=SC2086 (DISTLOOP may be a command with arguments)",
            "srun --distribution=block --kill-on-bad-exit=1 ${DISTLOOP:-distloop} run "
            f'"${{start[@]}}" --task-from slurm --port-base {job.port_base} --record-messages',
            "",
        ]
    )


_SLURM_USAGE = """\
`slurm.sbatch` asks for {nodes} node(s) with {per_node} task(s) each ({tasks} tasks). Every
task runs `distloop run project.json --task-from slurm`, which computes its TF_CONFIG
from Slurm's variables: ranks fill the nodes in order (block distribution), and each
node's tasks serve on ports {port}, {port}+1, ... (open them between the nodes). The
folder must be on a file system every node shares, with Distloop installed on each
node (`DISTLOOP=/path/to/venv/bin/distloop sbatch slurm.sbatch` names another command).

```sh
sbatch slurm.sbatch        # the run folder is runs/<job id>/
scancel <job id>           # every task stops at the same step with a checkpoint
scontrol requeue <job id>  # the job starts again and resumes from that checkpoint
```

Slurm sends SIGTERM 120 s before the time limit (`--signal=TERM@120`), so a job that
runs out of time stops with a checkpoint too.
"""

_K8S_USAGE = """\
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

_TFJOB_USAGE = """\
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

_VOLUMES_USAGE = f"""\
With a runs volume (a PersistentVolumeClaim) the run folders are on it, and stay
after the pods end; its claim must be `ReadWriteMany` when the pods may run on
different nodes. Without one they are an `emptyDir`, lost with the pod. A data
volume is mounted read-only at `{DATA_MOUNT}`, and `project.json` reads the
project's files from there.
"""
