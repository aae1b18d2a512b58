"""Project file validation: every problem reported with its path, cross-field rules included."""

from __future__ import annotations

import json

import pytest
from distloop.engine.config import ConstantData, Project, uneven_batch_warnings
from distloop.engine.examples import example_names, load_example
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project, load_project_data, load_project_text
from support.distloop_testing import example_data


def problems_of(data: dict) -> dict[str, str]:
    with pytest.raises(ProblemsError) as caught:
        load_project_data(data)
    return {p.path: p.message for p in caught.value.problems}


def test_seed_example_is_the_guides_program() -> None:
    seed = load_example("seed")
    assert seed.strategy.kind == "mirrored"
    assert seed.tf_config is None
    assert seed.model.input_shape == [1]
    (dense,) = seed.model.layers
    assert dense.kind == "dense" and dense.units == 1
    assert dense.kernel_regularizer is not None and dense.kernel_regularizer.l2 == 1e-4
    assert seed.optimizer.kind == "sgd" and seed.optimizer.learning_rate == 0.01
    assert seed.loss.kind == "binary_crossentropy" and seed.loss.from_logits
    assert isinstance(seed.data, ConstantData)
    assert (seed.data.features, seed.data.labels, seed.data.examples) == ([1.0], [1.0], 1000)
    assert seed.data.global_batch_size == 10
    assert seed.total_steps() == 100


@pytest.mark.parametrize("name", example_names())
def test_every_example_is_valid_and_round_trips(name: str) -> None:
    project = load_example(name)
    assert load_project_text(project.to_json()) == project


def test_field_errors_carry_their_path() -> None:
    data = example_data()
    data["data"]["global_batch_size"] = 0
    data["model"]["layers"][0]["units"] = -3
    problems = problems_of(data)
    assert "greater than or equal to 1" in problems["data.global_batch_size"]
    assert "model.layers.0.units" in problems


def test_unknown_keys_are_errors_not_ignored() -> None:
    data = example_data()
    data["optimizer"]["learning_rat"] = 0.1
    assert "optimizer.learning_rat" in problems_of(data)


def test_launch_hosts_are_checked_each_at_its_path_and_kept() -> None:
    """A destination ssh would read as an option, a port out of range, a command of two
    lines, a key that is no TF_CONFIG host: one problem each, with its path."""
    data = example_data()
    data["launch"] = {
        "hosts": {
            "10.0.0.2": {"destination": "-oProxyCommand=touch x", "port": 70000},
            "10.0.0.3": {"destination": "me@", "command": "distloop\nrm -rf ~"},
            "not a host": {},
        }
    }
    problems = problems_of(data)
    assert "not a host name, address or ssh alias" in problems["launch.hosts.10.0.0.2.destination"]
    assert "less than or equal to 65535" in problems["launch.hosts.10.0.0.2.port"]
    assert "'' is not a host name" in problems["launch.hosts.10.0.0.3.destination"]
    assert "one line" in problems["launch.hosts.10.0.0.3.command"]
    assert "not a valid host name" in problems["launch.hosts.not a host.[key]"]
    assert len(problems) == 5
    data["launch"] = {
        "hosts": {
            "10.0.0.2": {"destination": "alice@gpu-1.lab", "port": 2200},
            "fe80::1": {"command": "/opt/venv/bin/distloop", "remote_dir": "/scratch/runs"},
        }
    }
    project = load_project_data(data)
    assert project.launch is not None and project.launch.hosts["10.0.0.2"].port == 2200
    assert load_project_text(project.to_json()) == project


def test_cross_field_rules_report_every_problem_at_once() -> None:
    data = example_data()
    data["strategy"] = {"kind": "one_device", "cpu_replicas": 2}
    data["data"]["features"] = [1.0, 2.0]
    problems = problems_of(data)
    assert "strategy.cpu_replicas" in problems
    assert "input_shape [1] takes 1" in problems["data.features"]


def test_tf_config_only_with_multi_machine_strategies() -> None:
    data = example_data()
    data["tf_config"] = {"cluster": {"worker": ["localhost:2222"]}, "task": {"type": "worker"}}
    assert "only used by multi_worker_mirrored" in problems_of(data)["tf_config"]
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    assert load_project_data(data).tf_config is not None


