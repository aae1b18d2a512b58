"""The forms show every setting of a project, and reading them back gives the same project."""

from __future__ import annotations

import pytest
from distloop.engine.config import (
    DATA_MODELS,
    CustomCode,
    DenseLayer,
    DropoutLayer,
    EvaluationConfig,
    Initializer,
    LossConfig,
    ModelConfig,
    Project,
    Regularizer,
    StrategyConfig,
    TrainingConfig,
)
from distloop.engine.examples import example_names, load_example
from distloop.engine.problems import Loc, Problem
from distloop.engine.validation import differences, validate
from distloop.gui.project.field_editors import ChoiceEdit
from distloop.gui.project.optimizer_form import OPTIMIZER_MODELS
from distloop.gui.project.project_editor import ProjectEditor
from PySide6.QtWidgets import QWidget


def _variant(**sections: object) -> Project:
    """The seed example with whole sections replaced."""
    return Project.model_validate({**load_example("seed").model_dump(mode="json"), **sections})


VARIANTS = {
    "adam": _variant(optimizer={"kind": "adam", "learning_rate": 3e-4, "amsgrad": True}),
    "rmsprop": _variant(optimizer={"kind": "rmsprop", "centered": True, "rho": 0.8}),
    "adagrad": _variant(optimizer={"kind": "adagrad", "epsilon": 1e-6}),
    "huber": _variant(
        loss={"kind": "huber", "delta": 2.0},
    ),
    "numpy": _variant(
        data={"source": "numpy", "path": "data/train.npz", "features_key": "f", "labels_key": "l"},
    ),
    "csv": _variant(
        data={
            "source": "csv",
            "path": "/tmp/d.csv",
            "label_column": "y",
            "global_batch_size": 32,
            "shuffle_buffer": 100,
            "drop_remainder": True,
        },
    ),
    "steps": _variant(
        training={"steps": 12345, "seed": 7, "per_replica_losses": True, "stop_on_nan": False},
    ),
    "one_device": _variant(strategy={"kind": "one_device", "devices": ["/cpu:0"]}),
    "mirrored_cpu": _variant(
        strategy={"kind": "mirrored", "cpu_replicas": 4, "cross_device_ops": "nccl"}
    ),
    "multi_worker": _variant(
        strategy={
            "kind": "multi_worker_mirrored",
            "communication": "ring",
            "communication_timeout_s": 30.0,
        },
        tf_config={
            "cluster": {"worker": ["host1:2222", "host2:2222"]},
            "task": {"type": "worker", "index": 1},
        },
    ),
    "launch_hosts": _variant(
        strategy={"kind": "multi_worker_mirrored"},
        tf_config={"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker"}},
        launch={"hosts": {"host2": {"destination": "me@10.0.0.9", "port": 2200}}},
    ),
    "tpu": _variant(strategy={"kind": "tpu", "tpu": "grpc://10.0.0.2:8470"}),
    "layers": _variant(
        model={
            "input_shape": [1],
            "layers": [
                {
                    "kind": "dense",
                    "units": 8,
                    "activation": "gelu",
                    "use_bias": False,
                    "kernel_initializer": {"kind": "random_normal", "stddev": 0.2},
                },
                {"kind": "dropout", "rate": 0.25},
                {
                    "kind": "dense",
                    "units": 1,
                    "kernel_initializer": {"kind": "constant", "value": -0.5},
                    "kernel_regularizer": {"l1": 0.001, "l2": 0.0},
                },
            ],
        },
    ),
    "described": _variant(name="x" * 200, description="two\nlines"),
    "training_extras": _variant(
        training={
            "epochs": 2,
            "steps_per_execution": 8,
            "checkpoint_every": 50,
            "jit_compile": True,
        }
    ),
    "evaluation_split": _variant(
        data={"source": "synthetic_regression", "examples": 500, "global_batch_size": 10},
        loss={"kind": "mean_squared_error"},
        evaluation={"every": 25, "split": 0.2},
    ),
    "evaluation_source": _variant(
        evaluation={
            "every": 10,
            "source": {
                "source": "constant",
                "features": [2.0],
                "labels": [1.0],
                "examples": 40,
                "global_batch_size": 8,
            },
        },
    ),
    "custom_code": _variant(custom_code={"path": "steps/my_step.py"}),
}


