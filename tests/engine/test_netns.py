"""A local cluster's private network: real namespaces, real processes, no TensorFlow."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from distloop.engine.netns import ENV_SWITCH, PrivateNetworkUnavailable, start_private_network
from support.clusters import listening_ports


def serve_on_every_interface(out: Any, release: Any) -> None:
    """What a TensorFlow task does: listen on all interfaces, then talk over loopback."""
    with socket.create_server(("0.0.0.0", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        out.put(port)
        release.wait(30)


@pytest.mark.parametrize("user_namespace", [False, True], ids=["net", "user+net"])
def test_a_task_s_ports_exist_only_in_the_private_network(user_namespace: bool) -> None:
    try:
        network = start_private_network(user_namespace=user_namespace)
    except PrivateNetworkUnavailable as exc:
        pytest.skip(f"this machine allows no private network: {exc}")
    context = multiprocessing.get_context("spawn")
    out, release = context.Queue(), context.Event()
    task = context.Process(target=serve_on_every_interface, args=(out, release))
    try:
        with network.spawning():
            task.start()
        port = out.get(timeout=30)
        inside = listening_ports(Path(f"/proc/{task.pid}/net"))
        outside = listening_ports(Path("/proc/self/net"))
    finally:
        release.set()
        task.join(10)
        network.close()
    assert task.exitcode == 0
    assert port in inside and port not in outside
    assert not network.launcher.exists()  # its temporary folder is gone
    release = context.Event()
    spawned_after = context.Process(target=serve_on_every_interface, args=(out, release))
    spawned_after.start()  # outside `spawning`: in this machine's network again
    try:
        port = out.get(timeout=30)
        assert port in listening_ports(Path("/proc/self/net"))
    finally:
        release.set()
        spawned_after.join(10)


def test_the_switch_and_a_missing_unshare_give_the_reason(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(ENV_SWITCH, "0")
    with pytest.raises(PrivateNetworkUnavailable, match=f"{ENV_SWITCH}=0 is set"):
        start_private_network()
    monkeypatch.delenv(ENV_SWITCH)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PrivateNetworkUnavailable, match="cannot run unshare: No such file"):
        start_private_network()


START_NETWORK = """
import sys, time
from distloop.engine.netns import PrivateNetworkUnavailable, start_private_network
try:
    network = start_private_network()
except PrivateNetworkUnavailable as exc:
    sys.exit(f"unavailable: {exc}")
print(network.launcher, flush=True)
if sys.argv[1] == "close":
    network.close()
else:
    time.sleep(600)
"""


def test_a_killed_launcher_s_folder_is_removed_by_the_next_start(tmp_path) -> None:
    """SIGKILL of `distloop cluster` left its distloop-netns-* folder in the temporary folder
    for good; the next start removes it (only a dead process's, only this user's)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    owner = subprocess.Popen(
        [sys.executable, "-c", START_NETWORK, "hold"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    launcher = owner.stdout.readline().strip()
    if not launcher:
        owner.wait(30)
        pytest.skip(f"this machine allows no private network: {owner.communicate()[1]}")
    os.kill(owner.pid, signal.SIGKILL)
    owner.communicate(timeout=30)
    stale = Path(launcher).parent
    assert stale.is_dir() and stale.name.startswith(f"distloop-netns-{owner.pid}-")
    alive = tmp_path / f"distloop-netns-{os.getpid()}-a1b2c3"  # its maker still runs
    alive.mkdir()
    other = tmp_path / "distloop-netns-a1b2c3"  # not named by its maker: not known to be ours
    other.mkdir()

    again = subprocess.run(
        [sys.executable, "-c", START_NETWORK, "close"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name])
