"""What a run would refuse is in the problems list before Run, every problem at once, with
the fix that fits the data (issue 21, item 6)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distloop.engine.devices import DetectedDevices, Device
from distloop.engine.validation import Validation
from distloop.gui.shell.main_window import MainWindow
from support.data_folders import write_image_folder

Scanned = Callable[[MainWindow], Validation]


def _open(window: MainWindow, tmp_path: Path, **sections: Any) -> None:
    project = {
        "schema_version": 1,
        "name": "checked",
        "model": {"input_shape": [8, 8, 1], "layers": [{"kind": "dense", "units": 2}]},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "training": {"steps": 2},
        **sections,
    }
    (tmp_path / "p.json").write_text(json.dumps(project))
    assert window.open_project(tmp_path / "p.json")


def _problems(validation: Validation) -> list[str]:
    return [str(problem) for problem in validation.problems]


def test_a_cut_short_image_is_a_problem_before_run(
    window: MainWindow, tmp_path: Path, scanned: Scanned
) -> None:
    folder = write_image_folder(tmp_path / "pics", classes=("a", "b"), per_class=2)
    cut = folder / "b" / "001.png"
    cut.write_bytes(cut.read_bytes()[:-20])
    data = {"source": "image_folder", "path": "pics", "global_batch_size": 2}
    _open(window, tmp_path, data=data)
    assert _problems(scanned(window)) == [
        f"data.path: {cut} is cut short (PNG); replace or remove it, or set data.on_bad_file "
        "to skip"
    ]
    assert not window.run_action.isEnabled()
    assert "No problems" not in window.problems_panel.summary.text()

    window.editor.data_form.pages["image_folder"].editors["on_bad_file"].set_value("skip")
    validation = window.validation
    assert validation.valid and window.run_action.isEnabled()
    assert (
        f"data.path: 1 unreadable image(s) will be skipped (data.on_bad_file is skip): {cut} "
        "is cut short (PNG)"
    ) in validation.notes


def test_a_csv_whose_columns_do_not_fit_the_input_is_a_problem_before_run(
    window: MainWindow, tmp_path: Path, scanned: Scanned
) -> None:
    (tmp_path / "rows.csv").write_text("a,b,c,label\n1,2,3,0\n4,5,6,1\n")
    data = {"source": "csv", "path": "rows.csv", "label_column": "label", "global_batch_size": 2}
    _open(window, tmp_path, data=data)
    assert _problems(scanned(window)) == [
        f"data.path: examples in {tmp_path / 'rows.csv'} have 3 feature column(s), but "
        "model.input_shape [8, 8, 1] takes 64"
    ]
    window.editor.model.input_shape.set_value([3])
    assert window.validation.valid
    window.editor.data_form.pages["csv"].editors["label_column"].set_value("y")
    assert [p.path for p in window.validation.problems] == ["data.label_column"]


def test_a_device_detection_did_not_find_is_a_problem_before_run(qtbot, make_window) -> None:
    def detect(_timeout_s: float) -> DetectedDevices:
        cpu = Device(name="/physical_device:CPU:0", device_type="CPU")
        return DetectedDevices(devices=(cpu,), tensorflow_version="2.21.0")

    window: MainWindow = make_window(detect=detect)
    devices = window.editor.strategy.fields.editors["devices"]
    devices.set_value(["/gpu:0"])
    assert window.validation.valid  # nothing known about this machine's devices yet
    window.detect_action.trigger()
    qtbot.waitUntil(lambda: not window.editor.strategy.detection_running(), timeout=5000)
    assert _problems(window.validation) == [
        "strategy.devices: /gpu:0 is not on this machine, which has CPU:0 (Detect devices); "
        "list some of those, or omit strategy.devices to use every GPU (else the CPU)"
    ]
    assert not window.run_action.isEnabled()
    devices.set_value(["/cpu:0"])
    assert window.validation.valid


def test_every_problem_is_listed_and_a_class_count_mismatch_gets_the_fix_that_fits(
    window: MainWindow, tmp_path: Path, scanned: Scanned
) -> None:
    write_image_folder(tmp_path / "pics", classes=("a", "b", "c"), per_class=1)
    data = {"source": "image_folder", "path": "pics", "global_batch_size": 2}
    _open(window, tmp_path, data=data)
    assert scanned(window).valid is False  # 3 classes, 2 units
    window.editor.loss.fields.editors["kind"].set_value("binary_crossentropy")
    assert sorted(_problems(scanned(window))) == [
        "loss.kind: binary_crossentropy takes two classes, but data.path has 3; use "
        "sparse_categorical_crossentropy with a last dense layer of 3 units",
        "model.layers: binary_crossentropy needs a last dense layer of 1 unit, not 2",
    ]
