"""An .npz file: loaded whole (``engine.data_sources.numpy``), or, with ``stream``,
memory-mapped and read a batch at a time, for files larger than memory.

An .npz file written by ``numpy.savez`` stores each array uncompressed inside the zip, so
its bytes can be memory-mapped where they lie: the pipeline shuffles and batches example
*numbers*, and each batch reads its rows from the map. The examples and their order are
those of the loaded file, so turning ``stream`` on changes memory, not the run.
"""

from __future__ import annotations

import math
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from ...config import NumpyData, Project
from ...data_sources import DataError
from ...data_sources.arrays import check_array, class_ids
from ...data_sources.numpy import numpy_arrays
from .arrays import Arrays, ArraySource, model_classes
from .base import Examples, TFDataSource, labels_dtype

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
"""A zip member's local file header (its name and extra field follow it)."""


class NumpyTFSource(ArraySource[NumpyData]):
    def arrays(self, data: NumpyData, project: Project, where: str) -> Arrays:
        return numpy_arrays(data, project.model, project.loss, where, model_classes(project))

    def examples(self, data: NumpyData, project: Project, where: str) -> Examples:
        if data.stream:
            numbers, count, read_batch = npz_batches(data, project, where)
            return Examples(numbers, count, batch_map=read_batch)
        return super().examples(data, project, where)

    def split_examples(self, data: NumpyData, project: Project) -> tuple[Examples, Examples]:
        if data.stream:  # example numbers, read from the map a batch at a time
            return TFDataSource.split_examples(self, data, project)
        return super().split_examples(data, project)


SOURCE = NumpyTFSource()


def npz_memmaps(data: NumpyData, where: str = "data") -> tuple[MappedArray, MappedArray]:
    """Where the features and labels arrays of an uncompressed .npz lie in the file."""
    path, field = Path(data.path), f"{where}.path"
    try:
        with zipfile.ZipFile(path) as archive, path.open("rb") as handle:
            return tuple(  # type: ignore[return-value]
                _member_map(archive, handle, path, key, field)
                for key in (data.features_key, data.labels_key)
            )
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{field}: cannot read {path} as .npz: {exc}") from None


def _member_map(
    archive: zipfile.ZipFile, handle: object, path: Path, key: str, field: str
) -> MappedArray:
    try:
        info = archive.getinfo(f"{key}.npy")
    except KeyError:
        names = ", ".join(name.removesuffix(".npy") for name in archive.namelist())
        raise DataError(f"{field}: {path} has no array named {key} (it has {names})") from None
    if info.compress_type != zipfile.ZIP_STORED:
        raise DataError(
            f"{field}: array {key!r} in {path} is compressed (numpy.savez_compressed); "
            "streaming reads arrays in place, so save them with numpy.savez or set "
            "stream to false"
        )
    handle.seek(info.header_offset)  # type: ignore[attr-defined]
    fields = _LOCAL_HEADER.unpack(handle.read(_LOCAL_HEADER.size))  # type: ignore[attr-defined]
    name_length, extra_length = fields[-2], fields[-1]
    start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
    handle.seek(start)  # type: ignore[attr-defined]
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
    if dtype.hasobject or dtype.kind not in "biuf" or not shape:
        raise DataError(
            f"{field}: array {key!r} in {path} holds {dtype} values of shape {list(shape)}; "
            "streaming needs real numbers with one entry per example"
        )
    offset = handle.tell()  # type: ignore[attr-defined]
    return MappedArray(path, dtype, offset, tuple(shape), "F" if fortran else "C")


@dataclass(frozen=True)
class MappedArray:
    """Where an array lies in a file. Each read maps it and unmaps it again, so the pages a
    batch touched leave this process's resident memory with the batch (they stay in the
    page cache, which the kernel frees when it needs to)."""

    path: Path
    dtype: np.dtype
    offset: int
    shape: tuple[int, ...]
    order: str

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, numbers: np.ndarray) -> np.ndarray:
        mapped = np.memmap(
            self.path,
            dtype=self.dtype,
            mode="r",
            offset=self.offset,
            shape=self.shape,
            order=self.order,  # type: ignore[arg-type]
        )
        rows = np.array(mapped[numbers])
        del mapped  # its last reference: unmapped here, not at some later collection
        return rows


def npz_batches(
    data: NumpyData, project: Project, where: str = "data"
) -> tuple[tf.data.Dataset, int, Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]]:
    """Example numbers of the memory-mapped arrays, their count, and the map function that
    reads a batch of numbers as (features, labels), typed as the in-memory path types them."""
    x, y = npz_memmaps(data, where)
    field = f"{where}.path"
    if len(x) != len(y):
        raise DataError(f"{field}: {data.path} has {len(x)} feature rows but {len(y)} labels")
    if int(np.prod(x.shape[1:])) != project.model.input_size:
        raise DataError(
            f"{field}: examples in {data.path} have shape {list(x.shape[1:])}, "
            f"but model.input_shape is {project.model.input_shape}"
        )
    _check_npz(x, y, data, project, field)
    shape = project.model.input_shape
    label_type = labels_dtype(project)
    label_shape = list(y.shape[1:])

    def read(numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        features = x.rows(numbers).astype(np.float32, copy=False).reshape(len(numbers), *shape)
        return features, y.rows(numbers).astype(label_type.as_numpy_dtype, copy=False)

    def batch(numbers: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        features, labels = tf.numpy_function(read, [numbers], [tf.float32, label_type])
        features.set_shape([None, *shape])
        labels.set_shape([None, *label_shape])
        return features, labels

    return tf.data.Dataset.range(len(x)), len(x), batch


CHECK_ROWS = 65_536
CHECK_BYTES = 16 * 2**20
"""A check part's rows are at most this many bytes: wide rows would otherwise make a part
larger than the memory streaming is for (65,536 rows of 4,096 float32 are 1 GiB)."""


def _check_npz(
    x: MappedArray, y: MappedArray, data: NumpyData, project: Project, field: str
) -> None:
    """What loading checks, a part of the rows at a time: finite features, and labels the
    loss can take (whole class numbers in the model's range for sparse crossentropy)."""
    origin = str(data.path)
    row_bytes = sum(array.dtype.itemsize * math.prod(array.shape[1:]) for array in (x, y))
    part = max(1, min(CHECK_ROWS, CHECK_BYTES // max(1, row_bytes)))
    for start in range(0, len(x), part):
        numbers = np.arange(start, min(start + part, len(x)))
        for key, array in ((data.features_key, x), (data.labels_key, y)):
            check_array(array.rows(numbers), f"{field}: array {key!r} in {origin}", start)
        if project.loss.kind == "sparse_categorical_crossentropy":
            classes = model_classes(project)
            class_ids(y.rows(numbers), f"{field}", origin, classes, start)
