"""The Dataset tab: an image folder's classes, counts and images, or a CSV file's first rows,
read without TensorFlow; and the window's checks of a data folder before Run."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.data_sources.folders import EXAMPLES_PER_CLASS
from distloop.engine.validation import Validation, validate
from distloop.gui.files.dataset_preview import HINT, DatasetPreview
from distloop.gui.files.folder_scans import FolderScans
from distloop.gui.project.problem_marks import is_marked
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from support.data_folders import png_bytes, write_image_folder, write_linked_folder


def _table(preview: DatasetPreview) -> list[list[str]]:
    table = preview.table
    return [
        [table.item(row, column).text() for column in range(table.columnCount())]
        for row in range(table.rowCount())
    ]


def _captions(preview: DatasetPreview) -> list[str]:
    """The grid's texts in order: image captions (or "unreadable"), or text rows."""
    texts = []
    for index in range(preview.grid.count()):
        widget = preview.grid.itemAt(index).widget()
        labels = [widget] if isinstance(widget, QLabel) else widget.findChildren(QLabel)
        texts += [label.text() for label in labels if label.text()]
    return texts


@pytest.fixture
def preview(qtbot: QtBot) -> Iterator[DatasetPreview]:
    """A preview alone, with the scanning process the window would give it."""
    scans = FolderScans()
    preview = DatasetPreview(scans)
    qtbot.addWidget(preview)
    yield preview
    scans.close()
    qtbot.waitUntil(lambda: not multiprocessing.active_children(), timeout=30_000)


def _wait_previewed(qtbot: QtBot, preview: DatasetPreview) -> None:
    """A folder is read for the preview off the window's thread: waits for what it shows."""
    qtbot.waitUntil(lambda: preview.previewing() is None, timeout=60_000)


def test_an_image_folder_shows_counts_and_captioned_images(
    qtbot: QtBot, preview: DatasetPreview, tmp_path: Path
) -> None:
    write_image_folder(tmp_path / "pics", classes=("cat", "dog"), per_class=EXAMPLES_PER_CLASS + 2)
    (tmp_path / "pics" / "cat" / "000.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    preview.show_data({"source": "image_folder", "path": "pics"}, tmp_path)  # relative
    _wait_previewed(qtbot, preview)
    assert preview.summary.text() == (
        f"{tmp_path / 'pics'}: 20 images in 2 classes; 1 unreadable (see On bad file): "
        "cat/000.png is cut short (PNG)"
    )
    assert _table(preview) == [["0", "cat", "10"], ["1", "dog", "10"]]
    captions = _captions(preview)
    assert (
        captions.count("cat") == EXAMPLES_PER_CLASS and captions.count("dog") == EXAMPLES_PER_CLASS
    )
    assert captions[0] == "unreadable"  # the broken file says so instead of failing the view
    (tmp_path / "pics" / "dog" / "later.png").write_bytes(b"")  # beyond the images shown
    preview.show_data({"source": "image_folder", "path": "pics"}, tmp_path)
    _wait_previewed(qtbot, preview)
    assert preview.summary.text().endswith(
        "2 unreadable (see On bad file): cat/000.png is cut short (PNG) and 1 more"
    )


def test_a_csv_file_shows_its_first_rows_and_synthetic_data_says_why_not(
    qtbot: QtBot, preview: DatasetPreview, tmp_path: Path
) -> None:
    rows = "\n".join(f"{i},{i * 2},{i % 2}" for i in range(30))
    (tmp_path / "t.csv").write_text(f"a,b,label\n{rows}\n")
    preview.show_data(
        {"source": "csv", "path": str(tmp_path / "t.csv"), "label_column": "label"}, tmp_path
    )
    assert preview.summary.text().endswith("first 10 row(s), 3 column(s); label column 'label'")
    assert _table(preview)[:2] == [["0", "0", "0"], ["1", "2", "1"]]
    preview.show_data({"source": "image_folder", "path": "missing"}, tmp_path)
    _wait_previewed(qtbot, preview)
    assert preview.summary.text().endswith("does not exist; choose a folder of class subfolders")
    assert preview.table.isHidden()
    (tmp_path / "texts" / "fr").mkdir(parents=True)
    (tmp_path / "texts" / "fr" / "a.txt").write_text("Bonjour  <b>tout</b>\n le monde")
    (tmp_path / "texts" / "en").mkdir()
    preview.show_data({"source": "text_folder", "path": "texts"}, tmp_path)
    _wait_previewed(qtbot, preview)
    assert preview.summary.text().endswith("texts: 1 text files in 2 classes")
    assert _table(preview) == [["0", "en", "0"], ["1", "fr", "1"]]
    assert _captions(preview) == ["<b>fr</b>", "Bonjour <b>tout</b> le monde"]
    preview.show_data({"source": "synthetic_regression"}, tmp_path)
    assert preview.summary.text() == "synthetic_regression data is generated when the run starts."


def test_preview_button_fills_the_dataset_tab(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, scanned: Callable[[MainWindow], Validation]
) -> None:
    write_image_folder(tmp_path / "pics", classes=("a", "b", "c"), per_class=2)
    project = _image_project(tmp_path / "pics")
    path = tmp_path / "p.json"
    path.write_text(json.dumps(project))
    assert window.open_project(path)
    window.editor.data_form.preview.click()
    _wait_previewed(qtbot, window.dataset_preview)
    assert window.dataset_preview.summary.text().endswith("6 images in 3 classes")
    assert not window.dataset_dock.isHidden()
    assert scanned(window).valid
    assert window.run_action.isEnabled()


def test_a_one_class_folder_blocks_run_but_not_save(
    window: MainWindow, tmp_path: Path, scanned: Callable[[MainWindow], Validation]
) -> None:
    write_image_folder(tmp_path / "pics", classes=("only",), per_class=2)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_image_project(Path("pics"))))
    assert window.open_project(path)
    validation = scanned(window)
    assert validation.project is not None  # still a project: Save keeps the user's work
    assert [str(p) for p in validation.problems] == [
        f"data.path: {tmp_path / 'pics'} has one class folder (only); a classifier needs at "
        "least two, one subfolder of images per class"
    ]
    assert not window.run_action.isEnabled()
    assert is_marked(window.editor.data_form.pages["image_folder"].editors["path"].line)
    assert validate(window.editor.data()).valid  # without a folder to look in: no check


