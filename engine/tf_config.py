"""TF_CONFIG: the cluster description every task of a multi-machine run needs.

The rules here are the ones TensorFlow enforces when it parses TF_CONFIG, plus the
mistakes it does not catch until a cluster hangs (duplicate addresses, a second
chief, a ``ps`` job under a synchronous strategy). The GUI's editor, the project
validator and the cluster tools all check through this module, so a TF_CONFIG is
judged the same way everywhere. The facts about multi-machine strategies that the
cluster tools, the command line and the window share are kept here too.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .problems import (
    Problem,
    ProblemsError,
    parse_json_text,
    problems_from_validation_error,
    raise_problems,
)

JobType = Literal["chief", "worker", "ps", "evaluator"]
JOB_TYPES: tuple[str, ...] = ("chief", "worker", "ps", "evaluator")
MULTI_MACHINE_STRATEGIES: tuple[str, ...] = ("multi_worker_mirrored", "parameter_server")
"""The strategies whose tasks are separate processes, each with its own TF_CONFIG."""
TF_CONFIG_VAR = "TF_CONFIG"
"""The environment variable TensorFlow reads the cluster from."""
DEFAULT_WORKERS = 2
"""Worker tasks of a cluster laid out on this machine when nothing says how many."""
LOCAL_CLUSTERS: dict[str, dict[str, int]] = {
    "multi_worker_mirrored": {"worker": DEFAULT_WORKERS},
    "parameter_server": {"chief": 1, "worker": DEFAULT_WORKERS, "ps": 1},
}
"""Per multi-machine strategy, the tasks of each job a cluster on this machine gets."""
NO_RESUME = {
    "parameter_server": "a parameter_server run cannot resume: its training is asynchronous "
    "and its coordinator keeps no checkpoint; start it again",
}
"""Why a strategy's runs cannot be resumed, for the strategies that cannot."""

_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_SCOPE_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""An IPv6 zone: an interface name or number (``fe80::1%eth0``). Python's ipaddress takes
any text after the ``%``, line breaks included; a host is written into launch scripts."""
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_MODEL_CONFIG = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def parse_address(address: str) -> tuple[str, int]:
    """Splits ``host:port`` (``[v6]:port`` for IPv6) and raises ValueError saying what is wrong."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError("address is empty (expected host:port)")
    if address != address.strip():
        raise ValueError(f"{address!r} has spaces around it")
    if address.startswith("["):
        host, sep, port_text = address[1:].partition("]:")
        if not sep:
            raise ValueError(f"{address!r} is not [ipv6]:port")
        try:
            scope = ipaddress.IPv6Address(host).scope_id
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv6 address") from None
        if scope is not None and not _SCOPE_ID.fullmatch(scope):
            raise ValueError(
                f"{host!r}: the zone after % must be an interface name or number "
                "(letters, digits, '_', '.', '-')"
            )
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep:
            raise ValueError(f"{address!r} has no port (expected host:port)")
        if ":" in host:
            raise ValueError(f"{address!r}: write IPv6 hosts in brackets, as [::1]:2222")
        if not host:
            raise ValueError(f"{address!r} has no host (expected host:port)")
        if not _valid_hostname(host):
            raise ValueError(f"{host!r} is not a valid host name or IPv4 address")
    if not _DIGITS.fullmatch(port_text):
        raise ValueError(f"port {port_text!r} of {address!r} is not a number (digits 0-9)")
    if port_text.startswith("0") and port_text != "0":
        raise ValueError(
            f"port {port_text!r} of {address!r} has a leading zero; write {int(port_text)}"
        )
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} of {address!r} is outside 1-65535")
    return host, port


