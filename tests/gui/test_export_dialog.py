"""File ▸ Export Cluster Setup: every format writes files that parse; problems are listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from distloop.engine.config import Project, load_project_data
from distloop.engine.examples import load_example
from distloop.engine.export import DEFAULT_IMAGE, FORMATS, SECURITY_NOTE
from distloop.gui.export_dialog import ExportDialog
from distloop.gui.main_window import MainWindow

HOSTS = ["10.0.0.1:2222", "10.0.0.2:2222"]


def cluster_project(tf_config: dict | None = None) -> Project:
    data = load_example("seed").model_dump(mode="json")
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = tf_config or {
        "cluster": {"worker": HOSTS},
        "task": {"type": "worker", "index": 0},
    }
    return load_project_data(data)


def make_dialog(qtbot, project: Project, tmp_path: Path) -> ExportDialog:
    dialog = ExportDialog(project, tmp_path)
    qtbot.addWidget(dialog)
    return dialog


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_writes_files_that_parse(qtbot, tmp_path: Path, fmt: str) -> None:
    dialog = make_dialog(qtbot, cluster_project(), tmp_path)
    dialog.format_combo.setCurrentIndex(FORMATS.index(fmt))
    assert dialog.folder() == tmp_path / f"cluster-{fmt}"
    assert dialog.image_edit.isEnabled() == (fmt in ("k8s", "tfjob"))
    dialog.image_edit.setText("registry.example/distloop:1.0")
    written = dialog.export()
    assert written and dialog.written == written
    assert all(path.is_file() and path.parent.is_relative_to(dialog.folder()) for path in written)
    names = {path.relative_to(tmp_path / f"cluster-{fmt}").as_posix() for path in written}
    assert {"project.json", "README.md"} <= names
    assert dialog.files_list.count() == len(written)
    assert dialog.result_label.text().startswith(f"Wrote {len(written)} file(s)")
    assert json.loads((dialog.folder() / "project.json").read_text())["tf_config"]
    if fmt == "json":
        configs = [json.loads(p.read_text()) for p in written if p.parent.name == "tf_config"]
        assert [c["task"] for c in configs] == [
            {"type": "worker", "index": 0},
            {"type": "worker", "index": 1},
        ]
        assert all(c["cluster"] == {"worker": HOSTS} for c in configs)
    elif fmt == "shell":
        assert names >= {"run-10.0.0.1.sh", "run-10.0.0.2.sh"}
    else:
        (manifest,) = [p for p in written if p.suffix == ".yaml"]
        documents = list(yaml.safe_load_all(manifest.read_text()))
        assert documents and all(isinstance(d, dict) for d in documents)
        assert "registry.example/distloop:1.0" in manifest.read_text()


def test_the_security_note_is_always_shown(qtbot, tmp_path: Path) -> None:
    dialog = make_dialog(qtbot, cluster_project(), tmp_path)
    assert dialog.security_label.text() == SECURITY_NOTE
    assert "unauthenticated" in dialog.security_label.text()
    assert "worker:1 at 10.0.0.2:2222" in dialog.cluster_label.text()


def test_a_project_without_cluster_says_where_to_give_one(qtbot, tmp_path: Path) -> None:
    data = cluster_project().model_dump(mode="json")
    data["tf_config"] = None
    dialog = make_dialog(qtbot, load_project_data(data), tmp_path)
    assert "TF_CONFIG tab" in dialog.result_label.text()
    assert not dialog.export_button.isEnabled()
    assert dialog.export() == []
    assert "tf_config: export needs a cluster" in dialog.result_label.text()
    assert not (tmp_path / "cluster-json").exists() and not dialog.files_list.isVisible()


def test_a_single_process_project_says_which_strategies_have_clusters(qtbot, tmp_path):
    dialog = make_dialog(qtbot, load_example("seed"), tmp_path)
    assert "strategy.kind: a cluster setup is for multi_worker_mirrored" in (
        dialog.result_label.text()
    )
    assert not dialog.export_button.isEnabled()


def test_problems_of_the_cluster_are_listed(qtbot, tmp_path: Path) -> None:
    project = cluster_project(
        {
            "cluster": {"worker": HOSTS, "evaluator": ["10.0.0.3:2222"]},
            "task": {"type": "worker", "index": 0},
        }
    )
    dialog = make_dialog(qtbot, project, tmp_path)
    assert dialog.export() == []
    text = dialog.result_label.text()
    assert text.startswith("Nothing was written: the cluster has 1 problem:")
    assert "• tf_config.cluster.evaluator: " in text


def test_folder_choice_and_unwritable_folder(qtbot, tmp_path: Path) -> None:
    dialog = make_dialog(qtbot, cluster_project(), tmp_path)
    dialog.folder_edit.clear()
    assert dialog.export() == [] and "Choose an output folder" in dialog.result_label.text()
    chosen = tmp_path / "deploy"
    dialog.choose_folder = lambda: str(chosen)  # type: ignore[method-assign]
    dialog._on_browse()
    dialog.format_combo.setCurrentIndex(FORMATS.index("k8s"))
    assert dialog.folder() == chosen  # a chosen folder stays when the format changes
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    dialog.set_folder(blocker)
    assert dialog.export() == []
    assert dialog.result_label.text().startswith(f"Writing into {blocker} failed")
    assert dialog.image_edit.text() == DEFAULT_IMAGE


def test_the_window_opens_the_dialog_for_the_forms_project(
    qtbot, window: MainWindow, dialog_recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[ExportDialog] = []
    monkeypatch.setattr(ExportDialog, "exec", lambda self: opened.append(self) or 0)
    window.editor.strategy.fields.editors["kind"].set_value("multi_worker_mirrored")
    tf_config = {"cluster": {"worker": HOSTS}, "task": {"type": "worker", "index": 0}}
    assert window.editor.tf_config.import_text(json.dumps(tf_config))
    window.export_cluster_action.trigger()
    (dialog,) = opened
    assert "worker:0 at 10.0.0.1:2222, worker:1 at 10.0.0.2:2222" in dialog.cluster_label.text()
    assert dialog_recorder.shown == []

    window.editor.strategy.fields.editors["kind"].set_value("parameter_server")
    assert not window.validation.valid
    window.export_cluster_action.trigger()
    assert len(opened) == 1
    assert dialog_recorder.kinds() == ["problems"]
    assert dialog_recorder.problems[0] == window.validation.problems
