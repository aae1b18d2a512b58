"""Runs that survive: stop, kill and resume give the uninterrupted run's trace, step for step."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import struct
import time

import numpy as np
import pytest
from distloop.engine.examples import load_example
from distloop.engine.process import EngineProcess
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import read_metrics, read_status
from support.distloop_testing import (
    distloop,
    example_data,
    interrupt_after,
    run_engine,
    synthetic_project,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kill", [False, True], ids=["stopped", "sigkilled"])
def test_resumed_run_matches_the_uninterrupted_one(tmp_path, kill: bool) -> None:
    data = synthetic_project(2, steps=400, checkpoint_every=25)
    project = load_project_data(data)
    whole = run_engine(project, tmp_path / "whole")
    assert whole["terminal"].status == "finished"

    run_dir = tmp_path / "interrupted"
    interrupt_after(project, run_dir, 60, kill=kill)
    status = read_status(run_dir)["status"]
    assert status == ("failed" if kill else "stopped")
    started = read_status(run_dir)["started_at"]
    cut = read_metrics(run_dir)["step"][-1]
    assert cut < 400

    result = distloop("run", "--resume", str(run_dir), "--quiet")
    assert result.returncode == 0, result.stderr
    metrics = read_metrics(run_dir)
    assert metrics["step"] == list(range(1, 401))
    np.testing.assert_allclose(np.float32(metrics["loss"]), whole["losses"], rtol=1e-5)
    assert np.all(np.diff(metrics["elapsed_s"]) >= 0)
    assert read_status(run_dir)["status"] == "finished"
    assert read_status(run_dir)["started_at"] == started  # Started stays the first start
    assert read_status(run_dir)["resumed_at"] > started


def test_seed_example_resumes_exactly(tmp_path) -> None:
    data = example_data()
    data["training"] = {"steps": 3000, "seed": 0, "checkpoint_every": 100}
    project = load_project_data(data)
    whole = run_engine(project, None)
    run_dir = tmp_path / "seed"
    interrupt_after(project, run_dir, 150, kill=False)
    resumed = run_engine(project, run_dir, resume=True)
    assert (
        resumed["started"].first_step
        == read_status(run_dir)["last_step"] - len(resumed["steps"]) + 1
        or resumed["started"].first_step > 1
    )
    metrics = read_metrics(run_dir)
    assert metrics["step"] == list(range(1, 3001))
    np.testing.assert_allclose(np.float32(metrics["loss"]), whole["losses"], rtol=1e-5)


def test_mismatched_checkpoint_is_a_clear_error(tmp_path) -> None:
    data = synthetic_project(1, steps=5)
    run_dir = tmp_path / "run"
    assert run_engine(load_project_data(data), run_dir)["terminal"].status == "finished"
    data["model"]["layers"][0]["units"] = 9
    failed = run_engine(load_project_data(data), run_dir, resume=True)["terminal"]
    assert failed.error_type == "CheckpointError"
    assert "does not fit this project's model" in failed.message


def test_corrupt_checkpoint_is_a_clear_error(tmp_path) -> None:
    data = synthetic_project(1, steps=5)
    run_dir = tmp_path / "run"
    run_engine(load_project_data(data), run_dir)
    for shard in (run_dir / "checkpoints").glob("*.data-*"):
        shard.write_bytes(b"\0garbage")
    result = distloop("run", "--resume", str(run_dir))
    assert result.returncode == 1
    assert "CheckpointError: cannot restore" in result.stderr


def test_fused_steps_give_the_same_trace_and_every_loss(tmp_path) -> None:
    base = synthetic_project(2, steps=103, per_replica_losses=True)
    one = run_engine(load_project_data(base), None)
    fused_data = synthetic_project(2, steps=103, per_replica_losses=True, steps_per_execution=10)
    fused = run_engine(load_project_data(fused_data), tmp_path)
    assert fused["steps"] == list(range(1, 104))
    np.testing.assert_allclose(fused["losses"], one["losses"], rtol=1e-5)
    np.testing.assert_allclose(fused["replica_losses"], one["replica_losses"], rtol=1e-5)
    assert read_metrics(tmp_path)["step"] == list(range(1, 104))


def test_fused_epochs_with_a_short_last_batch(tmp_path) -> None:
    data = example_data("regression")
    data["training"]["steps_per_execution"] = 16
    fused = run_engine(load_project_data(data), None)
    data["training"]["steps_per_execution"] = 1
    plain = run_engine(load_project_data(data), None)
    assert fused["steps"] == plain["steps"] == list(range(1, 121))
    np.testing.assert_allclose(fused["losses"], plain["losses"], rtol=1e-5)


def test_seed_loss_trace_with_xla(tmp_path) -> None:
    data = example_data()
    data["training"]["jit_compile"] = True
    run = run_engine(load_project_data(data), None)
    plain = run_engine(load_example("seed"), None)
    np.testing.assert_allclose(run["losses"], plain["losses"], rtol=1e-5)


def test_short_last_batches_run_the_one_trace() -> None:
    """The step is traced once, for the dataset's element spec: its batch size is open."""
    data = example_data()
    data["data"]["examples"] = 1005
    data["training"] = {"epochs": 3, "seed": 0}
    run = run_engine(load_project_data(data), None)
    assert run["steps"] == list(range(1, 304))
    (note,) = [m.text for m in run["logs"] if "traced" in m.text]
    assert note == "the step function was traced 1 time(s)"