def address_key(address: str) -> tuple[str, int]:
    """What an address names, for telling whether two tasks share one: the host as one
    spelling (lower case, no trailing dot, IPv6 compressed, IPv4-mapped IPv6 as IPv4,
    every loopback name as ``localhost``) and the port.

    TensorFlow's servers listen on every interface of their machine, so two loopback
    spellings with one port are one port, whichever loopback address each names.
    """
    host, port = parse_address(address)
    host = host.lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        loopback = host == "localhost" or host.endswith(".localhost")
        return ("localhost" if loopback else host), port
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ("localhost" if ip.is_loopback else ip.compressed), port


def _valid_hostname(host: str) -> bool:
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return False
        return True
    if len(host) > 253:
        return False
    return all(_HOST_LABEL.fullmatch(label) for label in host.rstrip(".").split("."))


class TaskSpec(BaseModel):
    """Which task of the cluster this process is."""

    model_config = _MODEL_CONFIG

    type: JobType
    index: int = Field(0, ge=0, le=65535)

    def __str__(self) -> str:
        return f"{self.type}:{self.index}"


class TFConfig(BaseModel):
    """Exactly TensorFlow's TF_CONFIG structure: ``{"cluster": {...}, "task": {...}}``."""

    model_config = _MODEL_CONFIG

    cluster: dict[str, list[str]]
    task: TaskSpec

    @model_validator(mode="after")
    def _check_cluster(self) -> TFConfig:
        raise_problems("TFConfig", cluster_problems(self))
        return self

    def to_env(self) -> str:
        """The JSON string to put in the TF_CONFIG environment variable."""
        return json.dumps(self.model_dump(), separators=(",", ":"))

    def for_task(self, task_type: str, index: int) -> TFConfig:
        """The same cluster seen from another task (each process gets its own TF_CONFIG)."""
        return TFConfig(cluster=self.cluster, task=TaskSpec(type=task_type, index=index))

    def tasks(self) -> list[TaskSpec]:
        """Every task of the cluster, chief first, in TensorFlow's job order."""
        return [
            TaskSpec(type=job, index=i)
            for job in JOB_TYPES
            for i in range(len(self.cluster.get(job, [])))
        ]

    def address(self, task: TaskSpec) -> str:
        """The ``host:port`` a task serves on."""
        return self.cluster[task.type][task.index]

    def chief_task(self) -> TaskSpec:
        """The task that reports for the cluster (:func:`chief_of`)."""
        return chief_of(self.cluster)


def chief_of(cluster: Mapping[str, object]) -> TaskSpec:
    """The task that reports for a cluster: the chief, or worker 0 when there is none.

    This is TensorFlow's own rule for who saves checkpoints and writes summaries.
    """
    return TaskSpec(type="chief" if "chief" in cluster else "worker", index=0)


def cluster_problems(config: TFConfig) -> list[Problem]:
    """Every rule of a TF_CONFIG on its own, without knowing the strategy."""
    problems: list[Problem] = []
    if not config.cluster:
        problems.append(Problem(("cluster",), "the cluster has no jobs"))
    seen: dict[tuple[str, int], tuple[str, int]] = {}
    for job, addresses in config.cluster.items():
        if job == "master":
            problems.append(
                Problem(("cluster", job), "TensorFlow 2 calls this job 'chief': rename it")
            )
        elif job not in JOB_TYPES:
            problems.append(
                Problem(("cluster", job), f"unknown job type; use one of {', '.join(JOB_TYPES)}")
            )
        if not addresses:
            problems.append(Problem(("cluster", job), "the job has no addresses"))
        if job in ("chief", "evaluator") and len(addresses) > 1:
            problems.append(
                Problem(("cluster", job), f"a cluster has at most one {job}, not {len(addresses)}")
            )
        for i, address in enumerate(addresses):
            try:
                key = address_key(address)
            except ValueError as exc:
                problems.append(Problem(("cluster", job, i), str(exc)))
                continue
            if key in seen:
                other_job, other_i = seen[key]
                problems.append(
                    Problem(
                        ("cluster", job, i),
                        f"{address} is also {other_job}:{other_i}; each task needs its own port",
                    )
                )
            else:
                seen[key] = (job, i)
    task = config.task
    if task.type not in config.cluster:
        problems.append(
            Problem(("task", "type"), f"this task is a {task.type} but the cluster has no such job")
        )
    elif task.index >= len(config.cluster[task.type]):
        problems.append(
            Problem(
                ("task", "index"),
                f"{task.type} has {len(config.cluster[task.type])} task(s), "
                f"so the index must be below that",
            )
        )
    return problems


