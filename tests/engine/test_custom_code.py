"""Custom step code: a user's file runs exactly like the built-in step, and fails clearly.

The loader tests are fast (the files they load import nothing); the others start
real engine processes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from distloop.engine import cli
from distloop.engine.examples import load_example
from distloop.engine.messages import RunFailed
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project, load_project_data
from distloop.engine.run_folder import read_metrics, read_status
from distloop.engine.run_model import RunModel
from distloop.engine.user_code import UserCodeError, load_user_code
from support.distloop_testing import (
    GUIDE_STEP,
    REPO,
    assert_same_trace,
    distloop,
    example_data,
    interrupt_after,
    run_engine,
    synthetic_project,
)


def write(tmp_path: Path, source: str, name: str = "step.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def with_code(data: dict, path: Path) -> dict:
    return {**data, "custom_code": {"path": str(path)}}


# --- the loader: what a file must define, checked before anything runs ------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def build_models(project):\n    return {}\n", "defines no train_step(step, inputs)"),
        ("def train_step(inputs):\n    return 0.0\n", "train_step(inputs) does not fit"),
        (
            "def build_optimizers(models):\n    pass\ndef train_step(step, inputs):\n    pass\n",
            "build_optimizers(models) does not fit the call build_optimizers(models, project)",
        ),
        ("train_step = 3\n", "train_step must be a function train_step(step, inputs)"),
        ("def train_step(step, inputs):\n    return (\n", ":2: syntax error: '(' was never closed"),
        ("\nimport no_such_module_at_all\n", ":2: loading the file raised ModuleNotFoundError"),
    ],
    ids=["missing", "signature", "builder-signature", "not-a-function", "syntax", "import"],
)
def test_loader_refuses_naming_the_file_and_function(tmp_path, source, expected) -> None:
    path = write(tmp_path, source)
    with pytest.raises(UserCodeError) as caught:
        load_user_code(path)
    assert str(path) in str(caught.value)
    assert expected in str(caught.value)


def test_loader_accepts_defaults_and_leaves_builders_optional(tmp_path) -> None:
    path = write(
        tmp_path,
        "def train_step(step, inputs, scale=1.0):\n    pass\ndef build_dataset(*args):\n    pass\n",
    )
    code = load_user_code(path)
    assert code.build_dataset is not None
    assert code.build_models is None and code.build_optimizers is None


def test_the_file_may_import_modules_beside_it(tmp_path) -> None:
    write(tmp_path, "SCALE = 2.0\n", "distloop_test_helpers.py")
    path = write(
        tmp_path,
        "from distloop_test_helpers import SCALE\ndef train_step(step, inputs):\n    pass\n",
    )
    assert load_user_code(path).train_step is not None


def test_missing_file_is_named(tmp_path) -> None:
    with pytest.raises(UserCodeError, match=r"missing\.py does not exist"):
        load_user_code(tmp_path / "missing.py")


def test_custom_code_path_resolves_against_the_project_file(tmp_path) -> None:
    data = with_code(example_data("seed"), Path("code/step.py"))
    (tmp_path / "p.json").write_text(json.dumps(data))
    project = load_project(tmp_path / "p.json").resolve_paths(tmp_path)
    assert project.custom_code.path == str(tmp_path / "code" / "step.py")


def test_custom_code_rules(tmp_path) -> None:
    data = with_code(example_data("seed"), Path("step.txt"))
    data["strategy"] = {"kind": "parameter_server"}
    with pytest.raises(ProblemsError) as caught:
        load_project_data(data)
    paths = [problem.path for problem in caught.value.problems]
    assert "custom_code.path" in paths and "custom_code" in paths


EVIL = """
from pathlib import Path

Path(__file__).with_name("it-ran").touch()


def train_step(step, inputs):
    return 0.0