def tensorboard_steps(run_dir) -> set[int]:
    """The steps in the run's TensorBoard event files, read without TensorFlow.

    A TFRecord is a little-endian u64 length, a u32 CRC, the data and a u32 CRC; the
    data is an ``Event`` protocol buffer: wall_time (field 1, a double), then step
    (field 2, a varint) when it is not 0.
    """
    steps = set()
    for path in (run_dir / "tensorboard").glob("events.out.tfevents.*"):
        data, at = path.read_bytes(), 0
        while at + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, at)
            event, at = data[at + 12 : at + 12 + length], at + 16 + length
            if len(event) > 10 and event[0] == 0x09 and event[9] == 0x10:
                step, shift, i = 0, 0, 10
                while True:
                    step |= (event[i] & 0x7F) << shift
                    shift, i = shift + 7, i + 1
                    if event[i - 1] < 0x80:
                        break
                steps.add(step)
    return steps


def kill_as_a_checkpoint_lands(project, run_dir, *, after_step: int, resume: bool) -> int:
    """SIGKILLs the engine the moment a checkpoint past ``after_step`` is on disk; its step."""
    state = run_dir / "checkpoints" / "checkpoint"
    engine = EngineProcess(project, run_dir, resume=resume)
    engine.start()
    try:
        seen = state.stat().st_mtime_ns if state.exists() else None
        polled = time.monotonic()
        while True:
            assert not engine.done, "the run ended before it could be killed"
            with contextlib.suppress(OSError):
                stamp = state.stat().st_mtime_ns
                if stamp != seen:
                    seen = stamp
                    step = int(re.search(r'ckpt-(\d+)"', state.read_text())[1])
                    if step > after_step:
                        os.kill(engine.pid, signal.SIGKILL)
                        break
            if time.monotonic() - polled > 0.05:  # keeps the queue from filling up
                polled = time.monotonic()
                engine.poll(0)
        while not engine.done:
            engine.poll(0.2)
    finally:
        engine.close()
    return step


def test_kills_as_checkpoints_land_lose_no_step(tmp_path) -> None:
    """A checkpoint never reaches the disk before its steps' rows do, so resumes lose none."""
    data = synthetic_project(1, steps=100, checkpoint_every=7)
    project = load_project_data(data)
    run_dir = tmp_path / "run"
    step = 0
    for resume in (False, True):
        step = kill_as_a_checkpoint_lands(project, run_dir, after_step=step + 14, resume=resume)
        recorded = read_metrics(run_dir)["step"]
        assert recorded[-1] >= step, f"checkpoint {step} is on disk, metrics.csv ends earlier"
        assert set(range(1, step + 1)) <= tensorboard_steps(run_dir)
    finished = run_engine(project, run_dir, resume=True)
    assert finished["terminal"].status == "finished"
    assert read_metrics(run_dir)["step"] == list(range(1, 101))
