"""SIGTERM to one task of a multi-worker cluster: every task stops at one step, and it resumes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from distloop.engine.cluster import LocalCluster
from distloop.engine.messages import Log, RunFailed, RunFinished, StepMetrics
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import TENSORBOARD_DIR, read_eval, read_metrics, read_status
from support.distloop_testing import REPO, distloop, run_engine, synthetic_project

pytestmark = pytest.mark.slow

STEPS = 500
FUSED = 5
EVERY = 10
CLI = [sys.executable, "-m", "distloop.gui.launcher"]


def cluster_project(kind: str = "multi_worker_mirrored") -> dict:
    """Shuffled, regularized, checkpointed every 25 steps, 5 steps fused per call,
    evaluated every 10 steps on a held-out quarter."""
    data = synthetic_project(1, steps=STEPS, checkpoint_every=25, steps_per_execution=FUSED)
    data["name"] = "preemption test"
    data["strategy"] = {"kind": kind}
    data["evaluation"] = {"every": EVERY, "split": 0.25}
    return data


def test_sigterm_to_one_worker_stops_every_task_at_one_step_and_the_run_resumes(
    tmp_path,
) -> None:
    run_dir = tmp_path / "cluster"
    cluster = LocalCluster(load_project_data(cluster_project()), run_dir)
    cluster.start()
    terminal, signalled_at = None, None
    try:
        deadline = time.monotonic() + 180
        while not cluster.done:
            assert time.monotonic() < deadline, "the cluster run timed out"
            for message in cluster.poll(0.2):
                if isinstance(message, StepMetrics) and signalled_at is None:
                    if message.steps[-1] >= 30:  # past the first periodic checkpoint
                        pid = next(t.pid for t in cluster.tasks() if t.name == "worker:1")
                        os.kill(pid, signal.SIGTERM)
                        signalled_at = time.monotonic()
                elif isinstance(message, RunFinished | RunFailed):
                    terminal = message
        stopped_after = time.monotonic() - (signalled_at or 0)
    finally:
        cluster.close()

    assert signalled_at is not None, f"the run ended before the signal: {terminal}"
    assert isinstance(terminal, RunFinished) and terminal.status == "stopped", terminal
    assert stopped_after < 20, f"took {stopped_after:.1f} s"
    step = terminal.last_step
    assert 30 <= step < STEPS and step % FUSED == 0
    assert {t.name: t.state for t in cluster.tasks()} == {
        "worker:0": "stopped",
        "worker:1": "stopped",
    }
    tasks = run_dir / "tasks"
    for task in ("worker-0", "worker-1"):
        status = read_status(tasks / task)
        assert (status["status"], status["last_step"]) == ("stopped", step), task
    assert read_status(run_dir)["status"] == "stopped"
    assert read_metrics(run_dir)["step"][-1] == step
    assert (tasks / "worker-0" / "checkpoints" / f"ckpt-{step}.index").exists()
    # only the chief keeps checkpoints; every task keeps its own resource samples
    kept = sorted(p.name for p in (tasks / "worker-1").iterdir() if p.is_dir())
    assert kept == [TENSORBOARD_DIR], kept

    single = distloop("run", "--resume", str(run_dir))
    assert single.returncode == 2 and "distloop cluster --resume" in single.stderr

    resumed = distloop("cluster", "--resume", str(run_dir), "--quiet")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    metrics = read_metrics(run_dir)
    assert metrics["step"] == list(range(1, STEPS + 1))
    whole = run_engine(load_project_data(cluster_project("one_device")), None)
    np.testing.assert_allclose(np.float32(metrics["loss"]), whole["losses"], rtol=1e-5)
    assert np.all(np.diff(metrics["elapsed_s"]) >= 0)
    assert read_status(run_dir)["status"] == "finished"
    for task in ("worker-0", "worker-1"):
        assert read_status(tasks / task)["status"] == "finished"
    # The top level has the chief's evaluations too, cut back and continued like its trace
    # (it had no eval.csv: the launcher kept only the steps).
    evaluations = read_eval(run_dir)
    assert evaluations == read_eval(tasks / "worker-0")
    assert evaluations["step"] == list(range(EVERY, STEPS + 1, EVERY))
    expected = [e.metrics["val_loss"] for e in whole["evals"]]
    np.testing.assert_allclose(np.float32(evaluations["val_loss"]), expected, rtol=1e-5)


def test_max_restarts_starts_the_cluster_again_after_a_worker_dies(tmp_path) -> None:
    """SIGKILL of worker 1 mid-run: with --max-restarts the whole cluster starts again
    from its last checkpoint and ends with the trace of the uninterrupted run."""
    project = tmp_path / "project.json"
    project.write_text(json.dumps(cluster_project()))
    run_dir = tmp_path / "cluster"
    command = [*CLI, "cluster", str(project), "--out", str(run_dir), "--quiet",
               "--max-restarts", "1"]  # fmt: skip
    launcher = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (run_dir / "metrics.csv").exists() or len(read_metrics(run_dir)["step"]) < 30:
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the cluster never reached step 30"
            time.sleep(0.2)
        os.kill(read_status(run_dir)["tasks"]["worker:1"]["pid"], signal.SIGKILL)
        _, err = launcher.communicate(timeout=300)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 0, err[-3000:]
    assert "worker:1 failed: restart 1 of 1, the whole cluster from its last checkpoint" in err
    metrics = read_metrics(run_dir)
    assert metrics["step"] == list(range(1, STEPS + 1))
    whole = run_engine(load_project_data(cluster_project("one_device")), None)
    np.testing.assert_allclose(np.float32(metrics["loss"]), whole["losses"], rtol=1e-5)
    status = read_status(run_dir)
    assert (status["status"], status["restarts"]) == ("finished", 1)


def test_dump_names_the_task_that_is_not_where_its_peers_wait(tmp_path) -> None:
    """A running 2-worker cluster with worker 1 stopped (SIGSTOP): ``distloop cluster
    --dump`` gets worker 0's stacks into its folder and names worker 1 as the one that
    did not answer; the cluster then goes on and finishes."""
    data = cluster_project()
    data["training"]["steps"] = 3000
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    run_dir = tmp_path / "cluster"
    launcher = subprocess.Popen(
        [*CLI, "cluster", str(project), "--out", str(run_dir), "--quiet"],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (run_dir / "metrics.csv").exists() or len(read_metrics(run_dir)["step"]) < 20:
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the cluster never reached step 20"
            time.sleep(0.2)
        worker = read_status(run_dir)["tasks"]["worker:1"]["pid"]
        os.kill(worker, signal.SIGSTOP)
        try:
            dumped = distloop("cluster", "--dump", str(run_dir), timeout_s=60)
        finally:
            os.kill(worker, signal.SIGCONT)
        launcher.send_signal(signal.SIGINT)
        launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout.splitlines()[0].startswith("worker:1 did not answer: it is stopped")
    stacks = (run_dir / "tasks" / "worker-0" / "stacks.txt").read_text()
    assert "most recent call first" in stacks and "child_main.py" in stacks
    assert read_status(run_dir)["status"] == "stopped"


def test_a_cluster_without_steps_for_a_while_says_where_each_task_stands(tmp_path) -> None:
    """Worker 1 stopped (SIGSTOP) mid-run: after the quiet time the launcher has every
    task dump its stacks and logs, in one line, that worker 1 did not answer."""
    data = cluster_project()
    data["training"]["steps"] = 3000
    cluster = LocalCluster(load_project_data(data), tmp_path / "cluster")
    cluster.quiet_dump_s = 3.0
    cluster.start()
    said, stopped = None, None
    try:
        deadline = time.monotonic() + 240
        while not cluster.done:
            assert time.monotonic() < deadline, "the cluster run timed out"
            for message in cluster.poll(0.2):
                if isinstance(message, StepMetrics) and stopped is None and message.steps[-1] > 30:
                    stopped = next(t.pid for t in cluster.tasks() if t.name == "worker:1")
                    os.kill(stopped, signal.SIGSTOP)
                elif (
                    isinstance(message, Log)
                    and message.text.startswith("no step for")
                    and stopped is not None  # not a pause of a loaded machine before it
                ):
                    said = message.text
                    os.kill(stopped, signal.SIGCONT)
                    cluster.request_stop()
    finally:
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):  # it may have stopped already
                os.kill(stopped, signal.SIGCONT)
        cluster.close()
    assert said is not None
    assert "worker:1 did not answer: it is stopped, or stuck outside Python" in said
    assert "tasks/*/stacks.txt" in said
    assert "stacks.txt" in (tmp_path / "cluster" / "engine.log").read_text()
