"""Data and model files from elsewhere: a FIFO, a device or a folder where a file should be,
a .keras whose config.json is a bomb or nested past Python's recursion limit, an .npz
whose headers lie. ``distloop validate`` and ``distloop run`` (real processes, no
TensorFlow: each is refused before an engine starts) answer each in one line, never a
hang or a traceback, and a refused run leaves no run folder."""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.data_sources import DataError
from distloop.engine.data_sources.numpy import numpy_arrays
from distloop.engine.messages import RunFailed
from distloop.engine.project_file import load_project
from distloop.engine.run_folder import truncate_eval
from support.data_folders import write_image_folder
from support.distloop_testing import distloop, run_engine

HANG_GUARD_S = 60
"""A check that hangs (a FIFO read) fails the test after this long instead of forever."""


def project_file(folder: Path, data: dict, model: dict | None = None) -> Path:
    """A regression project on ``data`` (an 8-value input) or on ``model``'s file."""
    project = {
        "schema_version": 1,
        "name": "hostile",
        "model": model or {"input_shape": [8], "layers": [{"kind": "dense", "units": 1}]},
        "loss": {"kind": "mean_squared_error"},
        "data": {"global_batch_size": 4, **data},
        "training": {"steps": 2},
    }
    path = folder / "project.json"
    path.write_text(json.dumps(project))
    return path


def csv_data(folder: Path) -> dict:
    """A real CSV source, for projects whose model file is the hostile one."""
    path = folder / "table.csv"
    path.write_text("a,b,c,d,e,f,g,h,y\n" + "1,2,3,4,5,6,7,8,9\n" * 4)
    return {"source": "csv", "path": str(path), "label_column": "y"}


def validate(project: Path) -> list[str]:
    """``distloop validate``'s problem lines; it must refuse the project, in those lines."""
    result = distloop("validate", str(project), timeout_s=HANG_GUARD_S)
    assert result.returncode == 1, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    return [line.strip() for line in result.stderr.splitlines()[1:]] or [result.stderr.strip()]


def assert_run_refused(project: Path, says: str) -> None:
    out = project.parent / "run"
    result = distloop("run", str(project), "--out", str(out), timeout_s=HANG_GUARD_S)
    assert result.returncode == 1, result.stdout
    assert says in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not out.exists()


# --- only regular files: FIFOs, devices and folders --------------------------------------