@pytest.fixture
def editor(qtbot) -> ProjectEditor:
    editor = ProjectEditor()
    qtbot.addWidget(editor)
    return editor


@pytest.mark.parametrize("name", example_names())
def test_examples_round_trip(editor: ProjectEditor, name: str) -> None:
    project = load_example(name)
    editor.set_project(project)
    assert validate(editor.data()).project == project


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_setting_round_trips(editor: ProjectEditor, name: str) -> None:
    project = VARIANTS[name]
    editor.set_project(project)
    shown = validate(editor.data())
    assert shown.problems == []
    assert shown.project == project


def test_loading_a_project_is_not_an_edit(qtbot, editor: ProjectEditor) -> None:
    with qtbot.assertNotEmitted(editor.edited):
        editor.set_project(VARIANTS["layers"])


def test_switching_kinds_keeps_each_kinds_values(editor: ProjectEditor) -> None:
    editor.set_project(load_example("seed"))
    optimizer = editor.optimizer
    optimizer.kind.set_value("adam")
    optimizer.pages["adam"].editors["learning_rate"].set_value(0.005)
    optimizer.kind.set_value("sgd")
    assert editor.data()["optimizer"]["learning_rate"] == 0.01
    optimizer.kind.set_value("adam")
    assert editor.data()["optimizer"] == {**ADAM_DEFAULTS, "learning_rate": 0.005}


ADAM_DEFAULTS = {
    "kind": "adam",
    "learning_rate": 0.001,
    "beta_1": 0.9,
    "beta_2": 0.999,
    "epsilon": 1e-7,
    "amsgrad": False,
}


def test_fields_that_do_not_apply_are_greyed_out(editor: ProjectEditor) -> None:
    editor.set_project(load_example("seed"))
    fields = editor.strategy.fields.editors
    assert fields["cpu_replicas"].isEnabled()  # mirrored uses it
    fields["kind"].set_value("one_device")
    assert not fields["cpu_replicas"].isEnabled()
    assert fields["devices"].isEnabled()
    fields["kind"].set_value("mirrored")
    fields["cpu_replicas"].set_value(2)
    fields["kind"].set_value("one_device")  # the user's choice drops what it does not take
    assert fields["cpu_replicas"].value() == 1 and not fields["cpu_replicas"].isEnabled()
    project = load_example("seed")
    strategy = project.strategy.model_copy(update={"kind": "one_device", "cpu_replicas": 2})
    editor.set_project(project.model_copy(update={"strategy": strategy}))
    assert fields["cpu_replicas"].isEnabled()  # a file's value stays editable to be cleared
    loss = editor.loss.fields.editors
    assert loss["from_logits"].isEnabled() and not loss["delta"].isEnabled()


def test_out_of_range_values_on_load_are_reported() -> None:
    loaded = {"data": {"seed": 2**40}, "name": "a"}
    shown = {"data": {"seed": 2**31 - 1}, "name": "a"}
    assert differences(shown, loaded) == ["data.seed"]
    assert differences(loaded, loaded) == []


def _keys(section: object) -> set[str]:
    assert isinstance(section, dict)
    return set(section)


def test_the_forms_hold_every_field_of_the_project_file(editor: ProjectEditor) -> None:
    """A field added to a model must get an editor: this fails until it does."""
    editor.set_project(VARIANTS["layers"])
    data = editor.data()
    assert _keys(data) == set(Project.model_fields)
    for section, model in {
        "strategy": StrategyConfig,
        "model": ModelConfig,
        "loss": LossConfig,
        "training": TrainingConfig,
    }.items():
        assert _keys(data[section]) == set(model.model_fields), section
    dense, dropout, last = data["model"]["layers"]
    assert _keys(dense) == set(DenseLayer.model_fields)
    assert _keys(dropout) == set(DropoutLayer.model_fields)
    assert _keys(dense["kernel_initializer"]) == set(Initializer.model_fields)
    assert _keys(last["kernel_regularizer"]) == set(Regularizer.model_fields)
    for kind, model in OPTIMIZER_MODELS.items():
        editor.optimizer.kind.set_value(kind)
        assert _keys(editor.data()["optimizer"]) == set(model.model_fields), kind
    for source, model in DATA_MODELS.items():
        editor.data_form.source.set_value(source)
        assert _keys(editor.data()["data"]) == set(model.model_fields), source
    editor.set_project(VARIANTS["evaluation_source"])
    evaluation = editor.data()["evaluation"]
    assert _keys(evaluation) == set(EvaluationConfig.model_fields)
    assert _keys(evaluation["source"]) == set(DATA_MODELS["constant"].model_fields)
    editor.set_project(VARIANTS["custom_code"])
    assert _keys(editor.data()["custom_code"]) == set(CustomCode.model_fields)


