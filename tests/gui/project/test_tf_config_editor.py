"""The TF_CONFIG editor: building a cluster, the rules marked where they break, imports."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
from pathlib import Path

import pytest
from distloop.engine.problems import Problem
from distloop.engine.tf_config import TFConfig
from distloop.gui.project.tf_config_editor import PasteDialog, TFConfigEditor
from distloop.gui.project.tf_config_table import BAD_BACKGROUND
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtWidgets import QApplication, QLineEdit, QTableWidgetItem

PS_CLUSTER = {
    "cluster": {
        "chief": ["host0:2222"],
        "worker": ["host1:2222", "host2:2222"],
        "ps": ["host3:2222"],
    },
    "task": {"type": "worker", "index": 1},
}


@pytest.fixture
def editor(qtbot) -> TFConfigEditor:
    widget = TFConfigEditor()
    qtbot.addWidget(widget)
    return widget


class Dialogs:
    """Answers the editor's questions and records its reports instead of showing them."""

    def __init__(self, editor: TFConfigEditor, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rename_master = True
        self.import_with_problems = True
        self.asked: list[str] = []
        self.reports: list[list[Problem]] = []
        monkeypatch.setattr(editor, "ask_rename_master", self._ask_rename)
        monkeypatch.setattr(editor, "ask_import_with_problems", self._ask_import)
        monkeypatch.setattr(editor, "report_import_problems", self._report)

    def _ask_rename(self) -> bool:
        self.asked.append("rename master")
        return self.rename_master

    def _ask_import(self, _source: str, problems: list[Problem]) -> bool:
        self.asked.append("import with problems")
        self.reports.append(problems)
        return self.import_with_problems

    def _report(self, _source: str, problems: list[Problem]) -> None:
        self.reports.append(problems)


@pytest.fixture
def dialogs(editor: TFConfigEditor, monkeypatch: pytest.MonkeyPatch) -> Dialogs:
    return Dialogs(editor, monkeypatch)


def load(editor: TFConfigEditor, data: dict, strategy: str = "multi_worker_mirrored") -> None:
    """Shows a TF_CONFIG that may break rules (set_tf_config only takes valid ones)."""
    editor.set_strategy_kind(strategy)
    assert editor.import_text(json.dumps(data))


def cell(editor: TFConfigEditor, job: str, row: int) -> QTableWidgetItem:
    item = editor.tables[job].table.item(row, 0)
    assert item is not None
    return item


def cell_is_marked(item: QTableWidgetItem) -> bool:
    return item.background().color() == QColor(BAD_BACKGROUND)


def widget_is_marked(widget) -> bool:
    return BAD_BACKGROUND in widget.styleSheet()


def paths(editor: TFConfigEditor) -> list[str]:
    return [problem.path for problem in editor.problems()]


def edit_cell(qtbot, editor: TFConfigEditor, job: str, row: int, text: str) -> None:
    """Types into a cell the way a user does: F2, select all, type, Enter."""
    table = editor.tables[job].table
    table.setCurrentCell(row, 0)
    table.setFocus()
    qtbot.keyClick(table, Qt.Key.Key_F2)
    line_edit = QApplication.focusWidget()
    assert isinstance(line_edit, QLineEdit), f"F2 opened no editor; focus is on {line_edit}"
    qtbot.keyClick(line_edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(line_edit, text)
    qtbot.keyClick(line_edit, Qt.Key.Key_Return)
    # The delegate commits on Enter through a queued call.
    qtbot.waitUntil(lambda: table.item(row, 0).text() == text)


# --- building a cluster --------------------------------------------------------------------


def test_starts_without_tf_config(editor: TFConfigEditor) -> None:
    assert not editor.use_checkbox.isChecked()
    assert not editor.body.isEnabled()
    assert editor.tf_config_data() is None
    assert editor.tf_config() is None
    assert editor.problems() == []


def test_build_two_worker_cluster_by_clicking_and_typing(qtbot, editor: TFConfigEditor) -> None:
    editor.set_strategy_kind("multi_worker_mirrored")
    with qtbot.waitActive(editor):
        editor.show()
        editor.activateWindow()
    with qtbot.waitSignal(editor.changed):
        editor.use_checkbox.click()
    assert editor.body.isEnabled()

    qtbot.mouseClick(editor.tables["worker"].add_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(editor.tables["worker"].add_button, Qt.MouseButton.LeftButton)
    assert editor.tables["worker"].addresses() == ["localhost:12345", "localhost:12346"]
    assert editor.tables["worker"].table.verticalHeaderItem(1).text() == "1"

    with qtbot.waitSignal(editor.changed):
        edit_cell(qtbot, editor, "worker", 0, "host1:2222")
    edit_cell(qtbot, editor, "worker", 1, "host2:2222")
    editor.task_type_combo.setCurrentText("worker")
    editor.task_index_spin.setValue(1)

    expected = {
        "cluster": {"worker": ["host1:2222", "host2:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    assert json.loads(editor.preview.toPlainText()) == expected
    assert editor.tf_config_data() == expected
    assert editor.tf_config() == TFConfig.model_validate(expected)
    assert editor.env_string() == TFConfig.model_validate(expected).to_env()
    assert editor.problems() == []


def test_pretty_preview_is_the_same_json(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    editor.pretty_checkbox.setChecked(True)
    assert "\n  " in editor.preview.toPlainText()
    assert json.loads(editor.preview.toPlainText()) == PS_CLUSTER


def test_remove_selected_row(qtbot, editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    table = editor.tables["worker"]
    table.table.selectRow(0)
    with qtbot.waitSignal(editor.changed):
        qtbot.mouseClick(table.remove_button, Qt.MouseButton.LeftButton)
    assert table.addresses() == ["host2:2222"]


def test_chief_add_stops_at_one_row_and_says_why(editor: TFConfigEditor) -> None:
    editor.use_checkbox.setChecked(True)
    chief = editor.tables["chief"]
    chief.add_button.click()
    assert not chief.add_button.isEnabled()
    assert "at most one chief" in chief.add_button.toolTip()


def test_localhost_tasks_fill_the_strategy_minimum(editor: TFConfigEditor) -> None:
    editor.set_strategy_kind("parameter_server")
    editor.use_checkbox.click()
    editor.localhost_button.click()
    assert editor.tf_config_data() == {
        "cluster": {
            "chief": ["localhost:12345"],
            "worker": ["localhost:12346", "localhost:12347"],
            "ps": ["localhost:12348"],
        },
        "task": {"type": "worker", "index": 0},
    }
    assert editor.problems() == []


def test_set_tf_config_none_turns_it_off_without_changed(qtbot, editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    assert editor.use_checkbox.isChecked()
    with qtbot.assertNotEmitted(editor.changed):
        editor.set_tf_config(None)
    assert not editor.use_checkbox.isChecked()
    assert not editor.tables["worker"].table.isEnabled()
    assert editor.tf_config_data() is None
    assert editor.tf_config() is None


# --- rules, each marked where it breaks ------------------------------------------------------


def test_second_chief_is_marked_on_the_chief_table(editor: TFConfigEditor, dialogs) -> None:
    load(
        editor,
        {"cluster": {"chief": ["a:1", "b:1"], "worker": ["c:1"]}, "task": {"type": "worker"}},
    )
    assert editor.tables["chief"].addresses() == ["a:1", "b:1"]
    assert "tf_config.cluster.chief" in paths(editor)
    assert "at most one chief" in editor.tables["chief"].table.toolTip()
    assert editor.tf_config() is None


def test_second_evaluator_is_marked(editor: TFConfigEditor, dialogs) -> None:
    load(
        editor,
        {"cluster": {"worker": ["c:1"], "evaluator": ["a:1", "b:1"]}, "task": {"type": "worker"}},
    )
    assert "tf_config.cluster.evaluator" in paths(editor)
    assert "at most one evaluator" in editor.tables["evaluator"].title.toolTip()


def test_index_outside_its_job_marks_the_spin_box(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    editor.set_strategy_kind("parameter_server")
    assert not widget_is_marked(editor.task_index_spin)
    editor.tables["worker"].table.selectRow(1)
    editor.tables["worker"].remove_button.click()
    assert editor.task_index_spin.value() == 1, "removing a row must not silently change the task"
    assert paths(editor) == ["tf_config.task.index"]
    assert widget_is_marked(editor.task_index_spin)
    assert "index must be below" in editor.task_index_spin.toolTip()
    editor.task_index_spin.setValue(0)
    assert editor.problems() == []
    assert not widget_is_marked(editor.task_index_spin)
    assert editor.task_index_spin.maximum() == 0


def test_task_type_without_job_marks_the_combo(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    editor.task_type_combo.setCurrentText("chief")
    assert editor.tf_config_data()["task"] == {"type": "chief", "index": 0}
    editor.tables["chief"].remove_button.click()
    assert paths(editor) == ["tf_config.task.type"]
    assert widget_is_marked(editor.task_type_combo)


def test_duplicate_address_marks_the_second_cell(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    cell(editor, "ps", 0).setText("host1:2222")
    assert paths(editor) == ["tf_config.cluster.ps.0"]
    assert cell_is_marked(cell(editor, "ps", 0))
    assert not cell_is_marked(cell(editor, "worker", 0))
    assert "also worker:0" in cell(editor, "ps", 0).toolTip()


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("bad_host!:2222", "not a valid host name"),
        ("10.0.0.300:2222", "not a valid host name or IPv4"),
        ("host:0", "outside 1-65535"),
        ("host:65536", "outside 1-65535"),
        ("host:http", "not a number"),
        ("host", "has no port"),
        ("::1:2222", "in brackets"),
        ("[::zz]:2222", "not an IPv6 address"),
        (" host:2222", "spaces"),
        ("", "empty"),
    ],
)
def test_invalid_address_marks_its_cell(editor: TFConfigEditor, address: str, message: str) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    cell(editor, "worker", 1).setText(address)
    assert paths(editor) == ["tf_config.cluster.worker.1"]
    assert cell_is_marked(cell(editor, "worker", 1))
    assert message in cell(editor, "worker", 1).toolTip()
    assert not cell_is_marked(cell(editor, "worker", 0))
    assert editor.tf_config() is None
    assert editor.tf_config_data()["cluster"]["worker"][1] == address


@pytest.mark.parametrize("address", ["[::1]:2222", "10.1.2.3:1", "node-1.example.com:65535"])
def test_valid_addresses_are_accepted(editor: TFConfigEditor, address: str) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    cell(editor, "worker", 1).setText(address)
    assert editor.problems() == []
    assert not cell_is_marked(cell(editor, "worker", 1))


def test_marks_clear_once_fixed(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    cell(editor, "worker", 1).setText("host:0")
    cell(editor, "worker", 1).setText("host:1")
    assert editor.problems() == []
    assert not cell_is_marked(cell(editor, "worker", 1))
    assert cell(editor, "worker", 1).toolTip() == ""
    assert editor.problem_list.isHidden()


def test_ps_with_multi_worker_mirrored_marks_the_ps_table(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    editor.set_strategy_kind("parameter_server")
    assert editor.problems() == []
    editor.set_strategy_kind("multi_worker_mirrored")
    assert paths(editor) == ["tf_config.cluster.ps"]
    assert "only used by parameter_server" in editor.tables["ps"].table.toolTip()
    assert editor.problem_list.count() == 1


def test_parameter_server_needs_chief_and_worker(editor: TFConfigEditor) -> None:
    editor.set_strategy_kind("parameter_server")
    editor.set_tf_config(
        TFConfig.model_validate({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps"}})
    )
    messages = [problem.message for problem in editor.problems()]
    assert any("needs a chief" in message for message in messages)
    assert any("at least one worker" in message for message in messages)
    assert widget_is_marked(editor.cluster_frame)


def test_tf_config_with_mirrored_marks_the_checkbox(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    editor.set_strategy_kind("mirrored")
    assert paths(editor) == ["tf_config"]
    assert widget_is_marked(editor.use_checkbox)
    editor.use_checkbox.setChecked(False)
    assert editor.problems() == []
    assert not widget_is_marked(editor.use_checkbox)


def test_parameter_server_without_tf_config_is_a_problem(editor: TFConfigEditor) -> None:
    editor.set_strategy_kind("parameter_server")
    assert paths(editor) == ["tf_config"]
    assert widget_is_marked(editor.use_checkbox)


def test_unknown_strategy_kind_is_refused(editor: TFConfigEditor) -> None:
    with pytest.raises(ValueError, match="unknown strategy kind"):
        editor.set_strategy_kind("mirrorred")


def test_problem_list_click_goes_to_the_cell(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    cell(editor, "worker", 1).setText("host:0")
    editor.problem_list.itemClicked.emit(editor.problem_list.item(0))
    assert editor.tables["worker"].table.currentRow() == 1


def test_pushed_project_problems_are_marked_until_the_next_edit(editor: TFConfigEditor) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    editor.mark_problems(
        [
            Problem(("tf_config", "cluster", "worker", 0), "unreachable from this machine"),
            Problem(("model", "layers", 0), "not mine"),
        ]
    )
    assert cell_is_marked(cell(editor, "worker", 0))
    assert "unreachable" in cell(editor, "worker", 0).toolTip()
    assert editor.problem_list.count() == 1
    assert editor.problems() == []
    cell(editor, "worker", 0).setText("host9:2222")
    assert not cell_is_marked(cell(editor, "worker", 0))


# --- import ------------------------------------------------------------------------------


def test_paste_dialog_imports_valid_text(qtbot, editor: TFConfigEditor, dialogs) -> None:
    editor.paste_button.click()
    dialog = editor.findChild(PasteDialog)
    dialog.text_edit.setPlainText(json.dumps(PS_CLUSTER))
    with qtbot.waitSignal(editor.changed):
        dialog.import_button.click()
        assert not dialog.isVisible()
    assert editor.tf_config_data() == PS_CLUSTER
    assert editor.use_checkbox.isChecked()
    assert dialogs.reports == []


def test_paste_dialog_stays_open_on_malformed_json(qtbot, editor: TFConfigEditor, dialogs) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    editor.paste_button.click()
    dialog = editor.findChild(PasteDialog)
    dialog.text_edit.setPlainText('{"cluster": {"worker": ["a:1",]}')
    with qtbot.assertNotEmitted(editor.changed):
        dialog.import_button.click()
    assert dialog.isVisible()
    assert editor.tf_config_data() == PS_CLUSTER
    [problems] = dialogs.reports
    assert len(problems) == 1
    assert "not valid JSON" in problems[0].message
    assert "line 1" in problems[0].message


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("[1, 2]", ()),
        ('{"cluster": {"worker": [1]}, "task": {"type": "worker"}}', ("cluster", "worker", 0)),
        ('{"cluster": {"worker": ["a:1"]}}', ("task",)),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "boss"}}', ("task", "type")),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"index": -1}}', ("task", "index")),
        ('{"cluster": {"boss": ["a:1"]}, "task": {"type": "worker"}}', ("cluster", "boss")),
        ('{"cluster": {}, "task": {}, "extra": 1}', ("extra",)),
        ("1" * 5000, ()),
        ("[" * 100_000, ()),
    ],
)
def test_unusable_text_is_refused_with_its_problems(
    editor: TFConfigEditor, dialogs, text: str, path: tuple
) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    assert not editor.import_text(text)
    assert editor.tf_config_data() == PS_CLUSTER
    [problems] = dialogs.reports
    assert path in [problem.loc for problem in problems]
    assert "import with problems" not in dialogs.asked


def test_text_breaking_rules_is_imported_only_if_the_user_agrees(
    editor: TFConfigEditor, dialogs
) -> None:
    editor.set_tf_config(TFConfig.model_validate(PS_CLUSTER))
    text = '{"cluster": {"worker": ["a:1", "a:1"]}, "task": {"type": "worker", "index": 5}}'
    dialogs.import_with_problems = False
    assert not editor.import_text(text)
    assert editor.tf_config_data() == PS_CLUSTER
    assert {p.loc for p in dialogs.reports[0]} == {("cluster", "worker", 1), ("task", "index")}

    dialogs.import_with_problems = True
    assert editor.import_text(text)
    assert editor.tf_config_data() == json.loads(text)
    assert cell_is_marked(cell(editor, "worker", 1))
    assert widget_is_marked(editor.task_index_spin)
    assert editor.task_index_spin.value() == 5


def test_master_job_is_renamed_to_chief(editor: TFConfigEditor, dialogs) -> None:
    text = json.dumps(
        {"cluster": {"master": ["m:1"], "worker": ["w:1"]}, "task": {"type": "worker"}}
    )
    assert editor.import_text(text)
    assert dialogs.asked == ["rename master"]
    assert editor.tf_config_data() == {
        "cluster": {"chief": ["m:1"], "worker": ["w:1"]},
        "task": {"type": "worker", "index": 0},
    }
    assert editor.tf_config() is not None


def test_master_kept_is_refused(editor: TFConfigEditor, dialogs) -> None:
    dialogs.rename_master = False
    text = json.dumps({"cluster": {"master": ["m:1"]}, "task": {"type": "worker"}})
    assert not editor.import_text(text)
    assert editor.tf_config_data() is None
    assert any("'chief'" in p.message for p in dialogs.reports[-1])


def test_import_from_file(
    qtbot, editor: TFConfigEditor, dialogs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "tf_config.json"
    path.write_text(json.dumps(PS_CLUSTER, indent=2), encoding="utf-8")
    monkeypatch.setattr(editor, "choose_import_file", lambda: str(path))
    with qtbot.waitSignal(editor.changed):
        editor.file_button.click()
    assert editor.tf_config_data() == PS_CLUSTER


def test_import_from_a_file_with_a_byte_order_mark(
    editor: TFConfigEditor, dialogs, tmp_path: Path
) -> None:
    path = tmp_path / "tf_config.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(PS_CLUSTER).encode())
    assert editor.import_file(path)
    assert editor.tf_config_data() == PS_CLUSTER
    broken = {"cluster": {"worker": ["a:1", "a:1"]}, "task": {"type": "worker", "index": 0}}
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(broken).encode())
    assert editor.import_file(path)  # a rule broken, imported as the user agreed
    assert editor.tf_config_data() == broken


def test_import_from_missing_file_reports(editor: TFConfigEditor, dialogs, tmp_path: Path) -> None:
    assert not editor.import_file(tmp_path / "missing.json")
    assert "cannot read" in dialogs.reports[0][0].message


def test_import_from_environment(
    editor: TFConfigEditor, dialogs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_CONFIG", TFConfig.model_validate(PS_CLUSTER).to_env())
    editor.env_button.click()
    assert editor.tf_config_data() == PS_CLUSTER


def test_import_from_unset_environment_reports(
    editor: TFConfigEditor, dialogs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    editor.env_button.click()
    assert "not set" in dialogs.reports[0][0].message
    assert editor.tf_config_data() is None


# --- copying ---------------------------------------------------------------------------


def test_copy_puts_the_env_string_on_the_clipboard(qtbot, editor: TFConfigEditor) -> None:
    config = TFConfig.model_validate(PS_CLUSTER)
    editor.set_tf_config(config)
    qtbot.mouseClick(editor.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == config.to_env()


def test_copy_as_shell_export(editor: TFConfigEditor) -> None:
    config = TFConfig.model_validate(PS_CLUSTER)
    editor.set_tf_config(config)
    editor.copy_shell_export()
    assert QGuiApplication.clipboard().text() == f"export TF_CONFIG='{config.to_env()}'"


# --- robustness ------------------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["cluster", "task", "type", "index", "worker", "chief", "master", "ps"])
            | st.text(max_size=5),
            children,
            max_size=3,
        )
    ),
    max_leaves=10,
)


_addresses = st.sampled_from(["a:1", "b:2", "[::1]:3", "a:1", "a:0", "x", ""]) | st.text(max_size=8)
_tf_configs = st.fixed_dictionaries(
    {
        "cluster": st.dictionaries(
            st.sampled_from(["chief", "worker", "ps", "evaluator", "master", "boss"]),
            st.lists(_addresses, max_size=3),
            max_size=4,
        ),
        "task": st.fixed_dictionaries(
            {
                "type": st.sampled_from(["chief", "worker", "ps", "evaluator", "master"]),
                "index": st.integers(min_value=-1) | st.sampled_from([2**31, 1.0, "1", True]),
            }
        ),
    }
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=st.text(max_size=60) | st.one_of(_json_values, _tf_configs).map(json.dumps))
def test_any_text_imports_or_yields_problems(editor: TFConfigEditor, dialogs, text: str) -> None:
    before = len(dialogs.reports)
    imported = editor.import_text(text)
    if imported:
        assert editor.use_checkbox.isChecked()
    else:
        [problems] = dialogs.reports[before:]
        assert problems
        assert all(isinstance(problem, Problem) for problem in problems)
    assert all(isinstance(problem, Problem) for problem in editor.problems())


def test_the_tf_config_tab_fits_the_forms_dock_at_its_default_width(make_window, qtbot) -> None:
    """Its form was wider than the dock: a horizontal scrollbar covered the last row.

    The page, with a vertical scrollbar and the dock's margins, fits the dock's default
    width with room to spare (a wider font or style)."""
    from distloop.gui.shell.main_window import PROJECT_DOCK_WIDTH
    from PySide6.QtWidgets import QScrollArea

    window = make_window()
    window.editor.strategy.fields.editors["kind"].setCurrentText("multi_worker_mirrored")
    window.editor.tf_config.use_checkbox.setChecked(True)
    window.editor.reveal(Problem(("tf_config",), ""))
    page = window.editor.currentWidget()
    assert isinstance(page, QScrollArea)
    margins = window.editor.parentWidget().layout().contentsMargins()
    needed = (
        page.widget().minimumSizeHint().width()
        + page.verticalScrollBar().sizeHint().width()
        + margins.left()
        + margins.right()
    )
    assert needed <= PROJECT_DOCK_WIDTH - 20, needed


def test_a_long_problem_is_shown_whole_wrapped_at_the_docks_default_width(
    make_window, qtbot
) -> None:
    """The TF_CONFIG tab's own problem list cut a long message at the dock's edge (one row
    of the first row's height each): each problem wraps to as many lines as it needs, the
    list is as tall as its rows, and the tooltip holds the full text."""
    from distloop.gui.shell.main_window import PROJECT_DOCK_WIDTH

    window = make_window()
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    editor = window.editor.tf_config
    window.editor.strategy.fields.editors["kind"].setCurrentText("multi_worker_mirrored")
    editor.use_checkbox.setChecked(True)
    workers = {"cluster": {"worker": ["host0:2222", "host1:2222"]}, "task": {"type": "worker"}}
    editor.set_tf_config(TFConfig.model_validate(workers))
    long = (
        "unreachable from this machine: host1 answered no connection on port 2222 within "
        "5 s, so the cluster cannot start; check the address, the firewall and that "
        "the task listens there"
    )
    editor.mark_problems(
        [
            Problem(("tf_config", "cluster", "worker", 0), long),
            Problem(("tf_config", "cluster", "worker", 1), "short"),
        ]
    )
    window.editor.reveal(Problem(("tf_config",), ""))
    problems = editor.problem_list
    assert problems.isVisible() and problems.width() < PROJECT_DOCK_WIDTH
    viewport = problems.viewport()

    def shown_whole() -> bool:
        first, second = problems.item(0), problems.item(1)
        text = first.text()
        wrapped = problems.fontMetrics().boundingRect(
            0, 0, viewport.width() - 8, 10_000, Qt.TextFlag.TextWordWrap, text
        )
        rect, last = problems.visualItemRect(first), problems.visualItemRect(second)
        return (
            rect.height() >= wrapped.height()
            and rect.width() <= viewport.width()
            and last.bottom() <= viewport.height()
        )

    qtbot.waitUntil(shown_whole, timeout=5_000)
    item = problems.item(0)
    assert item.text().endswith(long) and item.toolTip() == item.text()
    assert problems.fontMetrics().horizontalAdvance(item.text()) > viewport.width()  # wrapped
    assert not problems.horizontalScrollBar().isVisible()
    assert not problems.verticalScrollBar().isVisible()  # two problems: no need to scroll
