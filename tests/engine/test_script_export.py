"""Export as script: the standalone program reproduces the engine's loss trace."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import numpy as np
import pytest
from distloop.engine.examples import example_text
from distloop.engine.project_file import load_project_data
from distloop.engine.script_export import ExportError, render_script
from support.data_folders import write_image_folder
from support.distloop_testing import (
    HOSTILE_TEXTS,
    assert_inert_script,
    distloop,
    example_data,
    run_engine,
    text_project,
)


def run_script(path) -> tuple[list[int], np.ndarray]:
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=240, check=True
    )
    pairs = [line.split() for line in result.stdout.splitlines() if line.startswith("step=")]
    steps = [int(a.removeprefix("step=")) for a, _ in pairs]
    return steps, np.array([float(b.removeprefix("loss=")) for _, b in pairs], np.float32)


def regression_on_csv(tmp_path) -> dict:
    """Streamed by the engine, loaded by the script; a fifth of the rows held out."""
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
        "stream": True,
    }
    data["evaluation"] = {"every": 100, "split": 0.2}  # the script holds out the same rows
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


def test_custom_code_is_refused() -> None:
    data = example_data()
    data["custom_code"] = {"path": "/tmp/step.py"}
    with pytest.raises(ExportError, match="custom step code"):
        render_script(load_project_data(data))


# --- file sources: text and image folders, TFRecord files ------------------------------

WRITE_FILES = """
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(5)
x = rng.standard_normal((30, 3)).astype(np.float32)
y = rng.integers(0, 3, 30)
for part in range(2):
    with tf.io.TFRecordWriter(f"part-{part}.tfrecord.gz", "GZIP") as writer:
        for at in range(part * 15, part * 15 + 15):
            feature = {
                "a": tf.train.Feature(float_list=tf.train.FloatList(value=x[at, :2])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[y[at]])),
                "b": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x[at, 2] * 9)])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
tf.keras.utils.set_random_seed(6)
tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(3)]).save("model.keras")
"""
"""Two GZIP files of records whose features (a float pair, an int64) are joined in spec
order, and a .keras model for them; run in the scripts' process (it takes TensorFlow)."""

RUN_SCRIPTS = """
import runpy, sys

for path in sys.argv[1:]:
    print("script=" + path, flush=True)
    runpy.run_path(path, run_name="__main__")
"""
"""One process runs the scripts one after another: TensorFlow starts once, not per script."""


def write_folders(tmp_path) -> None:
    """The text folder, and 8x8 images for an 8x8 model: the engine skips their resize and
    scales uint8 batches (the script resizes: the numbers must be the same)."""
    texts = {
        "en": ["the cat sat on the mat", "the dog ran home", "a cat and a dog", "my dog is old"],
        "fr": ["le chat est noir", "le chien court vite", "un chat et un chien", "la fin"],
    }
    for name, lines in texts.items():
        (tmp_path / "texts" / name).mkdir(parents=True)
        for index, line in enumerate(lines):
            (tmp_path / "texts" / name / f"{index}.txt").write_text(line)
    write_image_folder(tmp_path / "shapes", per_class=5, size=8)


def file_source_projects(tmp_path) -> dict[str, dict]:
    """Tiny text, TFRecord (with a .keras model) and augmented image projects, each with an
    evaluation split; "plain" is the image project without augmentation."""
    common = {"schema_version": 1, "evaluation": {"every": 100, "split": 0.2}}
    text = {
        **common,
        "model": {
            "input_shape": [6],
            "layers": [
                {"kind": "embedding", "input_dim": 30, "output_dim": 4},
                {"kind": "global_average_pooling1d"},
                {"kind": "dense", "units": 2},
            ],
        },
        "optimizer": {"kind": "adam", "learning_rate": 0.05},
        "loss": {"kind": "categorical_crossentropy", "from_logits": True},
        "data": {
            "source": "text_folder",
            "path": str(tmp_path / "texts"),
            "sequence_length": 6,
            "vocabulary_size": 30,
            "global_batch_size": 3,
            "shuffle_buffer": 8,
        },
        "training": {"steps": 6, "seed": 2},
    }
    records = {
        **common,
        "model": {"kind": "keras_file", "path": str(tmp_path / "model.keras"), "input_shape": [3]},
        "optimizer": {"kind": "sgd", "learning_rate": 0.1},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": {
            "source": "tfrecord",
            "path": str(tmp_path / "part-*.tfrecord.gz"),
            "compression": "GZIP",
            "features": [
                {"name": "a", "shape": [2]},
                {"name": "label", "dtype": "int64"},
                {"name": "b", "dtype": "int64"},
            ],
            "label": "label",
            "global_batch_size": 6,
            "shuffle_buffer": 12,
        },
        "training": {"steps": 6, "seed": 3},
    }
    images = {
        **common,
        "model": {
            "input_shape": [8, 8, 1],
            "layers": [
                {"kind": "dense", "units": 16, "activation": "relu"},
                {"kind": "dense", "units": 3},
            ],
        },
        "optimizer": {"kind": "adam", "learning_rate": 0.02},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": {
            "source": "image_folder",
            "path": str(tmp_path / "shapes"),
            "global_batch_size": 4,
            "shuffle_buffer": 12,
            "flip": True,
            "rotation": 20.0,
            "crop": 0.2,
            "on_bad_file": "skip",
        },
        "training": {"steps": 6, "seed": 1},
    }
    plain = json.loads(json.dumps(images))
    plain["data"].update(flip=False, rotation=0.0, crop=0.0)
    return {"text": text, "tfrecord": records, "augmented": images, "plain": plain}


