"""Hosts for SSH tests: network namespaces on a bridge, each with its own address and its
own key-only sshd, started and torn down by the tests (root only).

Every name carries the creating process's id, so tests running side by side (or a
second checkout's) never share a namespace or a bridge; every address is in
10.253.0.0/16, inside namespaces the test made, reached through the test's own bridge.
A set's address block is claimed under a lock among the blocks no bridge holds, since
two bridges with one block would route one set's traffic to the other's hosts.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from . import needs

NEEDED = ("ip", "sshd", "ssh", "ssh-keygen")
_SETS = itertools.count()
"""Sets of hosts this process made: each gets its own names and addresses."""
_BLOCKS = range(20, 250)
_BLOCK_LOCK = Path("/run/distloop-test-address-blocks.lock")


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces and sshd need root"
    missing = [name for name in NEEDED if shutil.which(name) is None and not _sbin(name)]
    if missing:
        return f"{', '.join(missing)} not installed (iproute2, openssh-server, openssh-client)"
    return None


def _free_block(start: int) -> int:
    """A third octet of 10.253.0.0/16 that no interface here has an address in, searched
    from ``start`` on so that sets made at once seldom look at the same blocks first."""
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    taken = {int(octet) for octet in re.findall(r"inet 10\.253\.(\d+)\.", shown)}
    for step in range(len(_BLOCKS)):
        block = _BLOCKS[(start + step) % len(_BLOCKS)]
        if block not in taken:
            return block
    raise RuntimeError("every address block of 10.253.0.0/16 for test hosts is taken")


def _sbin(name: str) -> str | None:
    path = Path("/usr/sbin") / name
    return str(path) if path.exists() else None


@dataclass(frozen=True)
class SshHosts:
    addresses: list[str]
    namespaces: list[str]
    ssh_config: Path
    client_key: Path
    doors: dict[int, tuple[str, int]]
    """Per host whose sshd listens elsewhere: that address (a second one of the host's) and
    port; its TF_CONFIG address then has no sshd."""

    def ssh(self, index: int, command: str) -> subprocess.CompletedProcess:
        address, port = self.doors.get(index, (self.addresses[index], 22))
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), "-p", str(port), address, command],
            capture_output=True,
            text=True,
            timeout=30,
        )


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@contextmanager
def ssh_hosts(
    folder: Path,
    count: int,
    hidden: dict[int, Path] | None = None,
    small: dict[int, Path] | None = None,
    doors: dict[int, int] | None = None,
) -> Iterator[SshHosts]:
    """``hidden``: a folder a host does not see (an empty tmpfs over it, in a mount
    namespace of that host's sshd), as a file missing on one machine of a cluster;
    ``small``: a folder on a disk of 1 MiB there, as a host whose disk is full.
    ``doors``: hosts whose sshd listens only on a second address of theirs, on this
    port, as a machine reached by another name than its cluster's."""
    needs.require("sshd")
    folder.mkdir(parents=True, exist_ok=True)
    made_here = next(_SETS)
    tag = f"{os.getpid() % 100_000}{made_here}"
    bridge = f"dlb{tag}"
    namespaces = [f"dlh{tag}n{i}" for i in range(count)]
    made_bridge = False
    made: list[str] = []
    daemons: list[Path] = []
    try:
        with _BLOCK_LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            block = _free_block(start=os.getpid() + 37 * made_here)
            _ip("link", "add", bridge, "type", "bridge")
            made_bridge = True
            _ip("addr", "add", f"10.253.{block}.1/24", "dev", bridge)
        addresses = [f"10.253.{block}.{i + 2}" for i in range(count)]
        door_at = {i: (f"10.253.{block}.{i + 102}", port) for i, port in (doors or {}).items()}
        _ip("link", "set", bridge, "up")
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "client_key")],
            check=True,
            timeout=30,
        )
        (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        for i, (space, address) in enumerate(zip(namespaces, addresses, strict=True)):
            _ip("netns", "add", space)
            made.append(space)
            outer, inner = f"dlv{tag}h{i}", f"dlv{tag}g{i}"
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", space)
            _ip("link", "set", outer, "master", bridge)
            _ip("link", "set", outer, "up")
            _ip("-n", space, "addr", "add", f"{address}/24", "dev", inner)
            if i in door_at:
                _ip("-n", space, "addr", "add", f"{door_at[i][0]}/24", "dev", inner)
            _ip("-n", space, "link", "set", inner, "up")
            _ip("-n", space, "link", "set", "lo", "up")
            host = folder / f"host{i}"
            host.mkdir()
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host / "host_key")],
                check=True,
                timeout=30,
            )
            config = host / "sshd_config"
            config.write_text(
                "\n".join(
                    [
                        "ListenAddress {}:{}".format(*door_at.get(i, (address, 22))),
                        f"HostKey {host / 'host_key'}",
                        f"PidFile {host / 'sshd.pid'}",
                        f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                        "PubkeyAuthentication yes",
                        "PasswordAuthentication no",
                        "KbdInteractiveAuthentication no",
                        "PermitRootLogin prohibit-password",
                        "StrictModes no",
                        "UsePAM no",
                        "",
                    ]
                )
            )
            sshd = shutil.which("sshd") or _sbin("sshd") or "sshd"
            start = [sshd, "-f", str(config), "-E", str(host / "log")]
            covers = [
                f"mount -t tmpfs {options} tmpfs {shlex.quote(str(paths[i]))}"
                for paths, options in ((hidden or {}, ""), (small or {}, "-o size=1m"))
                if i in paths
            ]
            if covers:
                cover = " && ".join(covers)
                start = [
                    "unshare", "--mount", "--propagation", "private", "sh", "-c",
                    f"{cover} && exec {shlex.join(start)}",
                ]  # fmt: skip
            subprocess.run(["ip", "netns", "exec", space, *start], check=True, timeout=30)
            daemons.append(host / "sshd.pid")
        ssh_config = folder / "ssh_config"
        ssh_config.write_text(
            "".join(
                f"Host {address}\n  User root\n  IdentityFile {folder / 'client_key'}\n"
                "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
                "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
                for address in [*addresses, *(door for door, _ in door_at.values())]
            )
        )
        hosts = SshHosts(addresses, namespaces, ssh_config, folder / "client_key", door_at)
        deadline = time.monotonic() + 30
        for i in range(count):
            while hosts.ssh(i, "true").returncode != 0:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"sshd on {addresses[i]} never answered: {hosts.ssh(i, 'true')}"
                    )
                time.sleep(0.3)
        yield hosts
    finally:
        for pid_file in daemons:
            with suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), 15)
        for space in made:
            # Whatever a test left running in a host ends with it.
            pids = subprocess.run(
                ["ip", "netns", "pids", space], capture_output=True, text=True, timeout=30
            ).stdout.split()
            for pid in pids:
                with suppress(OSError, ValueError):
                    os.kill(int(pid), 9)
            subprocess.run(["ip", "netns", "del", space], capture_output=True, timeout=30)
        if made_bridge:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=30)
