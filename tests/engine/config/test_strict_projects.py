"""Values that used to validate and then fail at run time: each is refused with its path now.

Pure Python (no TensorFlow): the exact values from issue 12 are regression cases.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from distloop.engine.config import canonical_device
from distloop.engine.examples import load_example
from distloop.engine.memory_check import (
    _headroom,
    available_memory_bytes,
    loaded_file_bytes,
    memory_problems,
)
from distloop.engine.memory_estimate import MAX_PROJECT_BYTES, memory_estimate
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project, load_project_data, load_project_text
from support.distloop_testing import example_data


def problems_of(data: dict) -> dict[str, str]:
    with pytest.raises(ProblemsError) as caught:
        load_project_data(data)
    return {p.path: p.message for p in caught.value.problems}


def text_problems(text: str) -> dict[str, str]:
    with pytest.raises(ProblemsError) as caught:
        load_project_text(text)
    return {p.path: p.message for p in caught.value.problems}


def test_infinity_and_nan_tokens_are_refused_with_their_path() -> None:
    text = json.dumps(example_data()).replace('"l2": 0.0001', '"l2": Infinity')
    assert "Infinity" in text
    found = text_problems(text)
    assert "finite" in found["model.layers.0.kernel_regularizer.l2"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("data", "features", 0), math.nan),
        (("data", "labels", 0), -math.inf),
        (("model", "layers", 0, "kernel_initializer"), {"kind": "constant", "value": math.nan}),
        (
            ("model", "layers", 0, "kernel_initializer"),
            {"kind": "random_normal", "stddev": math.inf},
        ),
        (("loss",), {"kind": "huber", "delta": math.nan}),
        (("optimizer", "learning_rate"), math.nan),
        (("strategy", "communication_timeout_s"), math.inf),
    ],
)
def test_non_finite_floats_are_refused_everywhere(path: tuple, value: object) -> None:
    data = example_data()
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    found = problems_of(data)
    assert any("finite number" in message for message in found.values()), found


@pytest.mark.parametrize("examples", ["100000000000000000000", "1e20", "1000000000001"])
def test_absurd_constant_example_counts_are_refused(examples: str) -> None:
    text = json.dumps(example_data()).replace('"examples": 1000', f'"examples": {examples}')
    assert "data.examples" in text_problems(text)


def test_epochs_that_make_more_steps_than_a_run_can_have_are_refused() -> None:
    data = example_data()
    data["data"]["examples"] = 1_000_000_000
    data["data"]["global_batch_size"] = 1
    data["training"] = {"epochs": 2}
    assert "more than" in problems_of(data)["training.epochs"]


def test_saved_projects_never_hold_nan_tokens() -> None:
    project = load_example("seed")
    project.data.features[0] = math.nan  # a list changed in place: validation never saw it
    with pytest.raises(ValueError, match="JSON"):
        project.to_json()


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (("model", "layers", 0, "units"), True, "valid integer, not true"),
        (("optimizer", "learning_rate"), "0.5", 'valid number, not "0.5"'),
        (("data", "examples"), 10.0, "valid integer, not 10.0"),
        (("training", "per_replica_losses"), 1, "valid boolean, not 1"),
        (("name",), 5, "valid string, not 5"),
    ],
)
def test_numbers_are_strict(path: tuple, value: object, fragment: str) -> None:
    data = example_data()
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    assert fragment in problems_of(data)[".".join(str(p) for p in path)]


def test_an_integer_is_still_a_float() -> None:
    data = example_data()
    data["optimizer"]["learning_rate"] = 1
    assert load_project_data(data).optimizer.learning_rate == 1.0


def test_schema_version_true_is_not_1() -> None:
    data = example_data()
    data["schema_version"] = True
    assert "schema_version" in problems_of(data)


@pytest.mark.parametrize(
    ("device", "canonical"),
    [
        ("/gpu:0", "/device:GPU:0"),
        ("GPU:1", "/device:GPU:1"),
        ("/device:GPU:1", "/device:GPU:1"),
        ("/cpu", "/device:CPU:0"),
        ("/device:cpu:0", "/device:CPU:0"),
        ("/job:worker/replica:0/task:1/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"),
        ("/job:localhost/device:TPU:3", "/job:localhost/device:TPU:3"),
    ],
)
def test_tensorflow_device_names_parse(device: str, canonical: str) -> None:
    assert canonical_device(device) == canonical


@pytest.mark.parametrize(
    "device",
    ["banana", "/device:banana:0", "gpu:x", "/gpu:0/cpu:0", "/job:worker", "", " /gpu:0", "gpu:٣"],
)
def test_devices_that_are_not_device_names_are_refused(device: str) -> None:
    with pytest.raises(ValueError, match="device"):
        canonical_device(device)


def test_device_list_problems_name_the_entry() -> None:
    data = example_data()
    data["strategy"]["devices"] = ["banana"]
    assert "'banana' is not a TensorFlow device" in problems_of(data)["strategy.devices.0"]
    data["strategy"]["devices"] = ["/gpu:0", "GPU:0"]
    assert "listed twice" in problems_of(data)["strategy.devices"]


def test_did_you_mean_for_misspelt_keys() -> None:
    data = example_data()
    data["optimizer"]["learning_rat"] = 0.1
    data["data"]["exampels"] = 10
    data["trainig"] = {}
    data["model"]["layers"][0]["kernel_initializer"] = {"knd": "zeros"}
    found = problems_of(data)
    assert found["optimizer.learning_rat"] == "unknown key; did you mean 'learning_rate'?"
    assert "did you mean 'examples'?" in found["data.exampels"]
    assert "did you mean 'training'?" in found["trainig"]
    assert "did you mean 'kind'?" in found["model.layers.0.kernel_initializer.knd"]


def test_a_bad_section_does_not_hide_cross_section_problems() -> None:
    data = example_data()
    data["training"]["epochs"] = 0
    data["data"]["features"] = [1.0, 2.0]
    data["strategy"] = {"kind": "one_device", "cpu_replicas": 2}
    found = problems_of(data)
    assert "training.epochs" in found
    assert "input_shape [1] takes 1" in found["data.features"]
    assert "strategy.cpu_replicas" in found


def test_an_unknown_top_level_key_does_not_hide_a_shape_mismatch() -> None:
    data = example_data()
    data["colour"] = "red"
    data["data"]["labels"] = [1.0, 0.0]
    found = problems_of(data)
    assert set(found) == {"colour", "data.labels"}


def test_json_errors_say_where_once(tmp_path) -> None:
    path = tmp_path / "project.json"
    path.write_text('{\n  "schema_version": 1,\n  "name": "unterminated\n}')
    with pytest.raises(ProblemsError) as caught:
        load_project(path)
    text = str(caught.value)
    assert text == f"{path}: line 3, column 24: not valid JSON: Invalid control character here"
    assert "at at" not in text and "at line" not in text


def test_a_utf8_byte_order_mark_is_accepted(tmp_path) -> None:
    path = tmp_path / "project.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(example_data()).encode())
    assert load_project(path) == load_example("seed")


def test_parameter_count_flattens_a_multi_dimensional_input() -> None:
    data = example_data("regression")
    data["model"] = {"input_shape": [4, 8], "layers": [{"kind": "dense", "units": 2}]}
    assert load_project_data(data).model.parameter_count() == 32 * 2 + 2


def test_memory_estimate_counts_parameters_slots_and_synthetic_inputs() -> None:
    data = example_data("regression")
    data["model"] = {"input_shape": [1000], "layers": [{"kind": "dense", "units": 1000}]}
    data["optimizer"] = {"kind": "adam"}
    data["data"]["examples"] = 10_000
    estimate = memory_estimate(load_project_data(data))
    params = 1000 * 1000 + 1000
    assert estimate.parameters == params * 4 * 4  # weights, gradients, two Adam slots
    assert estimate.inputs >= 10_000 * 1000 * 4 * 2  # generated, then held by TensorFlow
    assert estimate.total == estimate.parameters + estimate.inputs + estimate.activations


def test_a_project_that_cannot_fit_this_machine_is_refused_with_the_estimate() -> None:
    data = example_data("regression")
    data["model"] = {"input_shape": [100_000], "layers": [{"kind": "dense", "units": 100_000}]}
    project = load_project_data(data)  # 10^10 parameters: valid, but only on a big machine
    (problem,) = memory_problems(project, available_bytes=8 * 2**30)
    assert problem.path == "model.layers"
    # RMSprop: (10^10 + 10^5) parameters x 4 bytes x (weights, gradients, one slot) = 111.8 GiB;
    # 2000 noisy examples of 10^5 inputs and 10^5 targets, drawn, cast, copied, shuffled: 10.4 GiB.
    assert "needs about 122.3 GiB" in problem.message
    assert "111.8 GiB for parameters" in problem.message
    assert "8.0 GiB available" in problem.message
    assert memory_problems(load_example("seed"), available_bytes=8 * 2**30) == []


def test_a_project_no_machine_can_hold_is_a_schema_problem() -> None:
    data = example_data("regression")
    data["model"] = {
        "input_shape": [1_000_000, 1_000_000],
        "layers": [{"kind": "dense", "units": 1_000_000}],
    }
    found = problems_of(data)
    assert f"more than the {MAX_PROJECT_BYTES // 2**50} PiB" in found["model.layers"]


def test_available_memory_is_read_from_the_system() -> None:
    available = available_memory_bytes()
    assert available is None or 0 < available < 2**62


def test_a_cgroup_limit_counts_less_its_anonymous_memory(tmp_path) -> None:
    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    v2.mkdir()
    (v2 / "memory.max").write_text("8589934592\n")
    (v2 / "memory.stat").write_text("anon 1073741824\nfile 7000000000\n")
    assert _headroom(v2, "memory.max", "anon") == 7 * 2**30  # page cache is reclaimed first
    (v2 / "memory.max").write_text("max\n")
    assert _headroom(v2, "memory.max", "anon") is None
    v1.mkdir()
    (v1 / "memory.stat").write_text(
        "rss 1\nhierarchical_memory_limit 9223372036854771712\ntotal_rss 1473511424\n"
    )
    assert _headroom(v1, "hierarchical_memory_limit", "total_rss") is None  # unlimited
    (v1 / "memory.stat").write_text("hierarchical_memory_limit 4294967296\ntotal_rss 2147483648\n")
    assert _headroom(v1, "hierarchical_memory_limit", "total_rss") == 2 * 2**30


def test_model_sizes_are_bounded() -> None:
    data = example_data()
    data["model"]["input_shape"] = [2_000_000]
    data["model"]["layers"] = [{"kind": "dense", "units": 1}] * 1001
    found = problems_of(data)
    assert "less than or equal to 1000000" in found["model.input_shape.0"]
    assert "at most 1000 items" in found["model.layers"]


def test_a_file_too_big_to_load_is_refused_with_the_stream_switch(tmp_path) -> None:
    """An .npz or CSV loaded whole (data.stream off) is counted from the file itself, so a
    run that cannot hold it is refused before it starts, naming the switch that fits it."""
    np.savez(tmp_path / "big.npz", x=np.zeros((50_000, 100)), y=np.zeros(50_000, np.int32))
    data = example_data("classification")
    data["model"] = {"input_shape": [100], "layers": [{"kind": "dense", "units": 2}]}
    data["data"] = {"source": "numpy", "path": str(tmp_path / "big.npz")}
    # float64 features as stored (40 MB) and as float32 (20 MB), the int32 labels twice.
    assert loaded_file_bytes(load_project_data(data).data) == pytest.approx(60.4e6, rel=0.01)
    (problem,) = memory_problems(load_project_data(data), available_bytes=50 * 2**20)
    assert problem.path == "data"
    assert "loading the file(s) whole needs about 57.6 MiB" in problem.message
    assert problem.message.endswith("set data.stream to true to read them in batches instead")
    data["data"]["stream"] = True
    assert memory_problems(load_project_data(data), available_bytes=50 * 2**20) == []

    rows = np.random.default_rng(0).integers(0, 10**6, (150_000, 4))  # ~4 MB: sampled
    np.savetxt(tmp_path / "t.csv", rows, fmt="%d", delimiter=",", header="a,b,c,y", comments="")
    data["data"] = {"source": "csv", "path": str(tmp_path / "t.csv"), "label_column": "y"}
    counted = loaded_file_bytes(load_project_data(data).data)
    assert counted == pytest.approx(2 * 4 * rows.size, rel=0.05)
