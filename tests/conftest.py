"""Suite-wide guards: no test may leave a process behind."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from pathlib import Path

import pytest


def child_pids() -> set[int]:
    """Live (non-zombie) children of this test process, from /proc (Linux)."""
    me = os.getpid()
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, ppid = fields[0], int(fields[1])
        if ppid == me and state != "Z" and not _is_multiprocessing_helper(stat.parent):
            found.add(int(stat.parent.name))
    return found


def _is_multiprocessing_helper(proc: Path) -> bool:
    """multiprocessing's resource tracker lives as long as the test session, by design."""
    try:
        return b"resource_tracker" in (proc / "cmdline").read_bytes()
    except OSError:
        return False


@pytest.fixture(autouse=True)
def no_orphan_processes():
    """Fails a test that leaves a child process running (an engine, a cluster task)."""
    if not sys.platform.startswith("linux"):
        yield
        return
    before = child_pids()
    yield
    multiprocessing.active_children()  # reaps finished multiprocessing children
    deadline = time.monotonic() + 10
    left = child_pids() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        multiprocessing.active_children()
        left = child_pids() - before
    if left:
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        pytest.fail(f"the test left child processes behind: {sorted(left)}")
