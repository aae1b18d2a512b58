"""What made a run: its software, machine, seed, settings and code, recorded as it starts.

"Works on worker 0, fails on worker 1" is most often version skew, and a run that
cannot be repeated most often ran under something nobody wrote down. So every
engine (a local run, each task of a cluster, a task started over SSH or by Slurm)
writes ``environment.json`` into its run folder before it loads TensorFlow
(:func:`record_environment`), and says its digest and packages to its launcher
(``messages.EnvironmentReady``), which names a task whose software is not the chief's
before the first collective (:func:`environment_differences`).

Everything here is TensorFlow-free and quick (a tenth of a second on an idle machine,
most of it reading the installed packages' metadata, which a warm engine does before its
run arrives): versions come from what pip recorded, not
from importing the packages, and git runs as a subprocess with a timeout (a machine
without git records no commit). Environment variables are taken by a fixed list of
name patterns, never the whole environment, so a secret in it is never written down.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import __version__
from .config import Project
from .run_folder import write_environment

TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly")
"""The names TensorFlow is installed under (its metadata: importing it takes seconds)."""
VARIABLE_PATTERNS = (
    "TF_*",
    "CUDA_*",
    "CUDNN_*",
    "NCCL_*",
    "XLA_FLAGS",
    "TPU_*",
    "OMP_*",
    "KMP_*",
    "MKL_*",
    "OPENBLAS_NUM_THREADS",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "KERAS_BACKEND",
    "PYTHONHASHSEED",
)
"""The environment variables that change what TensorFlow does (threads, devices, XLA,
collectives, logging): only names matching one of these are recorded."""
PER_TASK_VARIABLES = ("*_VISIBLE_DEVICES",)
"""Variables that may differ between a cluster's tasks by design: each task's devices."""
SKIPPED_VARIABLES = ("TF_CONFIG", "TF_VAR_*", "TF_TOKEN_*", "TF_CLI_*", "TF_WORKSPACE")
"""Left out although they match: TF_CONFIG is the run's own (``status.json`` and each
task's project hold it), and Terraform's variables share the TF_ prefix, its API tokens
(``TF_TOKEN_*``) and secrets passed as ``TF_VAR_*`` among them."""
SECRET_WORDS = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY", "AUTH")
"""A matching name holding one of these words is left out too: a pattern never lets a
secret through."""
GIT_TIMEOUT_S = 5.0
"""A git that has not answered by then (a repository on a hung network disk) records none."""
DIFF_LIMIT_BYTES = 64 * 1024
"""The custom code file's uncommitted diff is kept up to this much; a longer one is cut
and says so (``code_diff_truncated``)."""
FLAT_DEPTH = 4
"""How deep a record's keys are named (``gpus.devices`` is two): what lies deeper is
compared as its JSON text."""
_NAME_SEPARATORS = re.compile(r"[-_.]+")
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def record_environment(folder: Path, project: Project, task: str | None) -> dict[str, Any]:
    """Writes ``environment.json`` into the run folder ``folder``; returns what it wrote.

    ``project``'s seed and custom code are the run's; its custom code file's git
    repository (else the one the run was started in) gives the commit. A failed write
    stops the run, as any failed run folder write does.
    """
    record = collect_environment(project, task)
    write_environment(folder, record)
    return record


def collect_environment(project: Project, task: str | None) -> dict[str, Any]:
    """This process's environment as the run's record (see the module's docstring)."""
    packages = installed_packages()
    versions = {
        "python": platform.python_version(),
        "tensorflow": next(
            (packages[name] for name in TENSORFLOW_DISTRIBUTIONS if name in packages), None
        ),
        "keras": packages.get("keras"),
        "numpy": packages.get("numpy"),
        "distloop": __version__,
    }
    code = Path(project.custom_code.path) if project.custom_code is not None else None
    return {
        "recorded_at": time.time(),
        "task": task,
        "host": socket.gethostname(),
        "digest": environment_digest(versions, packages),
        "versions": versions,
        "python": {
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "platform": {
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "description": platform.platform(),
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
        },
        "gpus": nvidia_gpus(),
        "seed": project.training.seed,
        "variables": behaviour_variables(os.environ),
        "git": git_state(code.parent if code is not None else Path.cwd(), code),
        "packages": packages,
    }


def installed_packages() -> dict[str, str]:
    """Every installed distribution, name to version, as this interpreter finds them: the
    first of a name on ``sys.path`` wins, as an import would. Names are normalized (PEP 503),
    so ``typing_extensions`` on one host and ``typing-extensions`` on another are one.
    Read once per process (most of a record's time): a warm engine reads them before its
    job arrives, and runs that one job only."""
    return dict(_read_packages())


@functools.cache
def _read_packages() -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            found.setdefault(package_name(name), distribution.version)
    return tuple(sorted(found.items()))


def required_packages(packages: Mapping[str, str], root: str = "distloop") -> dict[str, str]:
    """The installed packages ``root`` needs, directly or through another (TensorFlow, and
    Keras, NumPy, protobuf... through it), out of ``packages``: the ones a run loads, so a
    difference between two hosts there is one a launch stops for. Optional extras are left
    out; a requirement for another platform counts where it is installed all the same."""
    needed: dict[str, str] = {}
    waiting = [package_name(root)]
    while waiting:
        name = waiting.pop()
        if name in needed or name not in packages:
            continue
        needed[name] = packages[name]
        try:
            requirements = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in requirements:
            found = _REQUIREMENT_NAME.match(requirement)
            if found and "extra ==" not in requirement.partition(";")[2].replace("  ", " "):
                waiting.append(package_name(found[0]))
    return dict(sorted(needed.items()))


def package_name(name: str) -> str:
    return _NAME_SEPARATORS.sub("-", name).lower()


def environment_digest(versions: Mapping[str, str | None], packages: Mapping[str, str]) -> str:
    """A short hash of the software a task runs: two tasks with the same one run the same
    Python, TensorFlow, Distloop and packages."""
    text = json.dumps({"versions": versions, "packages": packages}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def behaviour_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of :data:`VARIABLE_PATTERNS`, without :data:`SKIPPED_VARIABLES` and
    any name holding a :data:`SECRET_WORDS` word."""
    return {
        name: value
        for name, value in sorted(environ.items())
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in VARIABLE_PATTERNS)
        and not any(fnmatch.fnmatchcase(name, pattern) for pattern in SKIPPED_VARIABLES)
        and not any(word in name.upper() for word in SECRET_WORDS)
    }


def cpu_model() -> str | None:
    """The CPU's model name: Linux's ``/proc/cpuinfo``, else what the platform says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def nvidia_gpus() -> dict[str, Any] | None:
    """The NVIDIA GPUs and their driver, through NVML (the ``nvidia-ml-py`` package); None
    where that package is not installed. A machine without a driver has ``devices: []``."""
    try:
        import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError: no driver, no library
        return {"driver": None, "devices": [], "note": str(exc)}
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            devices.append(
                {
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                }
            )
        return {
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver": pynvml.nvmlSystemGetCudaDriverVersion(),
            "devices": devices,
        }
    except Exception as exc:  # a GPU fallen off the bus: the record says so, the run goes on
        return {"driver": None, "devices": [], "note": str(exc)}
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def git_state(folder: Path, code: Path | None) -> dict[str, Any] | None:
    """The commit of the git repository holding ``folder``, whether its tracked files have
    changes (untracked ones, such as run folders inside it, do not count), whether ``code``
    is tracked at all, and its uncommitted diff alone (up to :data:`DIFF_LIMIT_BYTES`); None
    outside a repository, without git, or when git does not answer in time."""
    root = _git(folder, "rev-parse", "--show-toplevel")
    if root is None:
        return None
    commit = _git(folder, "rev-parse", "--verify", "--quiet", "HEAD") or ""
    changes = _git(folder, "status", "--porcelain", "--untracked-files=no") or ""
    state: dict[str, Any] = {
        "repository": root.strip(),
        "commit": commit.strip() or None,
        "dirty": bool(changes.strip()),
    }
    if code is not None:
        diff = _git(folder, "diff", "HEAD", "--", str(code)) or ""
        data = diff.encode()
        state["code_file"] = str(code)
        state["code_tracked"] = _git(folder, "ls-files", "--error-unmatch", str(code)) is not None
        state["code_diff"] = data[:DIFF_LIMIT_BYTES].decode(errors="ignore")
        state["code_diff_truncated"] = len(data) > DIFF_LIMIT_BYTES
    return state


def _git(folder: Path, *args: str) -> str | None:
    """git's output in ``folder``, or None when it fails, is missing or hangs."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


# --- comparing two records -----------------------------------------------------------


def flatten_environment(record: Mapping[str, Any]) -> dict[str, str]:
    """A record as ``key: text`` pairs a table can compare (``versions.numpy``,
    ``packages.keras``, ``variables.TF_NUM_INTEROP_THREADS``, ``git.commit``...), without
    what differs on every run (when it was recorded, the digest, the code's diff text).
    A record is any run folder's file, so one nested deeper than a record ever is is
    shown as its JSON text from :data:`FLAT_DEPTH` down, never walked further."""
    flat: dict[str, str] = {}
    skipped = {"recorded_at", "digest", "git.code_diff"}

    def walk(prefix: str, value: Any, depth: int) -> None:
        if prefix in skipped:
            return
        if isinstance(value, Mapping) and depth < FLAT_DEPTH:
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item, depth + 1)
        elif isinstance(value, str):
            flat[prefix] = value
        else:
            flat[prefix] = _json_text(value)

    walk("", record, 0)
    return flat


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    try:
        return json.dumps(value)
    except RecursionError:  # as deep as a JSON reader allows: nothing a record holds
        return "(nested too deeply)"


def environment_differences(
    records: Iterable[Mapping[str, Any]], ignore: Iterable[str] = ("task", "host")
) -> dict[str, list[str | None]]:
    """Every key whose value is not the same in all ``records``: the key, then each
    record's value (None where a record has no such key: a package installed in one only).
    ``ignore``: keys left out (a task's name and host differ by design)."""
    flats = [flatten_environment(record) for record in records]
    skipped = set(ignore)
    keys = sorted({key for flat in flats for key in flat} - skipped)
    return {
        key: values for key in keys if len(set(values := [flat.get(key) for flat in flats])) > 1
    }


def software(record: Mapping[str, Any]) -> dict[str, str]:
    """What a task runs, name to version, as two tasks' are compared: Python and every
    installed package (TensorFlow, Keras, NumPy and Distloop among them)."""
    versions = record.get("versions") or {}
    packages = record.get("packages") or {}
    python = {"python": str(versions["python"])} if versions.get("python") else {}
    return {**python, **{str(name): str(version) for name, version in packages.items()}}


def software_changes(
    ours: Mapping[str, str],
    theirs: Mapping[str, str],
    there: str,
    skip: Iterable[str] = (),
    joiner: str = " ",
) -> list[str]:
    """How ``ours`` (see :func:`software`) differs from ``theirs``, which runs ``there``,
    one phrase a name: ``numpy 2.1.0 (chief:0: 2.0.2)``, ``extra 1.0 (chief:0: none)``;
    ``joiner`` goes between a name and its value (``=`` for variables)."""
    skipped = set(skip)
    return [
        f"{name}{joiner}{ours.get(name) or 'none'} ({there}: {theirs.get(name) or 'none'})"
        for name in sorted((set(ours) | set(theirs)) - skipped)
        if ours.get(name) != theirs.get(name)
    ]


def shared_variables(variables: Mapping[str, str]) -> dict[str, str]:
    """The variables every task of a cluster should agree on: all of
    :func:`behaviour_variables` but those choosing a task's own devices
    (:data:`PER_TASK_VARIABLES`), which its devices' comparison covers."""
    return {
        name: value
        for name, value in variables.items()
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in PER_TASK_VARIABLES)
    }
