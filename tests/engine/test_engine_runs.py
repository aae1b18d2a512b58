"""Real engine processes running real TensorFlow: the guide's promises, checked."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from distloop.engine.examples import load_example
from distloop.engine.messages import RunFailed, RunFinished, RunStarted, StepMetrics
from distloop.engine.process import EngineProcess
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import read_metrics, read_status
from distloop.engine.run_model import RunModel
from support.distloop_testing import (
    assert_same_trace,
    example_data,
    guide_trace,
    run_engine,
    synthetic_project,
)

pytestmark = pytest.mark.slow


def test_seed_example_matches_the_hand_written_guide_program(tmp_path) -> None:
    expected = guide_trace()
    assert len(expected) == 100

    run = run_engine(load_example("seed"), tmp_path)
    assert run["terminal"].status == "finished"
    assert run["steps"] == list(range(1, 101))
    np.testing.assert_allclose(run["losses"], expected, rtol=1e-6)
    assert run["started"].strategy == "MirroredStrategy"

    on_disk = read_metrics(tmp_path)
    assert on_disk["step"] == list(range(1, 101))
    np.testing.assert_array_equal(np.float32(on_disk["loss"]), run["losses"])
    assert np.all(np.diff(on_disk["elapsed_s"]) >= 0)
    assert read_status(tmp_path)["status"] == "finished"


def test_loss_trace_does_not_depend_on_the_replica_count(tmp_path) -> None:
    """The guide's central promise: fixed global batch, 1, 2 and 4 replicas, same losses."""
    traces = {}
    for replicas in (1, 2, 4):
        data = synthetic_project(replicas, per_replica_losses=True)
        run = run_engine(load_project_data(data), tmp_path / f"x{replicas}")
        assert run["terminal"].status == "finished", run["terminal"]
        assert run["started"].num_replicas == replicas
        traces[replicas] = run["losses"]
        # per-replica losses are each replica's share: they add up to the reduced loss
        assert run["replica_losses"].shape == (60, replicas)
        np.testing.assert_allclose(run["replica_losses"].sum(axis=1), run["losses"], rtol=1e-5)
        # the window shows the run live and later from its folder: the same trace
        assert_same_trace(run["model"], RunModel.from_folder(tmp_path / f"x{replicas}"))
    assert len(traces[1]) == 60
    assert traces[1][-1] < traces[1][0]
    np.testing.assert_allclose(traces[2], traces[1], rtol=1e-5)
    np.testing.assert_allclose(traces[4], traces[1], rtol=1e-5)


def test_uneven_split_across_replicas_still_gives_the_same_trace(tmp_path) -> None:
    """30 examples over 4 replicas split 8/8/7/7: an explicit global batch keeps it exact."""
    one = run_engine(load_project_data(synthetic_project(1, batch=30, steps=40)), None)
    four = run_engine(load_project_data(synthetic_project(4, batch=30, steps=40)), tmp_path)
    assert any("not divisible by 4" in w for w in four["started"].warnings)
    np.testing.assert_allclose(four["losses"], one["losses"], rtol=1e-5)


def test_stop_request_ends_between_steps_and_keeps_the_record(tmp_path) -> None:
    project = load_project_data(synthetic_project(1, steps=1_000_000))
    engine = EngineProcess(project, tmp_path)
    engine.start()
    seen = []
    try:
        while len(seen) < 20:
            for message in engine.poll(0.5):
                seen += message.steps if isinstance(message, StepMetrics) else []
        engine.request_stop()
        messages = []
        deadline = time.monotonic() + 30
        while not engine.done and time.monotonic() < deadline:
            messages += engine.poll(0.5)
    finally:
        engine.close()
    final = messages[-1]
    assert final.type == "run_finished" and final.status == "stopped"
    recorded = read_metrics(tmp_path)["step"]
    assert recorded[-1] == final.last_step
    assert recorded == list(range(1, final.last_step + 1))
    assert read_status(tmp_path)["status"] == "stopped"
    assert engine.exit_code == 0