"""


def test_validation_and_export_never_execute_it_and_runs_name_it_first(tmp_path, capsys) -> None:
    """A project from elsewhere may point anywhere: its code runs only in a run, announced."""
    code = write(tmp_path, EVIL, "evil.py")
    digest = hashlib.sha256(code.read_bytes()).hexdigest()
    (tmp_path / "project").mkdir()
    path = tmp_path / "project" / "p.json"
    path.write_text(json.dumps(with_code(example_data("seed"), Path("../evil.py"))))
    cluster_path = tmp_path / "project" / "cluster.json"
    cluster = with_code(example_data("seed"), Path("../evil.py"))
    cluster_path.write_text(json.dumps({**cluster, "strategy": {"kind": "multi_worker_mirrored"}}))
    blocker = tmp_path / "a-file"
    blocker.write_text("")

    assert cli.main(["validate", str(path)]) == 0
    assert cli.main(["export", str(path), "--format", "script", "--out", str(tmp_path / "s.py")])
    assert "running custom step code" not in capsys.readouterr().err
    for command, project in (("run", path), ("cluster", cluster_path)):
        # The run folder cannot be made, so the run stops after its announcement.
        assert cli.main([command, str(project), "--out", str(blocker / "run")]) == 1
        lines = capsys.readouterr().err.splitlines()
        assert lines[:2] == [
            f"distloop: running custom step code {code} (sha256 {digest})",
            f"distloop: warning: {code} is outside the project's folder {tmp_path / 'project'}; "
            "run it only if you trust it",
        ]
        assert "cannot create the run folder" in lines[2]
    assert not (tmp_path / "it-ran").exists()

    code.unlink()
    assert cli.main(["run", str(path), "--out", str(tmp_path / "run")]) == 1
    assert capsys.readouterr().err == f"distloop: custom_code.path: {code} does not exist\n"
    assert not (tmp_path / "run").exists()


def test_the_gan_example_finds_its_step_file() -> None:
    project = load_example("gan")
    assert Path(project.custom_code.path).is_file()
    assert Path(project.custom_code.path).name == "gan_step.py"


# --- real engine runs ------------------------------------------------------------------


def gan_copy(tmp_path: Path, **training) -> Path:
    """The shipped example copied elsewhere, with its code beside it, shortened."""
    examples = REPO / "resources" / "examples"
    shutil.copy(examples / "gan_step.py", tmp_path / "gan_step.py")
    data = json.loads((examples / "gan.json").read_text())
    data["training"].update(training)
    path = tmp_path / "gan.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_gan_example_reports_both_named_losses_every_step(tmp_path) -> None:
    project = load_project(gan_copy(tmp_path, steps=40)).resolve_paths(tmp_path)
    run = run_engine(project, tmp_path / "run")
    assert run["terminal"].status == "finished", run["terminal"]
    assert run["steps"] == list(range(1, 41))
    named = run["named_losses"]
    assert list(named) == ["generator", "discriminator"]
    assert all(len(values) == 40 and np.all(np.isfinite(values)) for values in named.values())
    # No "loss" entry: the primary loss is the float32 sum of the named ones.
    np.testing.assert_array_equal(run["losses"], named["generator"] + named["discriminator"])

    on_disk = read_metrics(tmp_path / "run")
    assert list(on_disk) == ["step", "loss", "elapsed_s", "generator", "discriminator"]
    assert on_disk["step"] == list(range(1, 41))
    for name in ("generator", "discriminator"):
        np.testing.assert_array_equal(np.float32(on_disk[name]), named[name])
    assert_same_trace(run["model"], RunModel.from_folder(tmp_path / "run"))


@pytest.mark.slow
def test_gan_runs_from_the_command_line_on_two_replicas_fused(tmp_path) -> None:
    """``distloop run PATH/gan.json``: a named-loss line per step; 2 replicas, 4 steps a call."""
    path = gan_copy(tmp_path, steps=12, steps_per_execution=4)
    data = json.loads(path.read_text())
    data["strategy"] = {"kind": "mirrored", "cpu_replicas": 2}
    path.write_text(json.dumps(data))
    result = distloop("run", str(path), "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    digest = hashlib.sha256((tmp_path / "gan_step.py").read_bytes()).hexdigest()
    said = f"distloop: running custom step code {tmp_path / 'gan_step.py'} (sha256 {digest})\n"
    assert said in result.stderr and "warning" not in result.stderr  # beside its project
    lines = result.stdout.splitlines()
    assert len(lines) == 12
    assert lines[0].startswith("step=1 loss=") and " generator=" in lines[0]
    assert " discriminator=" in lines[0]
    metrics = read_metrics(tmp_path / "run")
    assert metrics["step"] == list(range(1, 13))
    assert np.all(np.isfinite(metrics["generator"]))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import tensorflow as tf\n", "defines no train_step(step, inputs)"),
        ("def train_step(inputs):\n    return inputs\n", "train_step(inputs) does not fit"),
        ("def train_step(step, inputs)\n    return 0.0\n", ":1: syntax error"),
        (
            "def train_step(step, inputs):\n    features, labels = inputs\n"
            "    return step.loss_object(labels, step.models['model'](features))\n",
            "train_step: its loss has shape (None,), not a scalar",
        ),
    ],
    ids=["missing", "signature", "syntax", "per-example-loss"],
)
def test_broken_user_code_fails_the_run_clearly(tmp_path, source, expected) -> None:
    path = write(tmp_path, source, "broken_step.py")
    project = load_project_data(with_code(example_data("seed"), path))
    run = run_engine(project, tmp_path / "run")
    failure = run["terminal"]
    assert isinstance(failure, RunFailed), failure
    assert failure.error_type == "UserCodeError"
    assert str(path) in failure.message and expected in failure.message
    assert "in user code" not in failure.message  # not AutoGraph's rewritten message
    assert run["steps"] == [] and run["exit_code"] == 1
    assert read_status(tmp_path / "run")["status"] == "failed"


@pytest.mark.slow
def test_user_written_guide_step_gives_the_built_in_trace_on_the_seed_example(tmp_path) -> None:
    """The strongest check that user code runs exactly like the built-in step.

    The user's run also turns ``training.deterministic`` off: its step fails the run if
    op determinism is on all the same (this dense model's trace does not depend on it).
    """
    determinism_off = GUIDE_STEP.replace("RESULT", "loss").replace(
        "    features, labels = inputs\n",
        "    if config.is_op_determinism_enabled():\n"
        "        raise RuntimeError('op determinism is on')\n"
        "    features, labels = inputs\n",
    )
    path = write(tmp_path, "from tensorflow.python.framework import config\n" + determinism_off)
    built_in = run_engine(load_example("seed"), None)
    data = example_data("seed")
    data["training"]["deterministic"] = False
    custom = run_engine(load_project_data(with_code(data, path)), None)
    assert custom["terminal"].status == "finished", custom["terminal"]
    assert custom["steps"] == built_in["steps"] == list(range(1, 101))
    assert custom["named_losses"] == {}
    np.testing.assert_allclose(custom["losses"], built_in["losses"], rtol=1e-6)


@pytest.mark.slow
def test_user_step_on_two_replicas_fused_gives_the_built_in_trace(tmp_path) -> None:
    """Named losses with a "loss" entry: that entry is the primary and per-replica loss."""
    path = write(tmp_path, GUIDE_STEP.replace("RESULT", '{"loss": loss, "data": data_loss}'))
    data = synthetic_project(2, steps=40, per_replica_losses=True)
    built_in = run_engine(load_project_data(data), None)
    fused = {**data, "training": {**data["training"], "steps_per_execution": 5}}
    custom = run_engine(load_project_data(with_code(fused, path)), tmp_path / "run")
    assert custom["terminal"].status == "finished", custom["terminal"]
    assert custom["started"].num_replicas == 2
    np.testing.assert_allclose(custom["losses"], built_in["losses"], rtol=1e-6)
    np.testing.assert_allclose(custom["replica_losses"], built_in["replica_losses"], rtol=1e-6)
    named = custom["named_losses"]
    np.testing.assert_array_equal(named["loss"], custom["losses"])
    assert np.all(named["data"] < named["loss"])  # the regularization is left out
    columns = list(read_metrics(tmp_path / "run"))
    assert columns == ["step", "loss", "elapsed_s", "data", "replica_0", "replica_1"]


@pytest.mark.slow
def test_stopped_gan_resumes_to_the_uninterrupted_trace(tmp_path) -> None:
    """Both models and both optimizers are checkpointed (by name) and restored."""
    project = load_project(gan_copy(tmp_path, steps=60, checkpoint_every=10))
    project = project.resolve_paths(tmp_path)
    whole = run_engine(project, tmp_path / "whole")
    interrupt_after(project, tmp_path / "cut", 25, kill=False)
    assert read_metrics(tmp_path / "cut")["step"][-1] < 60
    result = distloop("run", "--resume", str(tmp_path / "cut"), "--quiet")
    assert result.returncode == 0, result.stderr
    assert f"distloop: running custom step code {tmp_path / 'gan_step.py'} (sha256 " in (
        result.stderr
    )
    resumed = read_metrics(tmp_path / "cut")
    assert resumed["step"] == list(range(1, 61))
    for name in ("loss", "generator", "discriminator"):
        expected = whole["losses"] if name == "loss" else whole["named_losses"][name]
        np.testing.assert_allclose(np.float32(resumed[name]), expected, rtol=1e-6)