def _kind_selectors(editor: ProjectEditor) -> dict[Loc, ChoiceEdit]:
    """Every choice that picks what a section is: a kind, a layer's initializer, a data source."""
    return {
        loc: widget
        for loc, widget in editor.targets().items()
        if isinstance(widget, ChoiceEdit)
        and (loc[-1] == "kind" or loc[-1] == "kernel_initializer" or loc == ("data", "source"))
    }


@pytest.mark.parametrize("name", example_names())
def test_every_kind_selector_stays_enabled_for_every_kind(editor: ProjectEditor, name: str) -> None:
    """Greying out what a kind ignores once greyed out the Strategy kind itself (mirrored)."""
    editor.set_project(load_example(name))
    selectors = _kind_selectors(editor)
    assert {loc[0] for loc in selectors} == {"strategy", "model", "data", "optimizer", "loss"}
    for loc, selector in selectors.items():
        for index in range(selector.count()):
            selector.setCurrentIndex(index)  # as a user's pick: the form refreshes
            disabled = [
                other for other, widget in _kind_selectors(editor).items() if not widget.isEnabled()
            ]
            assert disabled == [], f"{'.'.join(map(str, loc))} = {selector.currentText()}"


def test_fields_start_at_the_same_place_whatever_the_kind(qtbot, editor: ProjectEditor) -> None:
    """A data source's and a layer kind's fields moved sideways as the kind changed."""
    editor.set_project(load_example("seed"))
    editor.show()
    data = editor.data_form

    def left(widget: QWidget) -> int:
        return widget.mapTo(editor, widget.rect().topLeft()).x()

    editor.setCurrentWidget(data.parentWidget().parentWidget().parentWidget())
    batching = left(data.batching.editors["global_batch_size"])
    starts = set()
    for source in ("constant", "csv", "image_folder", "tfrecord"):
        data.source.set_value(source)
        qtbot.wait(10)
        first = next(iter(data.pages[source].editors.values()))
        starts.add(left(first))
    assert starts == {batching}
    card = editor.model.cards[0]
    editor.setCurrentWidget(editor.model.parentWidget().parentWidget().parentWidget())
    lefts = set()
    for kind in ("dense", "conv2d", "dropout"):
        card.kind.set_value(kind)
        qtbot.wait(10)
        lefts.add(left(next(iter(card.forms[kind].editors.values()))))
    assert len(lefts) == 1 and lefts == {left(card.initializer.editors["kind"])}


def test_data_field_widths_do_not_change_between_loads(make_window, qtbot) -> None:
    """After File ▸ Examples the source's fields came back narrower than the batching
    fields under them (the Path field from ~200 to ~120 px), until the dock was resized."""
    window = make_window()
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    form = window.editor.data_form
    window.editor.reveal(Problem(("data", "source"), ""))
    widths: dict[str, set[int]] = {}
    for example in ("digits", "classification", "languages", "seed", "digits"):
        window.document.open_example(example)
        batch = form.batching.editors["global_batch_size"]

        def laid_out(batch=batch) -> bool:
            return all(
                editor.width() == batch.width()
                for editor in form.pages[form.source.value()].editors.values()
            )

        qtbot.waitUntil(laid_out, timeout=5000)
        for name, editor in form.pages[form.source.value()].editors.items():
            widths.setdefault(name, set()).add(editor.width())
    assert all(len(found) == 1 for found in widths.values()), widths
    path = form.pages["image_folder"].editors["path"]
    assert path.line.width() >= 0.8 * path.width()  # the path, not its Browse button
