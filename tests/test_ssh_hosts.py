"""The test hosts' helper: two sets of hosts alive at once never share an address block."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.ssh_hosts import _free_block, ssh_hosts


@pytest.mark.root
def test_a_block_another_bridge_holds_is_never_handed_out() -> None:
    """Two test processes whose ids picked the same block used to route one set's traffic
    to the other's hosts; a block in use on this machine is now skipped."""
    start = os.getpid()
    wanted = _free_block(start=start)
    bridge = f"dlbt{os.getpid() % 100_000}"
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True, timeout=30)
    try:
        subprocess.run(
            ["ip", "addr", "add", f"10.253.{wanted}.1/24", "dev", bridge], check=True, timeout=30
        )
        assert _free_block(start=start) != wanted
    finally:
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=30)


def test_a_test_not_marked_sshd_cannot_start_hosts(tmp_path: Path) -> None:
    """The marker is what `-m "not sshd"` leaves out and what skips a test on a machine
    without sshd; a test that starts hosts without it is stopped before anything starts."""
    with pytest.raises(RuntimeError, match=r"@pytest\.mark\.sshd"), ssh_hosts(tmp_path, 1):
        pass
    assert list(tmp_path.iterdir()) == []
