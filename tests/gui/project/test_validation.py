"""Live validation: each problem marks the widget that owns it, in the model's own words."""

from __future__ import annotations

import pytest
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project_data
from distloop.gui.project.problem_marks import is_marked, problem_tooltip
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtWidgets import QAbstractSpinBox


def _engine_problems(window: MainWindow) -> list[str]:
    """What the engine's own loader (the CLI's) says about the forms' content."""
    try:
        load_project_data(window.editor.data())
    except ProblemsError as exc:
        return [problem.message for problem in exc.problems]
    return []


def test_feature_count_mismatch_marks_the_features_field(window: MainWindow) -> None:
    features = window.editor.data_form.pages["constant"].editors["features"]
    features.setText("1.0, 2.0")
    message = "has 2 value(s) but the model's input_shape [1] takes 1"
    assert message in _engine_problems(window)
    assert is_marked(features)
    assert message in problem_tooltip(features)
    assert not window.run_action.isEnabled()
    assert window.validity.text() == "Cannot run: 1 problem"
    assert [str(p) for p in window.problems_panel.problems()] == [f"data.features: {message}"]
    assert window.is_modified() and window.isWindowModified()

    features.setText("1.0")
    assert not is_marked(features)
    assert "has 2 value(s)" not in problem_tooltip(features)
    assert window.run_action.isEnabled()
    assert window.validity.text() == "Ready to run"
    assert not window.is_modified()


def test_a_new_strategy_kind_drops_the_settings_it_does_not_take(window: MainWindow) -> None:
    fields = window.editor.strategy.fields.editors
    fields["cpu_replicas"].set_value(2)
    assert window.run_action.isEnabled()  # mirrored over 2 CPU replicas is fine
    fields["kind"].set_value("multi_worker_mirrored")  # kept cpu_replicas 2: Run blocked
    assert window.editor.data()["strategy"]["cpu_replicas"] == 1
    assert not is_marked(fields["cpu_replicas"])
    assert window.validation.valid
    fields["kind"].set_value("one_device")
    fields["cpu_replicas"].set_value(2)  # typed where it does not apply: still marked
    assert is_marked(fields["cpu_replicas"])
    assert "cpu_replicas applies only to mirrored, not one_device" in problem_tooltip(
        fields["cpu_replicas"]
    )
    assert not is_marked(fields["kind"])
    assert not window.run_action.isEnabled()


def test_the_strategy_hints_match_what_the_engine_does(window: MainWindow) -> None:
    strategy = window.editor.strategy
    fields = strategy.fields.editors
    fields["kind"].set_value("multi_worker_mirrored")
    timeout = fields["communication_timeout_s"]
    assert timeout.value() is None and timeout.spin.value() == 60.0  # the cluster's default
    fields["kind"].set_value("one_device")
    assert fields["devices"].placeholderText().startswith("the first GPU (or the CPU)")
    fields["kind"].set_value("mirrored")
    assert fields["devices"].placeholderText().startswith("all GPUs (or the CPU)")


def test_text_that_is_not_a_number_is_reported_by_pydantic(window: MainWindow) -> None:
    features = window.editor.data_form.pages["constant"].editors["features"]
    features.setText("abc")
    problems = window.problems_panel.problems()
    assert [p.path for p in problems] == ["data.features.0"]
    assert "valid number" in problems[0].message
    assert is_marked(features)


def test_layer_problem_marks_the_layer_field(window: MainWindow) -> None:
    window.editor.model.cards[0].initializer.editors["kind"].set_value("constant")
    value = window.editor.model.cards[0].initializer.editors["value"]
    assert is_marked(value)
    assert "a constant initializer needs a value" in problem_tooltip(value)
    value.set_value(0.5)
    assert not is_marked(value) and window.validation.valid


def test_problem_tab_gets_an_icon_and_clicking_a_problem_shows_it(window: MainWindow) -> None:
    editor = window.editor
    data_tab = editor.indexOf(editor.data_form.parentWidget().parentWidget().parentWidget())
    assert editor.tabIcon(data_tab).isNull()
    editor.data_form.batching.editors["global_batch_size"].set_value(1)
    editor.strategy.fields.editors["cpu_replicas"].set_value(2)
    problems = window.problems_panel.problems()
    assert [p.path for p in problems] == ["data.global_batch_size"]
    assert not editor.tabIcon(data_tab).isNull()
    editor.setCurrentIndex(0)
    window.problems_panel.problem_activated.emit(problems[0])
    assert editor.currentIndex() == data_tab