def test_killed_engine_is_reported_within_seconds(tmp_path) -> None:
    project = load_project_data(synthetic_project(1, steps=1_000_000))
    engine = EngineProcess(project, tmp_path)
    engine.start()
    try:
        steps = 0
        while steps < 10:
            steps += sum(len(m.steps) for m in engine.poll(0.5) if isinstance(m, StepMetrics))
        os.kill(engine.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        messages = []
        while not engine.done:
            messages += engine.poll(0.2)
        reported_after = time.monotonic() - killed_at
    finally:
        engine.close()
    failure = messages[-1]
    assert isinstance(failure, RunFailed)
    assert "SIGKILL" in failure.message
    assert "out of memory" not in failure.message  # a kill by hand is not called one
    assert failure.exit_code == -signal.SIGKILL
    assert reported_after < 3
    assert read_status(tmp_path)["status"] == "failed"
    assert len(read_metrics(tmp_path)["step"]) >= 10


def test_a_run_killed_on_request_reports_its_training_clock(tmp_path) -> None:
    """One duration for one run: a kill by the parent reports the clock of the last step
    (metrics.csv's), not the seconds since the process started, TensorFlow's start-up
    included."""
    project = load_project_data(synthetic_project(1, steps=1_000_000))
    engine = EngineProcess(project, tmp_path)
    engine.start()
    reported: list[float] = []
    try:
        while len(reported) < 10:
            reported += [
                t for m in engine.poll(0.5) if isinstance(m, StepMetrics) for t in m.elapsed_s
            ]
        engine.kill()
        messages = []
        while not engine.done:
            messages += engine.poll(0.2)
    finally:
        engine.close()
    reported += [t for m in messages if isinstance(m, StepMetrics) for t in m.elapsed_s]
    final = messages[-1]
    assert isinstance(final, RunFinished) and final.killed
    assert final.elapsed_s == reported[-1]


def test_missing_data_file_fails_with_a_clear_message(tmp_path) -> None:
    data = example_data("regression")
    data["data"] = {
        "source": "numpy",
        "path": str(tmp_path / "missing.npz"),
        "global_batch_size": 10,
    }
    run = run_engine(load_project_data(data), tmp_path / "run")
    failure = run["terminal"]
    assert isinstance(failure, RunFailed)
    assert failure.error_type == "DataError"
    assert "missing.npz" in failure.message and "data.path" in failure.message
    assert run["exit_code"] == 1
    # The message says it all: the window's log gets no traceback; engine.log keeps it.
    assert not any("Traceback" in log.text for log in run["logs"]), run["logs"]
    assert "Traceback" in (tmp_path / "run" / "engine.log").read_text()


def test_nan_loss_stops_the_run_naming_the_step(tmp_path) -> None:
    data = example_data("regression")
    data["optimizer"] = {"kind": "sgd", "learning_rate": 90.0}
    data["model"]["layers"] = [{"kind": "dense", "units": 1, "activation": "linear"}]
    run = run_engine(load_project_data(data), tmp_path)
    failure = run["terminal"]
    assert isinstance(failure, RunFailed) and failure.error_type == "NonFiniteLossError"
    assert f"at step {failure.last_step}" in failure.message
    assert not np.isfinite(run["losses"][failure.last_step - 1])
    assert np.all(np.isfinite(run["losses"][: failure.last_step - 1]))


def test_numpy_and_csv_sources_train(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 0.0], np.float32))[:, None]
    np.savez(tmp_path / "d.npz", x=x, y=y)
    header = "a,b,c,d,target"
    np.savetxt(tmp_path / "d.csv", np.hstack([x, y]), delimiter=",", header=header, comments="")
    base = example_data("regression")
    base["model"]["layers"] = [{"kind": "dense", "units": 1}]
    base["training"] = {"epochs": 2, "seed": 0}
    traces = []
    for source in (
        {"source": "numpy", "path": str(tmp_path / "d.npz")},
        {"source": "csv", "path": str(tmp_path / "d.csv"), "label_column": "target"},
    ):
        base["data"] = {**source, "global_batch_size": 50}
        run = run_engine(load_project_data(base), None)
        assert run["terminal"].status == "finished"
        assert run["steps"] == list(range(1, 9))
        traces.append(run["losses"])
    np.testing.assert_allclose(traces[0], traces[1], rtol=1e-6)


def test_run_started_reports_what_really_runs() -> None:
    data = synthetic_project(2, steps=2)
    data["strategy"] = {"kind": "one_device"}
    run = run_engine(load_project_data(data), None)
    started: RunStarted = run["started"]
    assert started.strategy == "OneDeviceStrategy" and started.num_replicas == 1
    assert started.tensorflow_version.startswith("2.")
    assert any("CPU" in d.upper() for d in started.devices)


def test_a_frozen_parent_neither_stalls_training_nor_loses_steps(tmp_path, monkeypatch) -> None:
    """The GUI reads nothing while the run trains: the engine finishes on its own, and
    the steps that did not fit the (small) queue arrive merged, every one of them."""
    import distloop.engine.child_process as child_process

    monkeypatch.setattr(child_process, "QUEUE_SIZE", 8)
    data = example_data()
    data["training"] = {"steps": 6000, "seed": 0, "steps_per_execution": 20}
    engine_process = EngineProcess(load_project_data(data), tmp_path)
    engine_process.start()
    try:
        deadline = time.monotonic() + 120
        while (status := _status(tmp_path)) != "finished":
            assert status != "failed", (tmp_path / "engine.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "training stalled while nobody read its messages"
            time.sleep(0.2)
        steps, batches = [], 0
        while not engine_process.done:
            for message in engine_process.poll(0.5):
                if message.type == "step_metrics":
                    steps += message.steps
                    batches += 1
    finally:
        engine_process.close()
    assert steps == list(range(1, 6001))
    assert batches <= 8 + 1
    assert read_metrics(tmp_path)["step"] == steps


def _status(run_dir) -> str | None:
    try:
        return read_status(run_dir)["status"]
    except (OSError, ValueError):
        return None


def test_the_end_of_a_run_is_handed_out_before_the_engine_process_exits(tmp_path) -> None:
    """The window shows Finished when the engine's last message arrives; the process's exit
    (closing its files, TensorFlow's teardown, here held up by a child writing to its
    output) is waited for afterwards, in ``close``."""
    step = tmp_path / "step.py"
    step.write_text(
        "import subprocess\n"
        "subprocess.Popen(['sleep', '4'])  # holds the engine's captured output open\n"
        "from distloop.engine.tf.user_code import guide_train_step as train_step\n",
        encoding="utf-8",
    )
    data = example_data("seed")
    data["custom_code"] = {"path": str(step)}
    engine = EngineProcess(load_project_data(data), tmp_path / "run")
    engine.start()
    try:
        while not engine.done:
            engine.poll(0.5)
        assert engine.exit_code is None  # the process is still finishing: not waited for
    finally:
        engine.close()
    assert engine.exit_code == 0