def strategy_problems(config: TFConfig | None, strategy_kind: str) -> list[Problem]:
    """The rules that join TF_CONFIG and the strategy (paths are relative to the project)."""
    if config is None:
        if strategy_kind == "parameter_server":
            return [
                Problem(
                    ("tf_config",),
                    "parameter_server needs a TF_CONFIG with a chief, workers and ps tasks",
                )
            ]
        return []
    if strategy_kind not in MULTI_MACHINE_STRATEGIES:
        return [
            Problem(
                ("tf_config",),
                f"TF_CONFIG is only used by {' and '.join(MULTI_MACHINE_STRATEGIES)}, "
                f"not {strategy_kind}: remove it or change the strategy",
            )
        ]
    cluster = config.cluster
    problems = []
    if strategy_kind == "parameter_server":
        if "chief" not in cluster:
            problems.append(
                Problem(
                    ("tf_config", "cluster"), "parameter_server needs a chief (the coordinator)"
                )
            )
        if not cluster.get("worker"):
            problems.append(
                Problem(
                    ("tf_config", "cluster", "worker"), "parameter_server needs at least one worker"
                )
            )
        if not cluster.get("ps"):
            problems.append(
                Problem(
                    ("tf_config", "cluster", "ps"), "parameter_server needs at least one ps task"
                )
            )
    elif "ps" in cluster:
        problems.append(
            Problem(
                ("tf_config", "cluster", "ps"),
                "ps tasks are only used by parameter_server; remove them or change the strategy",
            )
        )
    return problems


def parse_tf_config_text(text: str) -> TFConfig:
    """Reads TF_CONFIG from pasted text, a file's content or the environment."""
    data = parse_json_text(text, "TF_CONFIG")
    if not isinstance(data, dict):
        raise ProblemsError(
            [Problem((), 'TF_CONFIG must be a JSON object {"cluster": ..., "task": ...}')],
            "TF_CONFIG",
        )
    try:
        return TFConfig.model_validate(data)
    except ValidationError as exc:
        raise ProblemsError(
            problems_from_validation_error(exc, model=TFConfig), "TF_CONFIG"
        ) from None


def parse_task(text: str) -> TaskSpec:
    """Reads a task as the command line names it, ``TYPE:INDEX`` (``worker:1``)."""
    job, sep, index = text.strip().partition(":")
    if not sep or job not in JOB_TYPES or not _DIGITS.fullmatch(index):
        raise ValueError(
            f"{text!r} is not a task; write TYPE:INDEX with TYPE one of "
            f"{', '.join(JOB_TYPES)}, e.g. worker:1"
        )
    try:
        return TaskSpec(type=job, index=int(index))
    except ValidationError:
        raise ValueError(f"{text!r}: the task index {index} is outside 0-65535") from None


def tf_config_from_env(environ: Mapping[str, str] | None = None) -> TFConfig | None:
    """The TF_CONFIG a cluster manager (Kubeflow's TFJob, a launch script) put in the
    environment, validated like any other; None when the variable is unset or blank.

    TFJob adds ``"environment": "cloud"``, a key only TensorFlow's retired Estimator
    read; it is dropped here so such a TF_CONFIG imports as the cluster it describes.
    """
    text = (os.environ if environ is None else environ).get(TF_CONFIG_VAR, "")
    if not text.strip():
        return None
    with contextlib.suppress(ValueError, RecursionError):  # parse_tf_config_text says why
        data = json.loads(text)
        if isinstance(data, dict) and "environment" in data:
            del data["environment"]
            text = json.dumps(data)
    return parse_tf_config_text(text)
