"""Every strategy kind this machine can run, the devices a project names, and TF_CONFIG.

The runs are the real ``distloop run`` command; the device-name rules are checked
in-process against device lists of machines with GPUs, which CI does not have.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import tensorflow as tf
from distloop.engine.config import StrategyConfig
from distloop.engine.tf.strategy import DeviceError, build_strategy, missing_devices
from support.distloop_testing import distloop, example_data

GPU_MACHINE = ["/device:CPU:0", "/device:GPU:0", "/device:GPU:1"]


@pytest.mark.parametrize(
    "requested",
    [
        ["/gpu:0"],
        ["/device:GPU:0", "/GPU:1"],
        ["gpu:1", "/cpu:0"],
        ["/job:localhost/replica:0/task:0/device:GPU:1"],
    ],
)
def test_every_spelling_of_a_present_device_is_found(requested: list[str]) -> None:
    assert missing_devices(requested, GPU_MACHINE) == []


def test_devices_of_other_indexes_types_or_machines_are_missing() -> None:
    requested = ["/gpu:2", "/device:TPU:0", "/job:worker/task:1/device:GPU:0", "/cpu:1", "/gpu:0"]
    assert missing_devices(requested, GPU_MACHINE) == requested[:-1]
    assert missing_devices(["/cpu:1"], ["/device:CPU:0", "/device:CPU:1"]) == []


def _losses(stdout: str) -> list[str]:
    return re.findall(r"^step=\d+ loss=(\S+)$", stdout, re.MULTILINE)


def _seed(tmp_path: Path, strategy: dict) -> Path:
    data = example_data("seed")
    data["strategy"] = strategy
    data["training"] = {"steps": 4, "seed": 0}
    path = tmp_path / f"{strategy['kind']}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_kinds_without_a_cluster_train_alike_and_ignore_an_invalid_tf_config(tmp_path) -> None:
    """default and one_device give the mirrored single-replica trace.

    A TF_CONFIG that is not even JSON is in the environment: none of these
    strategies uses one, so it must not reach TensorFlow's resolvers.
    """
    env = {**os.environ, "TF_CONFIG": "not json"}
    traces = {}
    for kind in ("mirrored", "default", "one_device"):
        project = _seed(tmp_path, {"kind": kind})
        result = distloop("run", str(project), "--out", str(tmp_path / kind), env=env)
        assert result.returncode == 0, f"{kind}: {result.stderr}"
        traces[kind] = _losses(result.stdout)
    assert len(traces["mirrored"]) == 4
    assert traces["default"] == traces["mirrored"]
    assert traces["one_device"] == traces["mirrored"]


@pytest.mark.slow
def test_a_device_this_machine_lacks_fails_the_run_at_once(tmp_path) -> None:
    """Soft placement used to run /gpu:0's replica on the CPU; several missing GPUs hung."""
    project = _seed(tmp_path, {"kind": "mirrored", "devices": ["/gpu:0"]})
    result = distloop("run", str(project), "--out", str(tmp_path / "run"), timeout_s=90)
    assert result.returncode == 1
    assert (
        "the run failed: DeviceError: strategy.devices: /gpu:0 is not on this machine, "
        "which has /device:CPU:0" in result.stderr
    )
    assert _losses(result.stdout) == []


def test_a_tpu_strategy_without_a_tpu_is_one_line() -> None:
    if tf.config.list_physical_devices("TPU"):
        pytest.skip("this machine has a TPU")
    with pytest.raises(DeviceError, match=r"^strategy\.tpu: this machine has no TPU \(it has "):
        build_strategy(StrategyConfig(kind="tpu", tpu="local"))


def test_an_invalid_tf_config_for_a_cluster_run_fails_without_a_traceback(tmp_path) -> None:
    """Multi-worker runs do read TF_CONFIG from the environment, so it is checked there."""
    project = _seed(tmp_path, {"kind": "multi_worker_mirrored"})
    for task in ([], ["--task", "worker:0"]):
        result = distloop("run", str(project), *task, env={**os.environ, "TF_CONFIG": "not json"})
        assert result.returncode == 1
        assert result.stderr.startswith("distloop: TF_CONFIG") and "not valid JSON" in result.stderr
        assert "Traceback" not in result.stderr and "JSONDecodeError" not in result.stderr
