"""Suite-wide rules: no test may leave a process behind; the long tests start first."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from support import needs
from support.slurm_daemons import unavailable_reason as slurm_reason
from support.ssh_hosts import unavailable_reason as sshd_reason

NEEDS = {"root": needs.root_reason, "sshd": sshd_reason, "slurm": slurm_reason}
"""Each marker of a need, and why it is missing here (None: it is not)."""


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


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skips a test whose marked need is missing here, in one line, before its fixtures."""
    marked = frozenset(name for name in NEEDS if item.get_closest_marker(name) is not None)
    needs.entering(marked)
    for name in sorted(marked):
        if (reason := NEEDS[name]()) is not None:
            pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that declare more time than the default timeout (the .deb, fresh Debian
    roots, whole trainings, the benchmarks' quick modes) are sent to the workers first,
    the longest first, the rest in their order: two workers then end together instead
    of one finishing a ten-minute test alone at the end (longest-first scheduling). Each
    worker sorts the same collection the same way, as pytest-xdist requires."""
    default = float(config.getini("timeout") or 0)

    def declared(item: pytest.Item) -> float:
        marker = item.get_closest_marker("timeout")
        return float(marker.args[0]) if marker is not None and marker.args else default

    items.sort(key=lambda item: -declared(item) if declared(item) > default else 0.0)


class _Progress:
    """The controller's word on a long run, flushed as it goes: every :data:`EVERY`
    finished tests the clock and the minutes so far, every :data:`LONG_S` the tests
    that have been running longer than that, and each failure's name and last lines when
    it fails, so a run cut off by CI's time limit says how far it got, what it was
    waiting for and what had failed (pytest reports failures only at the end)."""

    EVERY = 100
    LONG_S = 300.0
    FAILURE_LINES = 25
    """A failure's last lines said as it happens: its assertion and where it failed, for a
    run cut off before pytest's own report at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._started = time.monotonic()
        self._done = 0
        self._running: dict[str, float] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, name="distloop-progress", daemon=True).start()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with self._lock:
            self._running[nodeid] = time.monotonic()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self._say(f"failed ({report.when}): {report.nodeid}")
            self._say_lines(report.longreprtext.splitlines()[-self.FAILURE_LINES :])
        if report.when != "teardown":
            return
        with self._lock:
            self._running.pop(report.nodeid, None)
        self._done += 1
        if self._done % self.EVERY == 0:
            self._say(f"{self._done} tests done")

    def _watch(self) -> None:
        while True:
            time.sleep(self.LONG_S)
            now = time.monotonic()
            with self._lock:
                long = [(nodeid, now - since) for nodeid, since in self._running.items()]
            for nodeid, running_s in sorted(long, key=lambda item: -item[1]):
                if running_s > self.LONG_S:
                    self._say(f"running for {running_s / 60:.0f} min: {nodeid}")

    def _say_lines(self, lines: list[str]) -> None:
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        for line in lines:
            reporter.write_line(f"    {line}")
        reporter.flush()

    def _say(self, text: str) -> None:
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        minutes = (time.monotonic() - self._started) / 60
        reporter.write("\n")  # the progress dots leave the line open
        reporter.write_line(f"[{time.strftime('%H:%M:%S')}, {minutes:.1f} min] {text}")
        reporter.flush()


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without workers)
        config.pluginmanager.register(_Progress(config), "distloop-progress")
