"""A local cluster's private network: real namespaces, real processes, no TensorFlow."""

from __future__ import annotations

import multiprocessing
import socket
from pathlib import Path
from typing import Any

import pytest
from distloop.engine.netns import ENV_SWITCH, PrivateNetworkUnavailable, start_private_network
from test_cluster import listening_ports


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