@pytest.mark.parametrize("source", ["csv", "numpy", "tfrecord"])
@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_data_path_that_is_no_regular_file_is_refused(tmp_path, source, kind) -> None:
    """Before, a FIFO hung validate (the memory check read it), and a folder or a device
    was "valid" and failed the run, leaving a failed run folder."""
    path = {"fifo": tmp_path / "data", "device": Path("/dev/zero"), "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    data = {"source": source, "path": str(path)}
    if source == "csv":
        data["label_column"] = "y"
    if source == "tfrecord":
        data.update(features=[{"name": "x", "shape": [8]}, {"name": "y"}], label="y")
    project = project_file(tmp_path, data)
    says = {"fifo": "is a FIFO (named pipe), not a regular file", "device": "is a device, not a "
            "regular file", "folder": "is a folder, not a file"}[kind]  # fmt: skip
    assert validate(project) == [f"data.path: {path} {says}"]
    if source == "csv" and kind != "device":  # one run each: the same check as validate's
        assert_run_refused(project, says)


@pytest.mark.parametrize("field", ["path", "weights"])
def test_a_model_file_that_is_a_fifo_is_refused(tmp_path, field) -> None:
    fifo = tmp_path / "model.keras"
    os.mkfifo(fifo)
    model = (
        {"kind": "keras_file", "path": str(fifo), "input_shape": [8]}
        if field == "path"
        else {"kind": "backbone", "backbone": "mobilenet_v2", "weights": str(fifo),
              "input_shape": [32, 32, 3], "layers": [{"kind": "dense", "units": 1}]}
    )  # fmt: skip
    data = csv_data(tmp_path) if field == "path" else {"source": "synthetic_regression"}
    project = project_file(tmp_path, data, model)
    assert validate(project) == [
        f"model.{field}: {fifo} is a FIFO (named pipe), not a regular file"
    ]


# --- .keras files: a config.json too deep, too big, or a zip bomb ------------------------


def keras_file(folder: Path, config: bytes, compression: int = zipfile.ZIP_STORED) -> Path:
    path = folder / "model.keras"
    with zipfile.ZipFile(path, "w", compression) as archive:
        archive.writestr("metadata.json", "{}")
        archive.writestr("config.json", config)
    return path


def spaces(count: int) -> bytes:
    return b" " * count + b"{}"


@pytest.mark.parametrize(
    "case, says",
    [
        ("nested", "config.json is nested too deeply to be a model's config"),
        ("bomb", "config.json expands"),
        ("huge", "config.json declares 80 MiB"),
    ],
)
def test_a_keras_file_whose_config_is_a_bomb_is_one_line(tmp_path, case, says) -> None:
    """Before: RecursionError tracebacks from validate and run for the nested config, and
    the whole declared config read into memory (1.5 GiB of spaces took 3.2 GB, 16 s)."""
    if case == "nested":
        path = keras_file(tmp_path, b"[" * 100_000 + b"]" * 100_000)
    else:  # 10 MiB of spaces stored in about 10 KiB; 80 MiB, more than any config
        size = 10 << 20 if case == "bomb" else 80 << 20
        path = keras_file(tmp_path, spaces(size), zipfile.ZIP_DEFLATED)
        assert path.stat().st_size < size // 500
    model = {"kind": "keras_file", "path": str(path), "input_shape": [8]}
    project = project_file(tmp_path, csv_data(tmp_path), model)
    (line,) = validate(project)
    assert line.startswith(f"model.path: {path}'s {says}"), line
    if case == "nested":
        assert_run_refused(project, says)


# --- .npz files whose headers lie -----------------------------------------------------------


def npy_bytes(header: str) -> bytes:
    """An .npy file with ``header`` as its header dict's text, and a few bytes of data."""
    text = header.encode("latin1")
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + bytes(64)


CORRUPT_HEADERS = {
    "shape None": "{'descr': '<f4', 'fortran_order': False, 'shape': None, }",
    "shape an int": "{'descr': '<f4', 'fortran_order': False, 'shape': 8, }",
    "shape (1e999, 8)": "{'descr': '<f4', 'fortran_order': False, 'shape': (1e999, 8), }",
    "a list": "['descr', 'shape']",
}


@pytest.mark.parametrize("case", CORRUPT_HEADERS)
def test_an_npz_with_a_corrupt_header_is_refused_in_one_line(tmp_path, case) -> None:
    """Before: "valid", then a traceback from memory_check.py (and from run, before any
    run folder)."""
    path = tmp_path / "data.npz"
    labels = io.BytesIO()
    np.save(labels, np.zeros((4, 1), np.float32))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", npy_bytes(CORRUPT_HEADERS[case]))
        archive.writestr("y.npy", labels.getvalue())
    project = project_file(tmp_path, {"source": "numpy", "path": str(path)})
    (line,) = validate(project)
    assert line.startswith(f"data.path: {path}: array 'x': its header"), line
    if case == "shape None":
        assert_run_refused(project, "array 'x': its header")
    # The loader a run would use names the problem as well.
    loaded = load_project(project)
    with pytest.raises(DataError, match=rf"^data\.path: cannot read {path} as \.npz: "):
        numpy_arrays(loaded.data, loaded.model, loaded.loss)


# --- TFRecord records that declare more than their file holds --------------------------------


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C, rotated and offset (so a checksum of a checksum differs)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes, declared: int | None = None) -> bytes:
    """One TFRecord record, its length declared as ``declared`` (with a valid checksum)."""
    length = struct.pack("<Q", len(data) if declared is None else declared)
    return (
        length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))
    )


def tfrecord_project(folder: Path, compression: str) -> Path:
    """One whole record, then one declaring 2^60 bytes: TensorFlow's reader allocated that
    and died by SIGSEGV (exit 139 of the engine)."""
    content = record(b"\x0a\x00") + record(b"x" * 100, declared=2**60)
    path = folder / "data.tfrecord"
    path.write_bytes(gzip.compress(content) if compression == "GZIP" else content)
    data = {
        "source": "tfrecord",
        "path": str(path),
        "features": [{"name": "x", "shape": [8]}, {"name": "y"}],
        "label": "y",
        "compression": compression,
    }
    return project_file(folder, data)


@pytest.mark.parametrize("compression", ["none", "GZIP"])
def test_a_tfrecord_record_longer_than_its_file_is_refused(tmp_path, compression) -> None:
    project = tfrecord_project(tmp_path, compression)
    says = (
        f"{tmp_path / 'data.tfrecord'} is cut short or damaged after record 0 (record 1 "
        f"declares {2**60} bytes, more than the file holds)"
    )
    (line,) = validate(project)
    assert line.startswith(f"data.path: {says}"), line
    assert_run_refused(project, says)


