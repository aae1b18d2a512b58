"""Warm engines (TensorFlow loaded ahead of the run) run exactly like cold ones (TensorFlow)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.messages import RunStarted
from distloop.engine.process import EngineProcess, WarmEngine
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import LOCK_FILE, RunFolderLock, read_metrics, read_status
from support.distloop_testing import run_engine, synthetic_project

pytestmark = pytest.mark.slow


def holds_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (Linux: its /proc fd links)."""
    fds = Path(f"/proc/{pid}/fd")
    return any(os.path.realpath(fds / fd) == str(path.resolve()) for fd in os.listdir(fds))


def run_holding_the_lock(engine: EngineProcess, run_dir: Path) -> tuple[bool, bool]:
    """Follows the run to its end; whether the engine held the folder lock once it started,
    and whether the lock was free again after the run."""
    engine.start()
    held = False
    try:
        while not engine.done:
            for message in engine.poll(0.5):
                if isinstance(message, RunStarted):
                    assert engine.pid is not None
                    held = holds_open(engine.pid, run_dir / LOCK_FILE)
    finally:
        engine.close()
    RunFolderLock.acquire(run_dir).release()  # raises RunFolderBusy if anyone kept it
    return held, engine.exit_code == 0


def test_same_seed_same_trace_run_after_run_warm_or_cold(tmp_path: Path) -> None:
    """Two warm engines, one run each, one after the other, and a cold engine beside them:
    the same trace (shuffled data, 2 CPU replicas: the split still happens before
    TensorFlow sets up its devices); each warm run holds its folder's lock."""
    project = load_project_data(synthetic_project(2, steps=30))
    first, second = WarmEngine(), WarmEngine()
    assert first.ready and second.ready

    def warm_runs() -> tuple[dict, dict, tuple[bool, bool]]:
        engine = EngineProcess(project, tmp_path / "first", warm=first)
        lock = run_holding_the_lock(engine, tmp_path / "first")
        assert engine.pid == first.child.pid  # the warm process ran it, no cold spawn
        after = run_engine(project, tmp_path / "second", warm=second)
        return {"pid": engine.pid}, after, lock

    with ThreadPoolExecutor(2) as pool:
        warm_future = pool.submit(warm_runs)
        cold = run_engine(project, None)
        first_pid, second_run, (held, clean_exit) = warm_future.result()

    assert held and clean_exit
    assert not first.child.is_alive() and first.child.exitcode == 0
    assert second.child.exitcode == 0 and second.child.pid != first_pid["pid"]
    assert read_status(tmp_path / "first")["status"] == "finished"
    first_losses = np.float32(read_metrics(tmp_path / "first")["loss"])
    assert second_run["started"].num_replicas == cold["started"].num_replicas == 2
    assert len(cold["losses"]) == 30
    np.testing.assert_array_equal(first_losses, cold["losses"])
    np.testing.assert_array_equal(second_run["losses"], cold["losses"])
    assert not any(log.level == "error" for log in second_run["logs"]), second_run["logs"]
