"""A real single-node Slurm (munged, slurmctld, slurmd) in a temporary folder, for tests.

Each piece gets its own socket, ports, state and log files, so it never meets a Slurm
the machine runs, and everything it started is stopped again. Needs root (slurmd runs
the tasks as the submitting user) and Debian's ``slurm-wlm`` and ``munge``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import needs

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "scontrol", "sinfo")


def unavailable_reason() -> str | None:
    """Why a Slurm cannot be started here, or None."""
    if os.geteuid() != 0:
        return "starting slurmd needs root"
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed (Debian's slurm-wlm and munge)"
    return None


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return server.getsockname()[1]


@contextmanager
def single_node_slurm(folder: Path) -> Iterator[dict[str, str]]:
    """Starts the three daemons; yields the environment that points Slurm's commands at them."""
    needs.require("slurm")
    munge = folder / "munge"
    munge.mkdir(parents=True)
    munge.chmod(0o700)
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = munge / "socket"
    conf = folder / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                f"ClusterName=dl{os.getpid()}",
                "SlurmctldHost=localhost",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={sock}",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                f"StateSaveLocation={folder / 'state'}",
                f"SlurmdSpoolDir={folder / 'spool'}",
                f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
                f"SlurmdPidFile={folder / 'slurmd.pid'}",
                f"SlurmctldLogFile={folder / 'slurmctld.log'}",
                f"SlurmdLogFile={folder / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_CPU",
                "MpiDefault=none",
                "ReturnToService=2",
                "JobCompType=jobcomp/none",
                "AccountingStorageType=accounting_storage/none",
                f"NodeName=localhost CPUs={os.cpu_count()} State=UNKNOWN",
                "PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP "
                "OverSubscribe=YES",
                "",
            ]
        )
    )
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started: list[list[str]] = []
    try:
        subprocess.run(
            [
                "munged",
                "--force",
                f"--socket={sock}",
                f"--key-file={key}",
                f"--log-file={munge / 'log'}",
                f"--pid-file={munge / 'pid'}",
                f"--seed-file={munge / 'seed'}",
            ],
            check=True,
            timeout=30,
        )
        started.append(["munged", f"--socket={sock}", "--stop"])
        subprocess.run(["slurmctld", "-i"], env=env, check=True, timeout=30)
        started.append(["scontrol", "shutdown"])
        subprocess.run(["slurmd", "-N", "localhost"], env=env, check=True, timeout=30)
        deadline = time.monotonic() + 60
        while "idle" not in _sinfo(env):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Slurm node never became idle: {_sinfo(env)}")
            time.sleep(0.5)
        yield env
    finally:
        if len(started) > 1:
            _end_jobs(env)
        for command in reversed(started):
            subprocess.run(command, env=env, capture_output=True, timeout=60)
        for pid_file in ("slurmd.pid", "slurmctld.pid"):
            _wait_gone(folder / pid_file)


def _end_jobs(env: dict[str, str]) -> None:
    """Kills every job a test left (one cancelled moments ago still ends), and waits for
    them: a job's step daemon that outlives slurmctld stays behind for good."""
    jobs = subprocess.run(
        ["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=30
    ).stdout.split()
    if not jobs:
        return
    subprocess.run(["scancel", "--signal=KILL", *jobs], env=env, capture_output=True, timeout=30)
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and subprocess.run(
            ["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=30
        ).stdout.strip()
    ):
        time.sleep(0.5)


def _sinfo(env: dict[str, str]) -> str:
    return subprocess.run(
        ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=30
    ).stdout


def _wait_gone(pid_file: Path) -> None:
    """Waits for a daemon that was told to stop, and kills it if it does not."""
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, 9)


def consecutive_free_ports(count: int) -> int:
    """A base port whose next ``count`` ports are free now (tasks bind them moments later)."""
    for _ in range(50):
        with socket.create_server(("127.0.0.1", 0)) as probe:
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        try:
            held = [socket.create_server(("", base + i)) for i in range(count)]
        except OSError:
            continue
        for server in held:
            server.close()
        return base
    raise RuntimeError("no run of free ports found")
