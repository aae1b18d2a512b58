"""Export as script: the standalone program reproduces the engine's loss trace."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from distloop.engine.config import load_project_data
from distloop.engine.examples import example_text
from distloop.engine.script_export import ExportError, render_script
from distloop_testing import distloop, example_data, run_engine


def run_script(path) -> tuple[list[int], np.ndarray]:
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=240, check=True
    )
    pairs = [line.split() for line in result.stdout.splitlines() if line.startswith("step=")]
    steps = [int(a.removeprefix("step=")) for a, _ in pairs]
    return steps, np.array([float(b.removeprefix("loss=")) for _, b in pairs], np.float32)


def regression_on_csv(tmp_path) -> dict:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((120, 3)).astype(np.float32)
    y = x @ np.array([[0.5], [-1.0], [2.0]], np.float32)
    np.savetxt(tmp_path / "t.csv", np.hstack([x, y]), delimiter=",", header="a,b,c,y", comments="")
    data = example_data("regression")
    data["model"]["input_shape"] = [3]
    data["data"] = {
        "source": "csv",
        "path": str(tmp_path / "t.csv"),
        "label_column": "y",
        "global_batch_size": 25,
        "shuffle_buffer": 50,
    }
    data["training"] = {"epochs": 2, "seed": 1}
    return data


def conv_project() -> dict:
    """Conv, batch normalization, pooling and an implicit Flatten (the example's strategy)."""
    data = example_data("classification")
    data["model"] = {
        "input_shape": [8, 8, 1],
        "layers": [
            {"kind": "rescaling", "scale": 0.5},
            {"kind": "conv2d", "filters": 4, "activation": "relu", "padding": "same"},
            {"kind": "batch_normalization"},
            {"kind": "max_pooling2d"},
            {"kind": "dropout", "rate": 0.2},
            {"kind": "dense", "units": data["data"]["num_classes"]},
        ],
    }
    data["training"] = {"steps": 12, "seed": 3}
    return data


@pytest.mark.slow
@pytest.mark.parametrize("name", ["seed", "classification", "regression", "csv", "conv"])
def test_exported_script_gives_the_engines_loss_trace(tmp_path, name: str) -> None:
    if name == "conv":
        data = conv_project()
    else:
        data = regression_on_csv(tmp_path) if name == "csv" else example_data(name)
    if name == "classification":
        data["training"]["steps"] = 60  # enough to compare, quicker than the example's 300
    project = load_project_data(data)
    script = tmp_path / "exported.py"
    script.write_text(render_script(project))
    steps, losses = run_script(script)
    engine = run_engine(project, None)
    assert steps == engine["steps"]
    np.testing.assert_allclose(losses, engine["losses"], rtol=1e-5)


def test_script_is_standalone_and_readable() -> None:
    text = render_script(load_project_data(example_data("classification")))
    assert "distloop" not in text.split('"""', 2)[2].split("# The Distloop project")[0].lower()
    assert "strategy.scope()" in text and "tf.nn.compute_average_loss" in text
    assert "def make_classification(" in text
    compile(text, "exported.py", "exec")


def test_op_determinism_follows_training_deterministic() -> None:
    data = example_data("seed")
    on = render_script(load_project_data(data))
    data["training"]["deterministic"] = False
    off = render_script(load_project_data(data))
    assert "tf.config.experimental.enable_op_determinism()" in on
    assert "enable_op_determinism" not in off


def test_tf_config_is_set_before_tensorflow_starts() -> None:
    data = example_data()
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {"cluster": {"worker": ["h1:2222", "h2:2222"]}, "task": {"type": "worker"}}
    text = render_script(load_project_data(data))
    assert text.index('os.environ.setdefault("TF_CONFIG"') < text.index("import tensorflow")
    assert json.loads(text.split('os.environ.setdefault("TF_CONFIG", \'')[1].split("')")[0])


def test_parameter_server_is_refused_with_a_reason() -> None:
    data = example_data()
    data["strategy"] = {"kind": "parameter_server"}
    data["tf_config"] = {
        "cluster": {"chief": ["h0:1"], "worker": ["h1:1"], "ps": ["h2:1"]},
        "task": {"type": "chief"},
    }
    with pytest.raises(ExportError, match="coordinator"):
        render_script(load_project_data(data))


def test_cli_writes_the_script(tmp_path) -> None:
    project = tmp_path / "seed.json"
    project.write_text(example_text("seed"))
    out = tmp_path / "seed_loop.py"
    result = distloop("export", str(project), "--format", "script", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out)
    compile(out.read_text(), str(out), "exec")


def test_custom_code_and_evaluation_split_are_refused() -> None:
    data = example_data("regression")
    data["evaluation"] = {"every": 10, "split": 0.1}
    with pytest.raises(ExportError, match="split"):
        render_script(load_project_data(data))
    data = example_data()
    data["custom_code"] = {"path": "/tmp/step.py"}
    with pytest.raises(ExportError, match="custom step code"):
        render_script(load_project_data(data))
