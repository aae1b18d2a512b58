"""The .npz and CSV loaders refuse bad files with the field to fix (TensorFlow-free, in-process).

Each case is a file a user could really have; before TensorFlow sees the arrays,
the loader must name the field (``data.path``, ``data.label_column`` or, for an
evaluation source, ``evaluation.source.path``) and say what is wrong, instead of
raising an uncaught error or coercing the values silently.
"""

from __future__ import annotations

import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.config import Project
from distloop.engine.data_sources import DataError
from distloop.engine.data_sources.csv import csv_arrays
from distloop.engine.data_sources.numpy import numpy_arrays
from distloop.engine.project_file import load_project_data

CLASSES = 3


def project(data: dict, loss: str = "sparse_categorical_crossentropy") -> Project:
    """Two features, three classes: the model every case below is checked against."""
    return load_project_data(
        {
            "schema_version": 1,
            "name": "loaders",
            "strategy": {"kind": "mirrored"},
            "model": {"input_shape": [2], "layers": [{"kind": "dense", "units": CLASSES}]},
            "optimizer": {"kind": "sgd", "learning_rate": 0.1},
            "loss": {"kind": loss, "from_logits": loss != "mean_squared_error"},
            "data": {**data, "global_batch_size": 2},
            "training": {"steps": 1, "seed": 0},
        }
    )


def load_csv(path: Path, where: str = "data") -> tuple[np.ndarray, np.ndarray]:
    p = project({"source": "csv", "path": str(path), "label_column": "y"})
    return csv_arrays(p.data, p.model, p.loss, where, CLASSES)


def load_npz(path: Path, where: str = "data") -> tuple[np.ndarray, np.ndarray]:
    p = project({"source": "numpy", "path": str(path)})
    return numpy_arrays(p.data, p.model, p.loss, where, CLASSES)


def write(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text, encoding="utf-8")


def savez(**arrays: np.ndarray) -> Callable[[Path], None]:
    return lambda path: np.savez(path, **arrays)


def not_numpy_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", "written by hand")
        archive.writestr("y.npy", "written by hand")


def npy_renamed(path: Path) -> None:
    with path.open("wb") as handle:
        np.save(handle, np.zeros((4, 2)))


CSV_CASES = {
    "field over csv's limit": (
        write("a,b,y\n" + "1" * 140_000 + ",2,1\n"),
        "data.path: ",
        "line 2 is not valid CSV (field larger than field limit (131072))",
    ),
    "ragged row": (
        write("a,b,y\n1,2,1\n1,2\n"),
        "data.path: ",
        "line 3 has 2 value(s), but the header names 3 columns",
    ),
    "header only": (write("a,b,y\n"), "data.path: ", "has a header but no rows of data"),
    "duplicate header": (
        write("a,a,y\n1,2,1\n"),
        "data.path: ",
        "names the column(s) 'a' more than once",
    ),
    "NaN cell": (
        write("a,b,y\n1,2,1\n1,nan,1\n"),
        "data.path: ",
        "line 3, column 'b': 'nan' is not a finite number",
    ),
    "beyond float32": (
        write("a,b,y\n1,1e40,1\n"),
        "data.path: ",
        "line 2, column 'b': '1e40' is not a finite number",
    ),
    "empty cell": (write("a,b,y\n1,,1\n"), "data.path: ", "column 'b': '' is not a finite"),
    "fractional class": (
        write("a,b,y\n1,2,0\n1,2,0.5\n"),
        "data.label_column: ",
        "label 0.5 in",
    ),
    "class beyond the model's outputs": (
        write("a,b,y\n1,2,3\n"),
        "data.label_column: ",
        "label 3 in",
    ),
    "negative class": (write("a,b,y\n1,2,-1\n"), "data.label_column: ", "label -1 in"),
}

NPZ_CASES = {
    "text file": (write("x,y\n1,2\n"), "data.path: ", "is not an .npz file"),
    "single .npy": (npy_renamed, "data.path: ", "is not an .npz file (a zip archive of arrays), "),
    "zip numpy did not write": (not_numpy_zip, "data.path: ", "is not a numpy array"),
    "0-d features": (
        savez(x=np.array(5.0), y=np.array([1])),
        "data.path: ",
        "array 'x' in",
    ),
    "string features": (
        savez(x=np.array([["1", "2"]]), y=np.array([1])),
        "data.path: ",
        "holds strings (dtype <U1)",
    ),
    "complex features": (
        savez(x=np.array([[1 + 2j, 2]]), y=np.array([1])),
        "data.path: ",
        "holds complex numbers (dtype complex128)",
    ),
    "NaN features": (
        savez(x=np.array([[0.0, 1.0], [np.nan, 2.0]]), y=np.array([0, 1])),
        "data.path: ",
        "holds NaN or infinity (example 1",
    ),
    "fractional class": (
        savez(x=np.zeros((2, 2)), y=np.array([1.0, 1.5])),
        "data.path: ",
        "label 1.5 in",
    ),
    "class out of range": (
        savez(x=np.zeros((2, 2)), y=np.array([0, 7])),
        "data.path: ",
        "(example 1, counting from 0) is not a class number 0..2: the model's last layer has 3",
    ),
    "one-hot labels for sparse crossentropy": (
        savez(x=np.zeros((2, 2)), y=np.eye(3)[:2]),
        "data.path: ",
        "have shape [3] per example",
    ),
}


