"""Pre-flight: what would make a cluster on real hosts hang, found before anything starts.

TensorFlow's tasks wait for each other without a word: a firewalled port, ``localhost``
in a multi-host TF_CONFIG, a host whose TensorFlow or device count differs, or a data
file missing on one host shows up as a cluster that never takes its first step. Here
every host is asked over SSH (``distloop preflight --probe``) for its versions (from
the installed packages' metadata, without importing TensorFlow; the packages Distloop
and TensorFlow need, each compared with the first host's), the data paths and
free disk, and whether its task's port is free; then every task listens on its real
port for a moment while every other task connects to it, so a port that cannot be
reached is named as the exact pair that fails. One finding a line, with its host and
field.

Counting a host's devices means starting TensorFlow there (seconds): ``distloop
preflight`` does (``devices``), ``distloop launch`` does not, since its tasks say
their devices as their strategies exist and the launcher compares them before the
first collective (``engine.cluster.devices``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import ipaddress
import json
import platform
import select
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Project
from ..exports.storage import local_paths
from ..memory_estimate import bytes_text, memory_estimate
from ..message_stream import ControlChannel
from ..run_environment import (
    TENSORFLOW_DISTRIBUTIONS,
    installed_packages,
    required_packages,
    software_changes,
)
from ..tf_config import TaskSpec, TFConfig, parse_address
from .ssh import SshLaunch

LISTEN_S = 30.0
"""How long each task's port listens while the others connect to it."""
LISTEN_START_S = 60.0
"""How long the check waits for every task's listener to say it listens (a Python's
start on its host: seconds): a host whose Distloop hangs is a finding, not a check that
never ends."""
CONNECT_TIMEOUT_S = 3.0
LISTENING = "listening"
RUN_FOLDER_MARGIN_BYTES = 64 * 2**20
"""A task's engine.log, metrics.csv and status beside its checkpoints, with room to spare."""


Progress = Callable[[int, int, str], None]
"""Steps done, steps in all, what is being checked now: a window shows it as it goes."""


@dataclass(frozen=True)
class Finding:
    """One thing that would stop or hang the cluster, where it is, and the fix.

    ``message`` is the whole line's text after host and field; ``fix``, when there is
    one, is its end (what to do), kept apart so a window can show it in its own column.
    """

    host: str
    field: str
    message: str
    fix: str = ""

    @property
    def what(self) -> str:
        """The message without its fix."""
        if self.fix and self.message.endswith(self.fix):
            return self.message[: -len(self.fix)].rstrip(" :;")
        return self.message

    def __str__(self) -> str:
        return f"{self.host}: {self.field}: {self.message}"


# --- what runs on each host ------------------------------------------------------------


def probe(paths: list[str], ports: list[int], folder: str, *, devices: bool) -> dict[str, Any]:
    """This host's side of the pre-flight, as one JSON-ready dict (runs on the host)."""
    tensorflow = next(
        (version for name in TENSORFLOW_DISTRIBUTIONS if (version := _installed(name))), None
    )
    found: dict[str, Any] = {
        "distloop": __version__,
        "python": platform.python_version(),
        "tensorflow": tensorflow,
        "packages": required_packages(installed_packages()),
        "paths": {path: _path_size(Path(path)) for path in paths},
        "ports": {str(port): _port_free(port) for port in ports},
        "free_bytes": _free_bytes(Path(folder).expanduser()),
    }
    if devices:
        from ..devices import detect_devices

        try:
            detected = detect_devices()
            found["devices"] = sorted(d.device_type for d in detected.devices)
        except (TimeoutError, RuntimeError) as exc:
            found["devices_error"] = str(exc)
    return found


