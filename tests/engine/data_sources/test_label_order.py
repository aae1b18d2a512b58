"""Files sorted by class are named before a run: their shuffle buffer cannot mix them.

A CSV, ``.npz`` or TFRecord file keeps the user's order; sorted by class and with a
buffer smaller than a class, the batches hold one class at a time. ``distloop validate``
and the run's log say so, naming the fix; a shuffled file, or a buffer that holds the
runs, gets no note.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.config import Project
from distloop.engine.data_sources.label_order import label_order_notes
from distloop.engine.project_file import load_project_data
from support.distloop_testing import distloop

CLASSES = 4
PER_CLASS = 5_000


def sorted_labels() -> np.ndarray:
    return np.repeat(np.arange(CLASSES), PER_CLASS)


def shuffled_labels() -> np.ndarray:
    return np.random.default_rng(0).permutation(sorted_labels())


def project_data(data: dict, buffer: int = 2048, loss: str = "sparse_categorical_crossentropy"):
    return {
        "schema_version": 1,
        "name": "ordered",
        "strategy": {"kind": "default"},
        "model": {"input_shape": [2], "layers": [{"kind": "dense", "units": CLASSES}]},
        "optimizer": {"kind": "sgd", "learning_rate": 0.1},
        "loss": {"kind": loss, "from_logits": loss != "mean_squared_error"},
        "data": {**data, "global_batch_size": 64, "shuffle_buffer": buffer},
        "training": {"steps": 10, "seed": 0},
    }


def write_csv(path: Path, labels: np.ndarray) -> Path:
    features = np.random.default_rng(1).normal(size=(len(labels), 2))
    rows = "".join(f"{a:.4f},{b:.4f},{y}\n" for (a, b), y in zip(features, labels, strict=True))
    path.write_text("a,b,y\n" + rows)
    return path


def csv_project(path: Path, **changes: object) -> Project:
    return load_project_data(
        project_data({"source": "csv", "path": str(path), "label_column": "y"}, **changes)
    )


def test_a_csv_sorted_by_class_is_named_with_the_fix(tmp_path: Path) -> None:
    notes = label_order_notes(csv_project(write_csv(tmp_path / "t.csv", sorted_labels())))
    assert len(notes) == 1
    assert "is ordered by label: examples 1-5000 all have label 0 (5000 in a row)" in notes[0]
    assert "data.shuffle_buffer mixes only 2048 examples at a time" in notes[0]
    assert "set data.shuffle_buffer to the number of examples" in notes[0]
    assert "shuffle the file's rows once" in notes[0]


@pytest.mark.parametrize(
    ("labels", "buffer", "loss"),
    [
        (shuffled_labels(), 2048, "sparse_categorical_crossentropy"),
        (shuffled_labels(), 0, "sparse_categorical_crossentropy"),
        (sorted_labels(), 10_000, "sparse_categorical_crossentropy"),  # holds two classes' runs
        (sorted_labels(), 2048, "mean_squared_error"),  # a target, not classes
        (np.zeros(20_000, np.int64), 2048, "sparse_categorical_crossentropy"),  # one class
    ],
    ids=["shuffled", "shuffled-unbuffered", "buffer-holds-runs", "regression", "one-class"],
)
def test_no_note_where_the_buffer_mixes_or_order_means_nothing(
    tmp_path: Path, labels: np.ndarray, buffer: int, loss: str
) -> None:
    path = write_csv(tmp_path / "t.csv", labels)
    data = project_data({"source": "csv", "path": str(path), "label_column": "y"}, buffer, loss)
    if loss == "mean_squared_error":
        data["model"]["layers"][-1]["units"] = 1
    assert label_order_notes(load_project_data(data)) == []


def test_a_quoted_csv_with_windows_line_ends_is_read_alike(tmp_path: Path) -> None:
    labels = sorted_labels()
    rows = "".join(f'"0.5","{index}",{label}\r\n' for index, label in enumerate(labels))
    path = tmp_path / "quoted.csv"
    path.write_text('"a","b","y"\r\n' + rows, newline="")
    (note,) = label_order_notes(csv_project(path))
    assert "examples 1-5000 all have label 0 (5000 in a row)" in note


def test_a_big_sorted_csv_is_judged_from_its_start(tmp_path: Path) -> None:
    """A file far bigger than the read (here 1.6 M rows): the first rows already show it."""
    path = tmp_path / "big.csv"
    with path.open("w") as handle:
        handle.write("a,b,y\n")
        for label in range(4):
            handle.write(f"0.5,0.25,{label}\n" * 400_000)
    notes = label_order_notes(csv_project(path, buffer=100_000))
    assert len(notes) == 1
    assert "examples 1-200001 all have label 0 (200001 or more in a row)" in notes[0]


@pytest.mark.parametrize("compressed", [False, True], ids=["savez", "savez_compressed"])
@pytest.mark.parametrize("one_hot", [False, True], ids=["class-numbers", "one-hot"])
def test_an_npz_sorted_by_class_is_named(tmp_path: Path, compressed: bool, one_hot: bool) -> None:
    def project_of(labels: np.ndarray) -> Project:
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.npz"
        y = np.eye(CLASSES, dtype=np.float32)[labels] if one_hot else labels
        save = np.savez_compressed if compressed else np.savez
        save(path, x=np.zeros((len(labels), 2), np.float32), y=y)
        loss = "categorical_crossentropy" if one_hot else "sparse_categorical_crossentropy"
        return load_project_data(project_data({"source": "numpy", "path": str(path)}, loss=loss))

    assert "examples 1-5000 all have label 0" in label_order_notes(project_of(sorted_labels()))[0]
    assert label_order_notes(project_of(shuffled_labels())) == []


def test_tfrecords_sorted_by_class_are_named(tmp_path: Path) -> None:
    import tensorflow as tf

    def project_of(labels: np.ndarray, name: str) -> Project:
        for part in range(2):  # two files of a pattern, read in sorted order
            with tf.io.TFRecordWriter(str(tmp_path / f"{name}-{part}.tfrecord")) as writer:
                for label in np.array_split(labels, 2)[part]:
                    features = {
                        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, 1.5])),
                        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                    }
                    example = tf.train.Example(features=tf.train.Features(feature=features))
                    writer.write(example.SerializeToString())
        data = {
            "source": "tfrecord",
            "path": str(tmp_path / f"{name}-*.tfrecord"),
            "features": [{"name": "x", "shape": [2]}, {"name": "y", "dtype": "int64"}],
            "label": "y",
        }
        return load_project_data(project_data(data))

    notes = label_order_notes(project_of(sorted_labels(), "sorted"))
    assert "examples 1-5000 all have label 0 (5000 in a row)" in notes[0]
    assert label_order_notes(project_of(shuffled_labels(), "shuffled")) == []


def test_validate_names_a_sorted_csv_and_not_a_shuffled_one(tmp_path: Path) -> None:
    for name, labels in (("sorted", sorted_labels()), ("shuffled", shuffled_labels())):
        write_csv(tmp_path / f"{name}.csv", labels)
        data = project_data({"source": "csv", "path": f"{name}.csv", "label_column": "y"})
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    ordered = distloop("validate", str(tmp_path / "sorted.json"))
    assert ordered.returncode == 0, ordered.stderr
    note = [line for line in ordered.stdout.splitlines() if "ordered by label" in line]
    assert note == [
        f"note: data: {tmp_path / 'sorted.csv'} is ordered by label: examples 1-5000 all have "
        "label 0 (5000 in a row), and data.shuffle_buffer mixes only 2048 examples at a time, "
        "so batches hold one label at a time and the model learns the last one it saw; set "
        "data.shuffle_buffer to the number of examples (it holds them in memory), or shuffle "
        "the file's rows once"
    ]
    shuffled = distloop("validate", str(tmp_path / "shuffled.json"))
    assert shuffled.returncode == 0, shuffled.stderr
    assert "ordered by label" not in shuffled.stdout


@pytest.mark.slow
def test_a_run_on_a_sorted_csv_says_it_in_its_log(tmp_path: Path) -> None:
    write_csv(tmp_path / "sorted.csv", sorted_labels())
    data = project_data({"source": "csv", "path": "sorted.csv", "label_column": "y"})
    (tmp_path / "p.json").write_text(json.dumps(data))
    result = distloop("run", str(tmp_path / "p.json"), "--out", str(tmp_path / "run"), "--quiet")
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    assert shown.count("is ordered by label: examples 1-5000 all have label 0") == 1
    assert "is ordered by label" in (tmp_path / "run" / "engine.log").read_text()


def test_hostile_label_files_give_no_note_and_no_big_read(tmp_path: Path) -> None:
    """Labels declaring rows wider than the read, a record that is no Example, a record
    declaring more bytes than the read: no note, nothing allocated (the run names them)."""
    import zipfile

    npz = tmp_path / "wide.npz"
    np.savez(npz, x=np.zeros((2, 2), np.float32), y=np.zeros((2, 1), np.float32))
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1099511627776), }"
    header += b" " * (118 - len(header)) + b"\n"
    with zipfile.ZipFile(npz, "a") as archive:
        archive.writestr("z.npy", b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    wide = load_project_data(project_data({"source": "numpy", "path": str(npz), "labels_key": "z"}))
    assert label_order_notes(wide) == []

    def records(name: str, payload: bytes, declared: int) -> Project:
        (tmp_path / name).write_bytes(
            declared.to_bytes(8, "little") + b"\0" * 4 + payload + b"\0" * 4
        )
        data = {
            "source": "tfrecord",
            "path": str(tmp_path / name),
            "features": [{"name": "x", "shape": [2]}, {"name": "y", "dtype": "int64"}],
            "label": "y",
        }
        return load_project_data(project_data(data))

    assert label_order_notes(records("garbage.tfrecord", b"\xff" * 16, 16)) == []
    assert label_order_notes(records("huge.tfrecord", b"", 1 << 60)) == []
