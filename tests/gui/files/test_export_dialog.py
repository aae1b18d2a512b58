"""File ▸ Export Cluster Setup: every format writes files that parse; problems are listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.exports import FORMATS, format_named
from distloop.engine.exports.base import SECURITY_NOTE
from distloop.engine.exports.pods import DEFAULT_IMAGE
from distloop.engine.project_file import load_project_data
from distloop.gui.files.export_dialog import ExportDialog
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtCore import Qt

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
    assert dialog.image_edit.isEnabled() == (fmt in ("k8s", "tfjob", "trainjob"))
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
    elif fmt == "slurm":
        assert "slurm.sbatch" in names
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


def test_slurm_needs_no_tf_config_and_the_others_say_so(qtbot, tmp_path: Path) -> None:
    """Slurm's tasks learn their cluster where they run: the dialog opened it at all only
    after it knew the format (it failed with a KeyError for it)."""
    data = cluster_project().model_dump(mode="json")
    data["tf_config"] = None
    dialog = make_dialog(qtbot, load_project_data(data), tmp_path)
    assert not dialog.export_button.isEnabled()
    dialog.format_combo.setCurrentIndex(FORMATS.index("slurm"))
    assert dialog.export_button.isEnabled() and dialog.result_label.text() == ""
    assert "slurm.sbatch" in {path.name for path in dialog.export()}
    dialog.format_combo.setCurrentIndex(FORMATS.index("shell"))
    assert not dialog.export_button.isEnabled()
    assert "TF_CONFIG tab" in dialog.result_label.text()


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


@pytest.mark.parametrize("fmt", ["k8s", "tfjob", "trainjob"])
def test_an_image_that_is_no_image_reference_is_listed_and_nothing_written(
    qtbot, tmp_path: Path, fmt: str
) -> None:
    dialog = make_dialog(qtbot, cluster_project(), tmp_path)
    dialog.format_combo.setCurrentIndex(FORMATS.index(fmt))
    dialog.image_edit.setText("distloop:1.0 command: [sh]")
    assert dialog.export() == []
    assert "is not a container image reference" in dialog.result_label.text()
    assert not dialog.folder().exists()


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


def csv_cluster_project(data_path: Path) -> Project:
    data = cluster_project().model_dump(mode="json")
    data["model"] = {"input_shape": [2], "layers": [{"kind": "dense", "units": 1}]}
    data["data"] = {"source": "csv", "path": str(data_path), "label_column": "y"}
    return load_project_data(data)


def test_local_paths_and_the_run_folders_are_pointed_out(qtbot, tmp_path: Path) -> None:
    data_path = tmp_path / "data" / "train.csv"
    dialog = make_dialog(qtbot, csv_cluster_project(data_path), tmp_path)
    dialog.show()
    dialog.format_combo.setCurrentIndex(FORMATS.index("k8s"))
    notes = dialog.notes_label.text()
    assert dialog.notes_label.isVisible()
    assert "the run folders are in each pod's emptyDir" in notes
    assert f"data.path: {data_path} is a path on this machine, which the pods cannot see" in notes

    dialog.runs_volume_edit.setText("My Runs")  # not a Kubernetes name
    assert not dialog.export_button.isEnabled()
    assert "Runs volume: 'My Runs' is not a Kubernetes name" in dialog.notes_label.text()
    assert "c62828" in dialog.runs_volume_edit.styleSheet()
    dialog.runs_volume_edit.setText("distloop-runs")
    dialog.data_volume_edit.setText("training-data")
    assert dialog.export_button.isEnabled() and dialog.runs_volume_edit.styleSheet() == ""
    notes = dialog.notes_label.text()
    assert "emptyDir" not in notes
    assert "is read from the data volume training-data" in notes
    assert "copy it into the claim as train.csv" in notes

    written = dialog.export()
    (manifest,) = [path for path in written if path.suffix == ".yaml"]
    claims = {
        volume["persistentVolumeClaim"]["claimName"]
        for document in yaml.safe_load_all(manifest.read_text())
        if document["kind"] == "Job"
        for volume in document["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in volume
    }
    assert claims == {"distloop-runs", "training-data"}
    exported = json.loads((dialog.folder() / "project.json").read_text())
    assert exported["data"]["path"] == "/var/lib/distloop/data/train.csv"

    dialog.format_combo.setCurrentIndex(FORMATS.index("shell"))  # hosts have no volumes
    assert not dialog.runs_volume_edit.isEnabled() and not dialog.data_volume_edit.isEnabled()
    assert dialog.notes_label.text() == (
        f"• data.path: {data_path} is a path on this machine: every host needs it there"
    )
    dialog.export()
    exported = json.loads((dialog.folder() / "project.json").read_text())
    assert exported["data"]["path"] == str(data_path)


def test_the_files_listed_are_the_shown_format_s(qtbot, tmp_path: Path) -> None:
    dialog = make_dialog(qtbot, cluster_project(), tmp_path)
    dialog.show()
    assert dialog.export()
    assert dialog.files_list.isVisible() and dialog.open_folder_button.isEnabled()
    dialog.format_combo.setCurrentIndex(FORMATS.index("k8s"))
    assert not dialog.files_list.isVisible() and dialog.files_list.count() == 0
    assert dialog.result_label.text() == "" and not dialog.open_folder_button.isEnabled()
    assert not dialog.notes_label.isHidden()  # the seed reads no files; the run folders
    assert "emptyDir" in dialog.notes_label.text()


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


def test_the_dialog_keeps_its_size_and_layout_across_formats(qtbot, tmp_path: Path) -> None:
    """Slurm's long description widened the dialog from 680 to 898 px."""
    dialog = make_dialog(qtbot, cluster_project(), tmp_path)
    dialog.show()
    qtbot.waitExposed(dialog)
    seen = set()
    for fmt in [*FORMATS, FORMATS[0]]:
        dialog.format_combo.setCurrentIndex(FORMATS.index(fmt))
        qtbot.wait(50)  # the layout's pass
        seen.add((dialog.size().toTuple(), dialog.folder_edit.geometry().getRect()))
    assert len(seen) == 1, seen


def test_the_formats_offered_are_the_registered_ones_with_their_descriptions(
    qtbot, tmp_path: Path
) -> None:
    dialog = make_dialog(qtbot, cluster_project(), tmp_path)
    combo = dialog.format_combo
    assert [combo.itemData(i) for i in range(combo.count())] == list(FORMATS)
    for index, fmt in enumerate(FORMATS):
        combo.setCurrentIndex(index)
        description = format_named(fmt).description
        assert dialog.format_description.text() == description
        assert combo.itemData(index, Qt.ItemDataRole.ToolTipRole) == description
    combo.setCurrentIndex(FORMATS.index("trainjob"))
    assert "Trainer v2" in dialog.format_description.text()
    assert "tfjob for clusters still on Trainer v1" in dialog.format_description.text()