def _installed(distribution: str) -> str | None:
    """The version pip recorded for ``distribution``, without importing it."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _path_size(path: Path) -> int | None:
    """Bytes of a file, or of every file below a folder; None when it is not there."""
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return None


def _port_free(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_server(("", port)):
        return True
    return False


def _free_bytes(folder: Path) -> int | None:
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return shutil.disk_usage(candidate).free
    return None


def listen(port: int, seconds: float) -> None:
    """Accepts connections on ``port`` for ``seconds``, or until standard input ends (the
    check that started it over ssh is done, or gone): runs on the host."""
    channel = ControlChannel()
    with socket.create_server(("", port)) as server:
        server.settimeout(0.2)
        print(LISTENING, flush=True)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not channel.closed.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                connection, _ = server.accept()
                connection.close()


def connect(addresses: list[str]) -> dict[str, dict[str, Any]]:
    """Whether each ``host:port`` answers from here, and the address its name resolved to."""
    results: dict[str, dict[str, Any]] = {}
    for address in addresses:
        host, port = parse_address(address)
        try:
            ip = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0]
        except OSError as exc:
            results[address] = {"ok": False, "ip": None, "error": f"does not resolve: {exc}"}
            continue
        try:
            with socket.create_connection((ip, port), timeout=CONNECT_TIMEOUT_S):
                results[address] = {"ok": True, "ip": ip, "error": None}
        except OSError as exc:
            reason = "timed out (a firewall drops it?)" if isinstance(exc, TimeoutError) else exc
            results[address] = {"ok": False, "ip": ip, "error": str(reason)}
    return results


# --- the launcher's side ---------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """``localhost`` and loopback addresses: a name that means each machine itself."""
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def preflight(
    project: Project,
    config: TFConfig,
    hosts: SshLaunch,
    progress: Progress | None = None,
    *,
    devices: bool = True,
) -> list[Finding]:
    """Every finding, host by host; empty when the cluster can start. ``progress`` is told
    each step (a host's answer, a task's port listening, a task's connections), from the
    thread that runs the check. ``devices``: also compare the devices a multi-worker
    strategy would see on each host (TensorFlow started on every one)."""
    count_devices = devices and project.strategy.kind == "multi_worker_mirrored"
    tasks = config.tasks()
    host_of = {str(t): parse_address(config.address(t))[0] for t in tasks}
    names = list(dict.fromkeys(host_of.values()))
    total = len(names) + 2 * len(tasks)
    done = 0

    def step(text: str, advance: int = 1) -> None:
        nonlocal done
        done += advance
        if progress is not None:
            progress(done, total, text)

    loopback_fix = "write the host's network name or address"
    findings = [
        Finding(
            host,
            "tf_config",
            "a loopback name in a cluster of several hosts: each task "
            f"would reach itself; {loopback_fix}",
            loopback_fix,
        )
        for host in names
        if len(names) > 1 and is_loopback(host)
    ]
    if findings:
        return findings
    fields = {path: field for field, path in local_paths(project) if field != "custom_code.path"}
    paths = sorted(fields)
    reports: dict[str, dict[str, Any]] = {}

    def ask(host: str) -> dict[str, Any] | Finding:
        ports = [parse_address(config.address(t))[1] for t in tasks if host_of[str(t)] == host]
        command = (
            f"{hosts.command(host)} preflight --probe --folder {shlex.quote(hosts.folder(host))}"
            + "".join(f" --path {shlex.quote(p)}" for p in paths)
            + "".join(f" --port {port}" for port in ports)
            + (" --devices" if count_devices else "")
        )
        try:
            return json.loads(hosts.run(host, command))
        except OSError as exc:
            return Finding(host, "ssh", str(exc).removeprefix(f"{host}: "))
        except ValueError:
            return Finding(host, "distloop", f"{hosts.command(host)} is not Distloop")

    # Every host at once: each answer takes a Python's start there, a device count seconds.
    asked = "versions, devices, data" if count_devices else "versions, data"
    step(f"asking {len(names)} host(s) over ssh: {asked}, disk, ports", 0)
    with ThreadPoolExecutor(max_workers=min(len(names), 32)) as pool:
        for host, answer in zip(names, pool.map(ask, names), strict=True):
            step(f"{host} answered")
            if isinstance(answer, Finding):
                findings.append(answer)
            else:
                reports[host] = answer
    findings += _compare(reports, project, fields)
    findings += _disk(reports, project, hosts, host_of)
    if not findings:
        findings += _all_pairs(config, hosts, host_of, step)
    return findings


def _disk(
    reports: dict[str, dict[str, Any]],
    project: Project,
    hosts: SshLaunch,
    host_of: dict[str, str],
) -> list[Finding]:
    """A host whose disk cannot hold its tasks' run folders. Each folder keeps three
    checkpoints, writes a fourth, and a ``model.keras``, each the weights and the
    optimizer's slots: five times what the run holds of weights, gradients and slots
    (``memory_estimate``) covers them; its logs and metrics fit in
    :data:`RUN_FOLDER_MARGIN_BYTES`."""
    per_task = 5 * memory_estimate(project).parameters + RUN_FOLDER_MARGIN_BYTES
    findings: list[Finding] = []
    for host, report in reports.items():
        free = report.get("free_bytes")
        needed = per_task * sum(1 for name in host_of.values() if name == host)
        if isinstance(free, int) and free < needed:
            fix = "free some space there, or put the runs on another disk (--remote-dir)"
            findings.append(
                Finding(
                    host,
                    "disk",
                    f"{bytes_text(free)} free under {hosts.folder(host)}, its tasks' run folders "
                    f"need about {bytes_text(needed)}: {fix}",
                    fix,
                )
            )
    return findings


def _compare(
    reports: dict[str, dict[str, Any]], project: Project, fields: dict[str, str]
) -> list[Finding]:
    findings: list[Finding] = []
    if not reports:
        return findings
    first_host, first = next(iter(reports.items()))
    for host, report in reports.items():
        for key, what in (("distloop", "Distloop"), ("python", "Python"), ("tensorflow", "TF")):
            if report.get(key) is None and key == "tensorflow":
                findings.append(Finding(host, key, "TensorFlow is not installed"))
            elif report.get(key) != first.get(key):
                fix = "install the same version on every host"
                findings.append(
                    Finding(
                        host,
                        key,
                        f"{what} {report.get(key)} here, {first.get(key)} on {first_host}: {fix}",
                        fix,
                    )
                )
        # A Distloop before this comparison sends no packages: its version is the finding.
        changes = (
            software_changes(
                report["packages"],
                first["packages"],
                first_host,
                skip=(*TENSORFLOW_DISTRIBUTIONS, "distloop"),  # compared above
            )
            if isinstance(report.get("packages"), dict) and isinstance(first.get("packages"), dict)
            else []
        )
        if changes:
            fix = "install the same versions on every host"
            findings.append(Finding(host, "packages", f"{'; '.join(changes)}: {fix}", fix))
        for path, size in report.get("paths", {}).items():
            field = fields.get(path, "data.path")
            if size is None:
                fix = "copy it to this host"
                findings.append(Finding(host, field, f"{path} is not there: {fix}", fix))
            elif first["paths"].get(path) not in (None, size):
                fix = "the same data on every host"
                findings.append(
                    Finding(
                        host,
                        field,
                        f"{path} has {size} bytes, {first_host}'s has "
                        f"{first['paths'][path]}: {fix}",
                        fix,
                    )
                )
        for port, free in report.get("ports", {}).items():
            if not free:
                findings.append(Finding(host, "tf_config", f"port {port} is in use on this host"))
        if "devices_error" in report:
            findings.append(Finding(host, "devices", report["devices_error"]))
        elif project.strategy.kind == "multi_worker_mirrored" and report.get(
            "devices"
        ) != first.get("devices"):
            fix = "multi_worker_mirrored needs the same devices on every worker"
            findings.append(
                Finding(
                    host,
                    "devices",
                    f"{report.get('devices')} here, {first.get('devices')} on {first_host}: {fix}",
                    fix,
                )
            )
    return findings


def _all_pairs(
    config: TFConfig, hosts: SshLaunch, host_of: dict[str, str], step: Callable[[str], None]
) -> list[Finding]:
    """Every task listens on its real port; every other task connects to it. All at once:
    each listener and each connecting side is a Python started over ssh (a second or so)."""
    tasks = config.tasks()
    listeners: list[subprocess.Popen[str]] = []
    try:
        for task in tasks:
            host = host_of[str(task)]
            _, port = parse_address(config.address(task))
            command = f"{hosts.command(host)} preflight --listen {port} --seconds {LISTEN_S:g}"
            listeners.append(
                subprocess.Popen(
                    hosts.ssh(host, command),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            )
        findings: list[Finding] = []
        deadline = time.monotonic() + LISTEN_START_S
        for task, listener in zip(tasks, listeners, strict=True):
            host = host_of[str(task)]
            _, port = parse_address(config.address(task))
            step(f"{task} listens on port {port} on {host}")
            said = _first_line(listener, deadline)
            if said is None:
                findings.append(
                    Finding(
                        host,
                        "distloop",
                        f"{hosts.command(host)} started no listener for {task} on port {port} "
                        f"within {LISTEN_START_S:g} s: it hangs there, or starts too slowly",
                    )
                )
            elif said != LISTENING:
                findings.append(Finding(host, "tf_config", f"{task} cannot listen on {port}"))
        if findings:
            return findings
        sources = tasks if len(tasks) > 1 else []
        with ThreadPoolExecutor(max_workers=max(1, min(len(sources), 32))) as pool:
            answers = pool.map(lambda t: _connect_from(config, hosts, host_of, t), sources)
            resolved: dict[str, dict[str, str | None]] = {}
            for source, answer in zip(sources, answers, strict=True):
                host = host_of[str(source)]
                step(f"{source} connected to every other task")
                if isinstance(answer, Finding):
                    findings.append(answer)
                    continue
                for target, result in answer.items():
                    resolved.setdefault(target, {})[host] = result["ip"]
                    if not result["ok"]:
                        fix = "open that port on its host for this one"
                        findings.append(
                            Finding(
                                host,
                                "tf_config",
                                f"{source} cannot reach {_task_at(config, target)} at "
                                f"{target}: {result['error']}; {fix}",
                                fix,
                            )
                        )
        for target, seen in resolved.items():
            if len({ip for ip in seen.values() if ip}) > 1:
                views = ", ".join(f"{ip} from {host}" for host, ip in seen.items())
                findings.append(
                    Finding(
                        target.rsplit(":", 1)[0],
                        "tf_config",
                        f"the name resolves differently on the hosts: {views}",
                    )
                )
        return findings
    finally:
        for listener in listeners:  # the end of its input ends it on its host
            assert listener.stdin is not None
            listener.stdin.close()
        for listener in listeners:
            try:
                listener.wait(timeout=10)
            except subprocess.TimeoutExpired:
                listener.terminate()
                listener.wait()


def _first_line(process: subprocess.Popen[str], deadline: float) -> str | None:
    """The first line ``process`` prints (empty once it ended without one); None when it
    has printed none by ``deadline``."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
    return process.stdout.readline().strip() if ready else None


def _connect_from(
    config: TFConfig, hosts: SshLaunch, host_of: dict[str, str], source: TaskSpec
) -> dict[str, dict[str, Any]] | Finding:
    """What ``source``'s host answers when it connects to every other task."""
    host = host_of[str(source)]
    others = [config.address(t) for t in config.tasks() if t != source]
    command = f"{hosts.command(host)} preflight --connect " + " ".join(
        shlex.quote(a) for a in others
    )
    try:
        return json.loads(hosts.run(host, command))
    except (OSError, ValueError) as exc:
        return Finding(host, "ssh", str(exc))


def _task_at(config: TFConfig, address: str) -> TaskSpec | str:
    return next((t for t in config.tasks() if config.address(t) == address), address)


def probe_main(args: Any) -> int:
    """``distloop preflight --probe/--listen/--connect``: the host's side, JSON on stdout."""
    if args.listen is not None:
        listen(args.listen, args.seconds)
    elif args.connect:
        print(json.dumps(connect(args.connect)))
    else:
        print(json.dumps(probe(args.path, args.port, args.folder, devices=args.devices)))
    return 0
