"""Each task's resources, its input wait and the findings they lead to, with real slowness."""

from __future__ import annotations

import csv
import json
import os
import queue
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from distloop.engine.channel import Channel
from distloop.engine.findings import INPUT_BOUND_SHARE, MIN_SAMPLED_S, Findings
from distloop.engine.loop import Executed
from distloop.engine.messages import Resources, parse_message
from distloop.engine.run_folder import SYSTEM_METRICS_FILE, TENSORBOARD_DIR, read_status
from distloop.engine.system_metrics import GpuReader, ResourceFiles, Sampler, StepClock, open_gpus
from support.distloop_testing import REPO, distloop, synthetic_project

# --- the findings, from samples (no TensorFlow) --------------------------------------------


def sample(task: str | None, at: float, *, wait: float = 0.0, held: float = 0.0) -> Resources:
    """One second of a task stepping 100 steps of 10 ms: ``wait`` and ``held`` of it lost."""
    return Resources(
        task=task,
        time=at,
        interval_s=1.0,
        step=int(at * 100),
        cpu_percent=100.0,
        rss_bytes=1 << 30,
        held_s=held,
        steps=100,
        step_s=1.0,
        input_wait_s=wait,
    )


def test_a_task_waiting_for_its_input_is_input_bound_and_said_once() -> None:
    findings = Findings()
    said = [findings.add(sample(None, t, wait=0.63)) for t in range(10)]
    assert said.count(True) == 1
    (finding,) = findings.current
    assert finding.text.startswith("input-bound: 63% of each step waits for data (try data.cache")
    assert "10.0 ms/step, 63% waiting for input" in finding.evidence
    calm = Findings()
    assert not any(calm.add(sample(None, t, wait=0.1)) for t in range(10))
    assert calm.current == []


def test_the_task_its_peers_wait_for_is_the_straggler_with_its_numbers() -> None:
    findings = Findings()
    for t in range(10):
        findings.add(sample("worker:0", t, wait=0.01))
        findings.add(sample("worker:1", t, wait=0.35, held=0.1))
    straggler = findings.straggler()
    assert straggler is not None and straggler.task == "worker:1"
    assert straggler.text == (
        "worker:1 is the straggler: its steps take 1.8x the others', 35% of it waiting for "
        "input, 10% of it held up (stopped, throttled or short of CPU)"
    )
    assert "worker:0: 10.0 ms/step, 1% waiting" in straggler.evidence
    even = Findings()
    for t in range(10):
        even.add(sample("worker:0", t, wait=0.05))
        even.add(sample("worker:1", t, wait=0.06))
    assert even.straggler() is None


# --- the sampler and its files --------------------------------------------------------------


class FakeNvml:
    """NVML's calls as ``pynvml`` makes them, for one GPU: the columns a GPU machine gets."""

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        return SimpleNamespace(gpu=87)

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        return SimpleNamespace(used=3 << 30, total=16 << 30)

    def nvmlShutdown(self) -> None:
        pass


def sampled(tmp_path: Path, gpus: GpuReader | None) -> tuple[list[Resources], list[dict]]:
    out: queue.Queue[Any] = queue.Queue()
    channel = Channel(out, "worker:0", None)
    clock = StepClock()
    sampler = Sampler(channel, clock, ResourceFiles(tmp_path), sample_s=0.2)
    sampler._gpus = gpus
    sampler.start()
    clock.after_steps(Executed(1, 4, None, None, 0.5, step_s=0.4, input_wait_s=0.1))
    deadline = time.monotonic() + 60
    messages = []
    while not messages:
        assert time.monotonic() < deadline, "no sample came"
        messages += [parse_message(m) for m in _drain(out)]
        time.sleep(0.05)
    sampler.stop(tmp_path)
    messages += [parse_message(m) for m in _drain(out)]
    with open(tmp_path / SYSTEM_METRICS_FILE, newline="", encoding="utf-8") as rows:
        return [m for m in messages if isinstance(m, Resources)], list(csv.DictReader(rows))


def _drain(out: queue.Queue[Any]) -> list[Any]:
    found = []
    while not out.empty():
        found.append(out.get_nowait())
    return found


