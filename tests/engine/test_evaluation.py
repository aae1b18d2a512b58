"""Evaluation every N steps: distributed metrics, eval.csv, and training left untouched."""

from __future__ import annotations

import json

import numpy as np
import pytest
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project, load_project_data
from distloop.engine.run_folder import read_eval, read_metrics
from distloop.engine.run_model import RunModel
from support.distloop_testing import (
    assert_same_trace,
    distloop,
    example_data,
    run_engine,
    synthetic_project,
)


def problem_paths(data: dict) -> list[str]:
    with pytest.raises(ProblemsError) as caught:
        load_project_data(data)
    return [problem.path for problem in caught.value.problems]


# --- the evaluation section ------------------------------------------------------------


def test_split_or_source_exactly_one() -> None:
    data = example_data("classification")
    data["evaluation"] = {"every": 10}
    assert problem_paths(data) == ["evaluation.split"]
    data["evaluation"] = {
        "every": 10,
        "split": 0.1,
        "source": {"source": "synthetic_classification", "num_classes": 4},
    }
    assert problem_paths(data) == ["evaluation.split"]


def test_split_needs_array_data_and_leaves_examples_to_train() -> None:
    seed = example_data("seed")
    seed["evaluation"] = {"every": 10, "split": 0.5}
    assert problem_paths(seed) == ["evaluation.split"]
    tiny = example_data("classification")
    tiny["data"]["examples"] = 1
    tiny["data"]["global_batch_size"] = 2
    tiny["evaluation"] = {"every": 10, "split": 0.5}
    assert "evaluation.split" in problem_paths(tiny)


def test_a_split_shortens_the_epoch() -> None:
    data = example_data("regression")  # 2000 examples, batches of 50, 3 epochs
    data["evaluation"] = {"every": 32, "split": 0.2}
    project = load_project_data(data)
    assert project.training_example_count() == 1600
    assert project.total_steps() == 3 * 32


def test_the_source_must_fit_the_model_and_loss(tmp_path) -> None:
    data = example_data("classification")  # 8 inputs, 4 classes, sparse crossentropy
    data["evaluation"] = {
        "every": 10,
        "source": {"source": "constant", "features": [1.0], "labels": [1.0, 2.0]},
    }
    assert problem_paths(data) == ["evaluation.source.features", "evaluation.source.labels"]
    data["evaluation"]["source"] = {"source": "synthetic_regression"}
    with pytest.raises(ProblemsError, match=r"evaluation\.source: does not fit loss\.kind"):
        load_project_data(data)


def test_parameter_server_runs_do_not_evaluate() -> None:
    data = example_data("regression")
    data["strategy"] = {"kind": "parameter_server"}
    data["evaluation"] = {"every": 10, "split": 0.1}
    assert "evaluation" in problem_paths(data)


def test_source_file_path_resolves_against_the_project_file(tmp_path) -> None:
    data = example_data("regression")
    data["evaluation"] = {"every": 5, "source": {"source": "numpy", "path": "val.npz"}}
    (tmp_path / "p.json").write_text(json.dumps(data))
    project = load_project(tmp_path / "p.json").resolve_paths(tmp_path)
    assert project.evaluation.source.path == str(tmp_path / "val.npz")


# --- real engine runs ------------------------------------------------------------------


def classification(**evaluation) -> dict:
    """synthetic_project's 3-class task on 2 replicas, 100 steps."""
    data = synthetic_project(2, steps=100)
    if evaluation:
        data["evaluation"] = evaluation
    return data


@pytest.mark.slow
def test_separate_source_evaluates_every_n_steps_and_leaves_training_unchanged(tmp_path) -> None:
    # The training examples again, as a source of their own in batches of 60 (the last
    # one short), so that accuracy must rise; held-out data is the split test's.
    source = {**synthetic_project(2)["data"], "global_batch_size": 60, "shuffle_buffer": 0}
    data = classification(every=5, source=source)
    # Fused executions of 8 steps; evaluation cuts them at every 5th step.
    data["training"]["steps_per_execution"] = 8
    evaluated = run_engine(load_project_data(data), tmp_path / "run")
    plain = run_engine(load_project_data(classification()), None)
    assert evaluated["terminal"].status == "finished", evaluated["terminal"]

    np.testing.assert_allclose(evaluated["losses"], plain["losses"], rtol=1e-6)
    evals = evaluated["evals"]
    assert [e.step for e in evals] == list(range(5, 101, 5))
    assert all(e.examples == 512 for e in evals)
    assert all(list(e.metrics) == ["val_loss", "val_accuracy"] for e in evals)
    accuracy = [e.metrics["val_accuracy"] for e in evals]
    assert accuracy[0] < 0.8 and accuracy[-1] > 0.95, accuracy
    assert evals[-1].metrics["val_loss"] < evals[0].metrics["val_loss"]
    assert_same_trace(evaluated["model"], RunModel.from_folder(tmp_path / "run"))

    on_disk = read_eval(tmp_path / "run")
    assert list(on_disk) == ["step", "val_loss", "val_accuracy"]
    assert on_disk["step"] == list(range(5, 101, 5))
    np.testing.assert_allclose(on_disk["val_accuracy"], accuracy, rtol=1e-6)
    assert read_metrics(tmp_path / "run")["step"] == list(range(1, 101))
    assert any((tmp_path / "run" / "tensorboard").iterdir())


@pytest.mark.slow
def test_split_on_regression_prints_val_mae_from_the_command_line(tmp_path) -> None:
    data = example_data("regression")  # 2000 examples in batches of 50, 3 epochs
    data["evaluation"] = {"every": 32, "split": 0.2}
    path = tmp_path / "regression.json"
    path.write_text(json.dumps(data))
    result = distloop("run", str(path), "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    evals = [line for line in result.stdout.splitlines() if line.startswith("eval ")]
    assert [line.split()[1] for line in evals] == ["step=32", "step=64", "step=96"]
    assert all(" val_loss=" in line and " val_mae=" in line for line in evals)
    steps = [line for line in result.stdout.splitlines() if line.startswith("step=")]
    assert len(steps) == 96  # 1600 training examples: 32 steps an epoch
    # The evaluation after step 32 follows that step's line.
    lines = result.stdout.splitlines()
    assert lines[lines.index(evals[0]) - 1].startswith("step=32 ")

    on_disk = read_eval(tmp_path / "run")
    assert list(on_disk) == ["step", "val_loss", "val_mae"]
    assert on_disk["val_mae"][-1] < on_disk["val_mae"][0]