@pytest.mark.slow
def test_exported_scripts_of_file_sources_give_the_engines_loss_trace(tmp_path) -> None:
    write_folders(tmp_path)
    data = file_source_projects(tmp_path)
    projects = {name: load_project_data(project) for name, project in data.items()}
    (tmp_path / "write_files.py").write_text(WRITE_FILES)
    paths = [tmp_path / "write_files.py"]
    for name, project in projects.items():
        paths.append(tmp_path / f"{name}.py")
        paths[-1].write_text(render_script(project))
    result = subprocess.run(
        [sys.executable, "-c", RUN_SCRIPTS, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
        cwd=tmp_path,
    )
    traces: dict[str, list[float]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("script="):
            trace = traces.setdefault(line.split("/")[-1].removesuffix(".py"), [])
        elif line.startswith("step="):
            trace.append(float(line.split()[1].removeprefix("loss=")))
    assert len(traces["plain"]) == 6
    # Augmentation changes what trains: the test would see a script that ignored it.
    assert not np.allclose(traces["augmented"], traces["plain"], rtol=1e-3)
    for name in ("text", "tfrecord", "augmented"):
        # Loaded again: the .keras file exists now, and the project reads its shapes.
        engine = run_engine(load_project_data(data[name]), None)
        assert engine["steps"] == [1, 2, 3, 4, 5, 6], name
        np.testing.assert_allclose(traces[name], engine["losses"], rtol=1e-5, err_msg=name)


def test_file_source_scripts_are_standalone_and_hold_the_split_out(tmp_path) -> None:
    for name, data in file_source_projects(tmp_path).items():
        text = render_script(load_project_data(data))
        code = text.split('"""', 2)[2].split("# The Distloop project")[0]
        assert "import distloop" not in code and "from distloop" not in code, name
        assert "held = held_out(" in code, name
        compile(text, f"{name}.py", "exec")
    augmented = render_script(load_project_data(file_source_projects(tmp_path)["augmented"]))
    assert "def augment_images(" in augmented and "import math" in augmented
    assert "a damaged image fails it" in augmented


# --- hostile text: names, descriptions and paths stay data --------------------------------


@pytest.mark.parametrize("source", ["csv", "tfrecord"])
@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_hostile_text_is_inert_data_in_the_script(text: str, source: str) -> None:
    """Every free text of the project set to ``text`` (:func:`text_project`)."""
    project = text_project(text, source)
    assert_inert_script(project)
    tree = ast.parse(render_script(project))
    assert "PWNED" not in {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert text in strings  # the path and the column, as the literals the script reads


def test_an_exported_script_with_a_hostile_name_runs_none_of_it(tmp_path) -> None:
    """The real command writes the script; a Python that lacks numpy runs it up to its
    imports, past the docstring: code smuggled in the name would have made the marker."""
    marker = tmp_path / "marker"
    name = f'x"""\nopen({str(marker)!r}, "w").close()\n"""'
    data = example_data("seed")
    data["name"] = name
    project = tmp_path / "hostile.json"
    project.write_text(json.dumps(data))
    out = tmp_path / "hostile.py"
    result = distloop("export", str(project), "--format", "script", "--out", str(out))
    assert result.returncode == 0, result.stderr
    ran = subprocess.run(
        [sys.executable, "-I", "-S", str(out)], capture_output=True, text=True, timeout=60
    )
    assert "No module named 'numpy'" in ran.stderr, ran.stderr
    assert not marker.exists()