def test_without_a_gpu_or_nvml_there_are_no_gpu_columns(tmp_path, monkeypatch) -> None:
    import pynvml  # the library is installed: NVML itself finds no driver and no GPU here

    assert pynvml.nvmlInit is not None
    assert open_gpus() is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # and without the library: the same
    assert open_gpus() is None
    samples, rows = sampled(tmp_path, open_gpus())
    first = samples[0]
    assert first.task == "worker:0" and first.gpus is None
    assert first.steps == 4 and first.step == 4 and first.input_wait_s == pytest.approx(0.1)
    assert first.rss_bytes > 0 and first.read_bytes is not None
    assert not any(column.startswith("gpu") for column in rows[0])
    assert float(rows[0]["input_wait_share"]) == pytest.approx(0.25)
    assert read_status(tmp_path)["findings"] == []


def test_each_gpu_nvml_reports_gets_its_columns(tmp_path) -> None:
    samples, rows = sampled(tmp_path, GpuReader(FakeNvml(), [(0, "handle")]))
    assert samples[0].gpus is not None and samples[0].gpus[0].utilization_percent == 87
    assert float(rows[0]["gpu0_util_percent"]) == 87
    assert float(rows[0]["gpu0_memory_mb"]) == 3 * 1024


# --- real runs: custom data code that is slow, and one that is not ---------------------------

SLOW_DATA = """
import time

import numpy as np
import tensorflow as tf

DELAY_S = {delay}


def _slowly(features, labels):
    time.sleep(DELAY_S)  # reading, decoding, augmenting: what slow data code does
    return features, labels


def build_dataset(project):
    batch = project.data.global_batch_size
    rng = np.random.default_rng(0)
    features = rng.normal(size=(batch * 64, 6)).astype("float32")
    labels = rng.integers(0, 3, size=batch * 64).astype("int64")
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch)
    if DELAY_S:
        dataset = dataset.map(
            lambda x, y: tf.numpy_function(_slowly, [x, y], (tf.float32, tf.int64))
        ).map(lambda x, y: (tf.ensure_shape(x, [batch, 6]), tf.ensure_shape(y, [batch])))
    return dataset


def train_step(step, inputs):
    features, labels = inputs
    model, optimizer = step.models["model"], step.optimizers["model"]
    with tf.GradientTape() as tape:
        per_example_loss = step.loss_object(labels, model(features, training=True))
        loss = step.average_loss(per_example_loss) + step.regularization_loss(model)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss
"""


def run_with_data_code(
    tmp_path: Path, delay_s: float, steps: int, **training: Any
) -> tuple[str, Path]:
    """A run of custom data code; a model whose step takes milliseconds, so fetching an
    element from a fast pipeline is a small part of it, as in real training."""
    code = tmp_path / f"data_{delay_s}.py"
    code.write_text(SLOW_DATA.format(delay=delay_s), encoding="utf-8")
    data = synthetic_project(1, batch=256, steps=steps, **training)
    data["custom_code"] = {"path": str(code)}
    data["data"]["examples"] = 256 * 64
    dense = {"kind": "dense", "units": 1024, "activation": "relu"}
    data["model"]["layers"] = [dense, dense, {"kind": "dense", "units": 3}]
    name = "_".join([str(delay_s), *(f"{k}_{v}" for k, v in training.items())])
    project = tmp_path / f"project_{name}.json"
    project.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / f"run_{name}"
    result = distloop("run", str(project), "--out", str(out), "--quiet", timeout_s=400)
    assert result.returncode == 0, result.stderr
    return result.stderr, out


def recorded_wait(out: Path) -> tuple[float, float]:
    """Seconds of sampled steps, and the share of their time spent waiting for input."""
    with open(out / SYSTEM_METRICS_FILE, newline="", encoding="utf-8") as rows:
        stepping = [row for row in csv.DictReader(rows) if int(row["steps"])]
    step_s = sum(float(row["step_s"]) for row in stepping)
    return step_s, sum(float(row["input_wait_s"]) for row in stepping) / step_s