def _image_project(path: Path) -> dict:
    return {
        "schema_version": 1,
        "name": "pics",
        "model": {"input_shape": [8, 8, 1], "layers": [{"kind": "dense", "units": 3}]},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": {"source": "image_folder", "path": str(path), "global_batch_size": 2},
        "training": {"steps": 2},
    }


def test_png_helper_round_trips_through_qt(tmp_path: Path) -> None:
    from PySide6.QtGui import QImage

    pixels = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    (tmp_path / "x.png").write_bytes(png_bytes(pixels))
    image = QImage(str(tmp_path / "x.png"))
    assert (image.width(), image.height()) == (4, 3)
    assert image.pixelColor(3, 2).red() == int(pixels[2, 3])


def test_tfrecord_feature_spec_is_typed_as_one_line(qtbot: QtBot) -> None:
    from distloop.gui.project.data_form import DataForm

    form = DataForm()
    qtbot.addWidget(form)
    form.source.set_value("tfrecord")
    spec = form.pages["tfrecord"].editors["features"]
    spec.setText("image float32 28x28, label int64")
    assert form.value()["features"] == [
        {"name": "image", "dtype": "float32", "shape": [28, 28]},
        {"name": "label", "dtype": "int64"},
    ]
    spec.set_value(form.value()["features"])
    assert spec.text() == "image float32 28x28, label int64"
    spec.setText("image float32 28xabc, label int64")
    assert form.value()["features"][0]["shape"] == [28, "abc"]  # the model reports shape.1
    spec.setText("image float32 28x\u00b2")  # '²'.isdigit(), but int('²') raised
    assert form.value()["features"][0]["shape"] == [28, "\u00b2"]


def test_the_evaluation_sources_preview_fills_the_tab_too(
    window: MainWindow, tmp_path: Path
) -> None:
    (tmp_path / "v.csv").write_text("a,label\n1,0\n")
    evaluation = window.editor.evaluation
    evaluation.enabled.setChecked(True)
    evaluation.source_radio.setChecked(True)
    source = evaluation.source
    source.source.set_value("csv")
    source.pages["csv"].editors["path"].set_value(str(tmp_path / "v.csv"))
    source.preview.click()
    assert window.dataset_preview.summary.text().endswith("first 1 row(s), 2 column(s)")


def test_opening_another_project_clears_the_dataset_tab(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    write_image_folder(tmp_path / "pics", classes=("a", "b"), per_class=2)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_image_project(tmp_path / "pics")))
    assert window.open_project(path)
    window.editor.data_form.preview.click()
    _wait_previewed(qtbot, window.dataset_preview)
    assert window.dataset_preview.summary.text().endswith("4 images in 2 classes")
    window.open_example("seed")
    assert "pics" not in window.dataset_preview.summary.text()
    assert window.dataset_preview.table.isHidden() and window.dataset_preview.images.isHidden()
    window.editor.data_form.preview.click()
    window.new_project()
    assert window.dataset_preview.table.isHidden()
    assert window.dataset_preview.summary.text() == HINT


@pytest.mark.timeout(900)  # beyond its waits: one that runs out fails with its own line
def test_a_big_folder_previews_while_the_window_keeps_answering_and_a_path_change_stops_it(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    """Preview… on a 100,000-file folder froze the window 12-16 s: the folder is read in
    the scanning process while the event loop goes on (a 10 ms timer keeps ticking), the
    tab says how far it is, and changing the path stops it."""
    files = 100_000
    big = write_linked_folder(tmp_path / "big", files // 10, classes=10)
    write_image_folder(tmp_path / "small", classes=("a", "b"), per_class=2)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_image_project(big)))
    assert window.open_project(path)
    preview = window.dataset_preview
    said: list[str] = []
    timer = QTimer()
    timer.timeout.connect(lambda: said.append(preview.summary.text()))
    timer.start(10)

    window.editor.data_form.preview.click()
    assert preview.previewing() == str(big)
    qtbot.waitUntil(lambda: "… " in preview.summary.text(), timeout=120_000)  # a count shows
    path_edit = window.editor.data_form.pages["image_folder"].editors["path"]
    path_edit.set_value(str(tmp_path / "small"))  # the user goes elsewhere: no more reading
    assert preview.previewing() is None
    assert preview.summary.text().startswith("The path changed: ")

    path_edit.set_value(str(big))
    said.clear()
    window.editor.data_form.preview.click()
    qtbot.waitUntil(lambda: preview.previewing() is None, timeout=600_000)
    timer.stop()
    counted = [text for text in said if text.startswith(("scanning ", "checking the images"))]
    assert len(counted) > 20, "the event loop stood still while the folder was read"
    assert len(set(counted)) > 3  # the count went up as it went
    assert preview.summary.text() == f"{big}: {files} images in 10 classes"
    assert _table(preview)[0] == ["0", "class0", str(files // 10)]
    captions = _captions(preview)
    assert captions.count("class0") == EXAMPLES_PER_CLASS
    assert len(captions) == 10 * EXAMPLES_PER_CLASS
