"""An ``.npz`` file of features and labels: loaded whole (``Dataset.from_tensor_slices``,
the guide's numpy path) or, with ``stream``, memory-mapped and read a batch at a time
(``engine/tf/data_sources/numpy.py``)."""

from __future__ import annotations

import ast
import math
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..config import LossConfig, ModelConfig, NumpyData, Project
from ..fileio import file_kind_problem, open_regular
from .arrays import check_array, fit_to_model
from .base import FLOAT32, CannotCount, DataError, DataSource, LabelSample, ScriptData
from .script_lines import array_dataset_lines


class NumpySource(DataSource[NumpyData]):
    file_types = "NumPy archives (*.npz);;All files (*)"

    def form_start(self) -> dict[str, object]:
        return {"path": ""}

    def file_problems(self, data: NumpyData) -> list[str]:
        problem = file_kind_problem(data.path)
        return [] if problem is None else [f"{data.path} {problem}"]

    def loaded_bytes(self, data: NumpyData) -> int:
        """The two arrays as stored plus their float32 copy."""
        if data.stream:
            return 0
        return _npz_bytes(Path(data.path), (data.features_key, data.labels_key))

    def label_sample(self, data: NumpyData, limit: int, max_bytes: int) -> LabelSample | None:
        """The first labels, read from the labels array's start (decompressed as it is read
        when the archive is compressed); one-hot rows as their class numbers."""
        try:
            with (
                open_regular(Path(data.path)) as handle,
                zipfile.ZipFile(handle) as archive,
                archive.open(f"{data.labels_key}.npy") as stored,
            ):
                return _first_labels(stored, limit, max_bytes)
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error):
            return None  # the run names what is wrong with the file

    def script(self, data: NumpyData, project: Project) -> ScriptData:
        lines = []
        if data.stream:
            lines.append(STREAM_NOTE)
        lines += [
            f"with np.load({data.path!r}) as arrays:",
            f"    x, y = arrays[{data.features_key!r}], arrays[{data.labels_key!r}]",
        ]
        return ScriptData(array_dataset_lines(project, lines))


SOURCE = NumpySource()
STREAM_NOTE = (
    "# data.stream: the project's runs read this file as batches form; loading it "
    "whole gives the same examples in the same order."
)


def numpy_arrays(
    data: NumpyData,
    model: ModelConfig,
    loss: LossConfig,
    where: str = "data",
    classes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``.npz`` file's features and labels, checked here so no TF op fails on them.

    ``where`` is the field the data came from (``data`` or ``evaluation.source``);
    ``classes`` is the model's output count when the project's model is the one trained.
    """
    path = Path(data.path)
    field = f"{where}.path"
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_NPY_MAGIC))
            handle.seek(0)
            is_zip = zipfile.is_zipfile(handle)
    except OSError as exc:
        raise DataError(f"{field}: cannot read {path}: {exc.strerror or exc}") from None
    if not is_zip:
        what = ", but a single .npy array" if head == _NPY_MAGIC else ""
        raise DataError(
            f"{field}: {path} is not an .npz file (a zip archive of arrays){what}; save the "
            f"features and labels with numpy.savez({path.name!r}, "
            f"{data.features_key}=..., {data.labels_key}=...)"
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in (data.features_key, data.labels_key) if k not in archive.files]
            if missing:
                raise DataError(
                    f"{field}: {path} has no array named {', '.join(missing)} "
                    f"(it has {', '.join(archive.files) or 'none'})"
                )
            arrays = [archive[data.features_key], archive[data.labels_key]]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{field}: cannot read {path} as .npz: {exc}") from None
    for key, array in zip((data.features_key, data.labels_key), arrays, strict=True):
        check_array(array, f"{field}: array {key!r} in {path}")
    x, y = arrays
    return fit_to_model(x, y, model, loss, field, field, str(path), classes)


def _first_labels(stored: BinaryIO, limit: int, max_bytes: int) -> LabelSample | None:
    """The first rows of an .npy labels array read from ``stored``, one number a row."""
    if np.lib.format.read_magic(stored) == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(stored)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(stored)
    if dtype.hasobject or dtype.kind not in "biuf" or not shape:
        return None
    width = math.prod(shape[1:])
    if width == 0 or width * dtype.itemsize > max_bytes or (fortran and len(shape) > 1):
        return None  # no label a row, or its rows are not together at its start
    rows = min(shape[0], limit, max(1, max_bytes // (width * dtype.itemsize)))
    table = np.frombuffer(stored.read(rows * width * dtype.itemsize), dtype=dtype)
    table = table[: len(table) // width * width].reshape(-1, width)
    labels = table[:, 0].astype(np.float64) if width == 1 else np.argmax(table, axis=1)
    return LabelSample(labels, len(labels) == shape[0])


def _npz_bytes(path: Path, keys: tuple[str, str]) -> int:
    total = 0
    with open_regular(path) as handle, zipfile.ZipFile(handle) as archive:
        names = archive.namelist()
        for key in keys:
            if f"{key}.npy" not in names:
                raise CannotCount(f"{path} has no array named {key!r}")
            member = archive.getinfo(f"{key}.npy")
            with archive.open(member) as stored:
                shape = _npy_shape(stored.read(_MAX_HEADER_BYTES), f"{path}: array {key!r}")
            total += member.file_size + min(math.prod(shape), _MAX_ELEMENTS) * FLOAT32
    return total


_NPY_MAGIC = b"\x93NUMPY"
_MAX_ELEMENTS = 2**60
"""Counted elements stop here: past any memory, and inside what a float holds."""
_MAX_HEADER_BYTES = 10_000 + 16
"""numpy's own limit on an .npy header (``max_header_size``), with the magic and length."""


def _npy_shape(start: bytes, what: str) -> tuple[int, ...]:
    """The array's shape from the start of an .npy file (its header is a Python dict)."""
    if not start.startswith(_NPY_MAGIC) or len(start) < 10:
        raise CannotCount(f"{what} is not an .npy array")
    size_bytes = 2 if start[6] == 1 else 4
    length = int.from_bytes(start[8 : 8 + size_bytes], "little")
    header = start[8 + size_bytes : 8 + size_bytes + length]
    if len(header) < length:
        raise CannotCount(f"{what}: its header is cut short or longer than numpy reads")
    try:
        fields = ast.literal_eval(header.decode("latin1"))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise CannotCount(f"{what}: its header is not a Python dict") from None
    if not isinstance(fields, dict):
        raise CannotCount(f"{what}: its header is {type(fields).__name__}, not a dict")
    shape = fields.get("shape")
    sizes = shape if isinstance(shape, tuple) else ()
    if not isinstance(shape, tuple) or not all(
        isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in sizes
    ):
        raise CannotCount(f"{what}: its header's shape is {shape!r:.60}, not a tuple of sizes")
    return shape