@pytest.mark.parametrize("case", CSV_CASES)
def test_a_bad_csv_file_is_refused_naming_the_field(tmp_path, case) -> None:
    make, field, says = CSV_CASES[case]
    path = tmp_path / "table.csv"
    make(path)
    with pytest.raises(DataError) as refused:
        load_csv(path)
    assert str(refused.value).startswith(field + (str(path) if field == "data.path: " else ""))
    assert says in str(refused.value)


@pytest.mark.parametrize("case", NPZ_CASES)
def test_a_bad_npz_file_is_refused_naming_the_field(tmp_path, case) -> None:
    make, field, says = NPZ_CASES[case]
    path = tmp_path / "arrays.npz"
    make(path)
    with pytest.raises(DataError) as refused:
        load_npz(path)
    assert str(refused.value).startswith(field)
    assert str(path) in str(refused.value)
    assert says in str(refused.value)


def test_an_evaluation_source_is_named_as_such(tmp_path) -> None:
    path = tmp_path / "held_out.npz"
    np.savez(path, x=np.zeros((2, 2)), y=np.array([0.5, 1]))
    with pytest.raises(DataError, match=r"^evaluation\.source\.path: label 0\.5"):
        load_npz(path, where="evaluation.source")
    csv_path = tmp_path / "held_out.csv"
    csv_path.write_text("a,b,y\n1,2,9\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"^evaluation\.source\.label_column: label 9"):
        load_csv(csv_path, where="evaluation.source")


def test_whole_number_classes_load_as_class_ids(tmp_path) -> None:
    """CSV cells are text, so ``2`` and ``2.0`` are the same class; a BOM is no column name."""
    path = tmp_path / "table.csv"
    path.write_text("\ufeffa,b,y\n1,2,0\n\n3,4,2.0\n", encoding="utf-8")
    x, y = load_csv(path)
    np.testing.assert_array_equal(x, [[1, 2], [3, 4]])
    assert y.dtype == np.int32 and y.ravel().tolist() == [0, 2]
    npz = tmp_path / "arrays.npz"
    np.savez(npz, x=np.ones((2, 2), np.float64), y=np.array([2.0, 1.0]))
    x, y = load_npz(npz)
    assert x.dtype == np.float32 and y.dtype == np.int32 and y.tolist() == [2, 1]


def test_labels_of_other_losses_stay_real_numbers(tmp_path) -> None:
    path = tmp_path / "arrays.npz"
    np.savez(path, x=np.zeros((2, 2)), y=np.array([[0.5, 1, 2], [1, 2, 3]]))
    p = project({"source": "numpy", "path": str(path)}, loss="mean_squared_error")
    _, y = numpy_arrays(p.data, p.model, p.loss)
    assert y.dtype == np.float32 and y[0].tolist() == [0.5, 1, 2]


def test_a_loaded_csv_holds_its_numbers_not_its_text(tmp_path) -> None:
    """Loading 60,000 rows peaks near the float32 table, not at ~80 bytes a cell (the rows
    held as Python strings first: ten times this file, enough to kill a run on a big one),
    and rows past one block of reading keep their order."""
    path = tmp_path / "big.csv"
    rows = np.arange(60_000 * 3, dtype=np.float32).reshape(-1, 3) % 1000
    rows[:, 2] = np.arange(60_000) % CLASSES
    np.savetxt(path, rows, fmt="%d", delimiter=",", header="a,b,y", comments="")
    tracemalloc.start()
    try:
        x, y = load_csv(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(x, rows[:, :2])
    np.testing.assert_array_equal(y.ravel(), rows[:, 2])
    assert peak < 4 * rows.nbytes, f"{peak / rows.nbytes:.1f} times the table"


def test_loaded_float32_features_are_not_copied(tmp_path) -> None:
    """A float32 .npz is most of a loaded run's memory: held once, not once more as a copy."""
    x = np.random.default_rng(0).standard_normal((10_000, 2, 50)).astype(np.float32)
    np.savez(tmp_path / "f.npz", x=x, y=np.arange(10_000, dtype=np.int32) % CLASSES)
    p = project({"source": "numpy", "path": str(tmp_path / "f.npz")})
    model = p.model.model_copy(update={"input_shape": [100]})  # wide rows, small labels
    tracemalloc.start()
    try:
        features, _ = numpy_arrays(p.data, model, p.loss)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(features, x.reshape(-1, 100))
    assert peak < 1.5 * x.nbytes, f"{peak / x.nbytes:.2f} times the features"