def test_ps_jobs_only_with_parameter_server() -> None:
    data = example_data()
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {
        "cluster": {"worker": ["h1:1"], "ps": ["h2:1"]},
        "task": {"type": "worker", "index": 0},
    }
    assert "only used by parameter_server" in problems_of(data)["tf_config.cluster.ps"]


def test_task_index_inside_its_job() -> None:
    data = example_data()
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {
        "cluster": {"worker": ["h1:1", "h2:1"]},
        "task": {"type": "worker", "index": 2},
    }
    assert "index must be below" in problems_of(data)["tf_config.task.index"]


def test_epochs_xor_steps() -> None:
    data = example_data()
    data["training"] = {"epochs": 1, "steps": 10}
    assert "exactly one of epochs or steps" in problems_of(data)["training.steps"]


def test_loss_and_label_shapes_must_agree() -> None:
    data = example_data("classification")
    data["loss"] = {"kind": "binary_crossentropy", "from_logits": True}
    problems = problems_of(data)
    assert "num_classes 2" in problems["data.num_classes"]
    assert "1 unit" in problems["model.layers"]


def test_from_logits_only_for_crossentropy() -> None:
    data = example_data("regression")
    data["loss"] = {"kind": "mean_squared_error", "from_logits": True}
    assert "crossentropy" in problems_of(data)["loss.from_logits"]


def test_uneven_batches_are_explained_not_refused() -> None:
    data = example_data()
    data["strategy"]["cpu_replicas"] = 4
    project = load_project_data(data)
    (note,) = uneven_batch_warnings(project)
    assert "not divisible by 4 replicas" in note


def test_batch_smaller_than_replica_count_is_refused() -> None:
    data = example_data()
    data["strategy"]["cpu_replicas"] = 16
    assert "at least the number of replicas" in problems_of(data)["data.global_batch_size"]


def test_schema_version_newer_is_refused_with_a_message() -> None:
    data = example_data()
    data["schema_version"] = 7
    assert "newer Distloop" in problems_of(data)["schema_version"]


def test_bad_json_names_line_and_column(tmp_path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"schema_version": 1,\n  "strategy": }')
    with pytest.raises(ProblemsError) as caught:
        load_project(path)
    assert "line 2" in str(caught.value)


def test_missing_file_is_a_problem_not_a_traceback(tmp_path) -> None:
    with pytest.raises(ProblemsError, match="cannot read"):
        load_project(tmp_path / "nope.json")


def test_relative_data_paths_resolve_against_the_project_file(tmp_path) -> None:
    data = example_data("regression")
    data["data"] = {"source": "csv", "path": "table.csv", "label_column": "y"}
    (tmp_path / "p.json").write_text(json.dumps(data))
    project = load_project(tmp_path / "p.json").resolve_paths(tmp_path)
    assert project.data.path == str(tmp_path / "table.csv")


def test_parameter_count_matches_keras_formula() -> None:
    assert load_example("classification").model.parameter_count() == 8 * 32 + 32 + 32 * 4 + 4


def test_model_validate_alone_enforces_the_schemas_joining_rules() -> None:
    data = example_data()
    data["strategy"] = {"kind": "one_device", "cpu_replicas": 2}
    with pytest.raises(ValueError, match="cpu_replicas"):
        Project.model_validate(data)


def test_loading_runs_the_rules_that_ask_the_data_source() -> None:
    """engine.config is the schema alone (it imports no source's code): whether the data
    fits the model is the loader's rule, so each reader of a project loads it through
    engine.project_file and sees that problem too."""
    data = example_data()
    data["data"]["labels"] = [1.0, 0.0]
    assert Project.model_validate(data).data.source == "constant"
    assert "the model predicts 1 per example" in problems_of(data)["data.labels"]


def test_a_key_given_twice_is_refused_not_the_last_kept() -> None:
    """json keeps the last of two equal keys silently: the rate read first is not the one
    that would train."""
    text = json.dumps(example_data("seed")).replace(
        '"learning_rate": 0.01', '"learning_rate": 0.01, "learning_rate": 5.0'
    )
    assert text.count('"learning_rate"') == 2
    with pytest.raises(ProblemsError) as caught:
        load_project_text(text, "p.json")
    assert str(caught.value) == "p.json: 'learning_rate' is given twice in one object: keep one"