@pytest.mark.slow
def test_the_engine_refuses_an_oversized_record_before_tensorflow_reads_it(tmp_path) -> None:
    """The window starts the engine without the CLI's checks: its data loading walks the
    records first, so the run fails in one line instead of the engine's SIGSEGV."""
    project = load_project(tfrecord_project(tmp_path, "none"))
    run = run_engine(project, tmp_path / "run")
    assert isinstance(run["terminal"], RunFailed), run["terminal"]
    failed = run["terminal"]
    assert failed.error_type == "DataError", failed
    assert "(record 1 declares 1152921504606846976 bytes" in failed.message, failed
    assert failed.exit_code != -11


# --- file and class names that are not UTF-8 ----------------------------------------------


def misnamed_image_folder(folder: Path, where: str) -> tuple[Path, Path]:
    """An image folder of two classes, one file (or one class folder) renamed to bytes that
    are no UTF-8; the project file, and the misnamed path as Python lists it."""
    root = write_image_folder(folder / "images", classes=("a", "b"), per_class=3)
    if where == "file":
        old = root / "a" / "001.png"
        new = os.fsdecode(os.fsencode(root / "a") + b"/bad\xff.png")
    else:
        old = root / "b"
        new = os.fsdecode(os.fsencode(root) + b"/cl\xfe")
    os.rename(old, new)
    model = {
        "input_shape": [8, 8, 3],
        "layers": [{"kind": "flatten"}, {"kind": "dense", "units": 2}],
    }
    data = {"source": "image_folder", "path": str(root)}
    project = project_file(folder, data, model)
    spec = json.loads(project.read_text())
    spec["loss"] = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
    project.write_text(json.dumps(spec))
    return project, Path(new)


@pytest.mark.parametrize("where", ["file", "class folder"])
def test_a_name_that_is_not_utf8_is_refused_naming_the_path(tmp_path, where) -> None:
    """Before: "valid", then the run failed with an unexpected-failure traceback (TensorFlow
    cannot hold the name as a string) that printed the whole file list."""
    project, misnamed = misnamed_image_folder(tmp_path, where)
    shown = os.fsencode(misnamed).decode("utf-8", "backslashreplace")
    assert "\\xff" in shown or "\\xfe" in shown
    (line,) = validate(project)
    assert line.startswith(f"data.path: {shown} is not named in UTF-8"), line
    assert_run_refused(project, f"{shown} is not named in UTF-8")


@pytest.mark.slow
def test_the_engine_refuses_a_name_that_is_not_utf8_in_one_line(tmp_path) -> None:
    """A run from the window starts the engine without the CLI's checks."""
    project, _ = misnamed_image_folder(tmp_path, "file")
    run = run_engine(load_project(project), tmp_path / "run")
    failed = run["terminal"]
    assert isinstance(failed, RunFailed) and failed.error_type == "DataError", failed
    assert "is not named in UTF-8" in failed.message and "\n" not in failed.message


def test_an_eval_csv_step_in_other_digits_ends_what_a_resume_keeps(tmp_path) -> None:
    """'²'.isdigit() is true and int('²') raised ValueError on resume."""
    (tmp_path / "eval.csv").write_text("step,val_loss\n2,0.5\n\u00b2,0.4\n4,0.3\n")
    truncate_eval(tmp_path, 10)
    assert (tmp_path / "eval.csv").read_text() == "step,val_loss\n2,0.5\n"


@pytest.mark.parametrize("source", ["image_folder", "text_folder"])
def test_a_fifo_among_a_folders_files_is_refused(tmp_path, source) -> None:
    """A FIFO named like an image or a text hung validate (the image check opened it) and
    would have hung the run's reader."""
    root = write_image_folder(tmp_path / "data", classes=("a", "b"), per_class=3)
    suffix = ".png"
    if source == "text_folder":
        suffix = ".txt"
        for image in root.rglob("*.png"):
            image.with_suffix(".txt").write_text("some words")
            image.unlink()
    fifo = root / "b" / f"zzz{suffix}"
    os.mkfifo(fifo)
    model = {
        "input_shape": [8, 8, 3],
        "layers": [{"kind": "flatten"}, {"kind": "dense", "units": 2}],
    }
    if source == "text_folder":
        model = {
            "input_shape": [4],
            "layers": [
                {"kind": "embedding", "input_dim": 100, "output_dim": 2},
                {"kind": "flatten"},
                {"kind": "dense", "units": 2},
            ],
        }
    data = {"source": source, "path": str(root)}
    if source == "text_folder":
        data.update(vocabulary_size=100, sequence_length=4)
    project = project_file(tmp_path, data, model)
    spec = json.loads(project.read_text())
    spec["loss"] = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
    project.write_text(json.dumps(spec))
    says = f"{fifo} is a FIFO (named pipe), not a regular file"
    assert validate(project) == [f"data.path: {says}"]
    assert_run_refused(project, says)