@pytest.mark.slow
def test_slow_data_code_is_reported_input_bound_and_fast_data_code_is_not(tmp_path) -> None:
    said, slow = run_with_data_code(tmp_path, 0.1, steps=60)
    assert "[engine] input-bound: " in said, said
    assert "distloop: what slowed the run: input-bound: " in said
    assert read_status(slow)["findings"][0].startswith("input-bound: ")
    assert recorded_wait(slow)[1] > INPUT_BOUND_SHARE

    said, fast = run_with_data_code(tmp_path, 0.0, steps=400)
    assert "input-bound" not in said, said
    assert read_status(fast)["findings"] == []
    sampled_s, share = recorded_wait(fast)
    assert sampled_s > MIN_SAMPLED_S and share < INPUT_BOUND_SHARE  # judged, and not bound

    # TensorBoard's own reader sees the samples, on the steps' axis.
    import tensorflow as tf

    (events,) = (slow / TENSORBOARD_DIR).glob("events.out.tfevents.*.system")
    scalars: dict[str, list[tuple[int, float]]] = {}
    for event in tf.compat.v1.train.summary_iterator(str(events)):
        for value in event.summary.value:
            scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    assert {"system/cpu_percent", "system/rss_mb", "system/input_wait_share"} <= set(scalars)
    assert not any(tag.startswith("system/gpu") for tag in scalars)
    steps = [step for step, _ in scalars["system/rss_mb"]]
    assert steps == sorted(steps) and steps[-1] == 60
    assert max(share for _, share in scalars["system/input_wait_share"]) > INPUT_BOUND_SHARE


@pytest.mark.slow
def test_fused_steps_time_their_input_wait_in_the_graph_unless_determinism_forbids(
    tmp_path,
) -> None:
    """K = 5 steps per call: the wait is timed around each fetch inside the step function;
    TensorFlow refuses its clock under op determinism, and then nothing is claimed."""
    said, fused = run_with_data_code(
        tmp_path, 0.3, steps=40, steps_per_execution=5, deterministic=False
    )
    assert "[engine] input-bound: " in said, said
    assert recorded_wait(fused)[1] > INPUT_BOUND_SHARE

    said, exact = run_with_data_code(tmp_path, 0.1, steps=20, steps_per_execution=5)
    assert "input-bound" not in said, said
    with open(exact / SYSTEM_METRICS_FILE, newline="", encoding="utf-8") as rows:
        stepping = [row for row in csv.DictReader(rows) if int(row["steps"])]
    assert stepping and all(row["input_wait_s"] == "" for row in stepping)


# --- a real cluster whose worker:1 is held up from outside -----------------------------------


@pytest.mark.slow
def test_a_worker_stopped_again_and_again_is_named_the_straggler(tmp_path) -> None:
    data = synthetic_project(1, steps=1_000_000)
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    project = tmp_path / "cluster.json"
    project.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "run"
    said = tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "distloop.gui.launcher", "cluster", str(project)]
    command += ["--out", str(out), "--workers", "2", "--quiet"]
    with open(said, "w", encoding="utf-8") as stderr:
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)
    pid = None
    try:
        deadline = time.monotonic() + 300
        while "is the straggler" not in said.read_text(encoding="utf-8"):
            assert process.poll() is None, said.read_text(encoding="utf-8")
            assert time.monotonic() < deadline, said.read_text(encoding="utf-8")
            pid = pid or _stepping_pid(out, "worker:1")
            if pid is None:
                time.sleep(0.2)
                continue
            os.kill(pid, signal.SIGSTOP)  # held up from outside, as a CPU quota would
            time.sleep(0.2)
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.2)
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    text = said.read_text(encoding="utf-8")
    assert "worker:1 is the straggler: its steps take " in text, text
    assert "worker:0 is the straggler" not in text
    assert "held up (stopped, throttled or short of CPU)" in text
    top_log = (out / "engine.log").read_text(encoding="utf-8")
    assert "worker:1 is the straggler" in top_log
    assert any("worker:1 is the straggler" in f for f in read_status(out)["findings"])
    for task in ("worker-0", "worker-1"):  # every task's own record
        assert (out / "tasks" / task / SYSTEM_METRICS_FILE).stat().st_size > 0


def _stepping_pid(out: Path, task: str) -> int | None:
    """The task's pid once the run's first steps are in metrics.csv."""
    try:
        pid = read_status(out)["tasks"][task]["pid"]
        stepping = (out / "metrics.csv").stat().st_size > 200
    except (OSError, KeyError, ValueError):
        return None
    return pid if stepping else None


def test_the_samples_are_never_written_through_a_link(tmp_path) -> None:
    """A run folder may be anyone's: its files are written where they are, or not at all."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / TENSORBOARD_DIR).symlink_to(elsewhere)
    with pytest.raises(OSError, match="is a symbolic link"):
        ResourceFiles(linked)
    crafted = tmp_path / "crafted"
    crafted.mkdir()
    (crafted / SYSTEM_METRICS_FILE).symlink_to(elsewhere / "bashrc")
    files = ResourceFiles(crafted)
    with pytest.raises(OSError):
        files.write(sample(None, 1.0))
    files.close()
    assert list(elsewhere.iterdir()) == []