def test_tf_config_problems_reach_the_tf_config_tab(window: MainWindow) -> None:
    editor = window.editor
    editor.strategy.fields.editors["kind"].set_value("parameter_server")
    problems = window.problems_panel.problems()
    assert [p.path for p in problems] == ["tf_config"]
    tf_tab = [editor.tabText(index) for index in range(editor.count())].index("TF_CONFIG")
    assert editor.tab_of(problems[0]) == tf_tab
    assert not editor.tabIcon(tf_tab).isNull()
    assert not window.run_action.isEnabled()


def test_summary_follows_the_project(window: MainWindow) -> None:
    summary = window.editor.summary.values
    assert summary["Model"].text() == "input [1], 1 layer (1 dense), 2 parameters"
    assert summary["Training"].text() == "1 epoch = 100 steps, seed 0"
    window.editor.data_form.batching.editors["global_batch_size"].set_value(1)
    assert summary["Training"].text() == "1 epoch = 1,000 steps, seed 0"


def test_uneven_batches_are_notes_not_problems(window: MainWindow) -> None:
    window.editor.data_form.batching.editors["global_batch_size"].set_value(300)
    assert window.validation.valid
    assert window.validation.notes
    assert window.problems_panel.list.count() == len(window.validation.notes)
    assert window.run_action.isEnabled()


def _type_and_leave(qtbot, window: MainWindow, spin: QAbstractSpinBox, text: str) -> None:
    """Selects the spin box's text, types ``text`` and moves the focus on, as a user does."""
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    spin.selectAll()
    qtbot.keyClicks(spin, text)
    window.editor.general.editors["name"].setFocus()
    qtbot.waitUntil(lambda: not spin.hasFocus())


@pytest.mark.parametrize(
    ("loc", "typed", "value"),
    [
        (("strategy", "cpu_replicas"), "-64", -64),  # once silently 64: "-" could not be typed
        (("data", "global_batch_size"), "0", 0),  # once put back to 10 on leaving the field
        (("optimizer", "learning_rate"), "0", 0.0),
        (("optimizer", "learning_rate"), "250", 250.0),
    ],
)
def test_a_number_typed_out_of_range_stays_and_is_a_problem(
    qtbot, window: MainWindow, loc: tuple[str, str], typed: str, value: float
) -> None:
    window.show()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    spin = window.editor.targets()[loc]
    assert isinstance(spin, QAbstractSpinBox)
    _type_and_leave(qtbot, window, spin, typed)
    assert float(spin.text()) == float(typed)  # kept, not clamped or put back
    assert window.editor.data()[loc[0]][loc[1]] == value
    assert is_marked(spin)
    assert [p.loc for p in window.problems_panel.problems()] == [loc]
    assert problem_tooltip(spin).startswith("• Input should be")
    assert not window.run_action.isEnabled()
    spin.stepBy(1)  # the arrows come back into the range, and the mark goes
    assert not is_marked(spin)
    assert window.run_action.isEnabled()


def test_a_keras_file_nested_past_the_recursion_limit_is_a_problem_on_its_field(
    tmp_path,
) -> None:
    """Every validation of the window read it: a RecursionError (twice) before."""
    import zipfile

    from distloop.engine.validation import validate

    path = tmp_path / "deep.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", "[" * 100_000 + "]" * 100_000)
    (tmp_path / "t.csv").write_text("a,b,c,y\n1,2,3,4\n")
    data = {
        "schema_version": 1,
        "model": {"kind": "keras_file", "path": str(path), "input_shape": [3]},
        "loss": {"kind": "mean_squared_error"},
        "data": {"source": "csv", "path": "t.csv", "label_column": "y", "global_batch_size": 1},
        "training": {"steps": 1},
    }
    found = validate(data, tmp_path)
    assert [(p.path, p.message) for p in found.problems] == [
        ("model.path", f"{path}'s config.json is nested too deeply to be a model's config")
    ]


def test_an_empty_field_is_said_in_plain_words(window: MainWindow) -> None:
    window.editor.data_form.source.set_value("csv")  # its path and label column start empty
    assert sorted(str(p) for p in window.validation.problems) == [
        "data.label_column: must not be empty",
        "data.path: must not be empty",
    ]
