"""Folders of class subfolders as tf.data pipelines (image and text folders): the files in
memory as names, each read and decoded as its batch forms; labels as the loss takes them."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from ...config import Project
from ...data_sources import DataError
from ...data_sources.folders import FolderScan
from .base import BatchMap, D, Decode, Examples, TFDataSource, held_out_of

SHOWN_BAD_FILES = 3
"""Unreadable files a skip warning names; the rest are counted."""


@dataclass(frozen=True)
class FolderFiles:
    """A class folder's files and labels, checked, with what skipping left out."""

    paths: tuple[str, ...]
    labels: np.ndarray
    classes: tuple[str, ...]
    skipped: list[tuple[Path, str]]
    sizes: frozenset[tuple[int, int]] = frozenset()
    """The (height, width) of the images among the files (empty for text): the pipeline
    resizes only when some image is not the model's size."""

    @classmethod
    def of(
        cls,
        scan: FolderScan,
        skipped: list[tuple[Path, str]],
        sizes: frozenset[tuple[int, int]] = frozenset(),
    ) -> FolderFiles:
        """``scan``'s files, less the ``skipped`` ones."""
        left_out = {path for path, _ in skipped}
        kept = [(path, label) for path, label in scan.files if path not in left_out]
        if not kept:
            raise DataError(f"data.path: none of the files in {scan.root} can be read")
        return cls(
            tuple(str(path) for path, _ in kept),
            np.array([label for _, label in kept], dtype=np.int32),
            scan.classes,
            skipped,
            sizes,
        )

    def subset(self, keep: np.ndarray) -> FolderFiles:
        """The files whose ``keep`` is true; their sizes are among the whole folder's."""
        paths = tuple(path for path, kept in zip(self.paths, keep, strict=True) if kept)
        return FolderFiles(paths, self.labels[keep], self.classes, self.skipped, self.sizes)

    def skip_warning(self, field: str) -> str | None:
        """The log line that says which unreadable files were left out."""
        if not self.skipped:
            return None
        shown = "; ".join(f"{path} {why}" for path, why in self.skipped[:SHOWN_BAD_FILES])
        more = len(self.skipped) - SHOWN_BAD_FILES
        rest = f" and {more} more" if more > 0 else ""
        return (
            f"{field}: skipped {len(self.skipped)} unreadable image(s) "
            f"({field.rsplit('.', 1)[0]}.on_bad_file is skip): {shown}{rest}"
        )


class ClassFolderSource(TFDataSource[D]):
    """A folder source: its checked files, and the map function that reads one."""

    @abstractmethod
    def files(self, data: D, where: str) -> FolderFiles:
        """The folder's files in label order, checked (``where`` names the field)."""

    @abstractmethod
    def decoder(
        self,
        data: D,
        project: Project,
        files: FolderFiles,
        training: FolderFiles | None,
        where: str,
    ) -> tuple[Decode, BatchMap | None]:
        """The map function from (file name, label) to (example, label shaped for the loss),
        and the one that finishes its batches, if they need one. ``training``: the training
        data's files (None: the training data's training split)."""

    def examples(self, data: D, project: Project, where: str) -> Examples:
        files = self.files(data, where)
        training = files if where == "data" else None
        return self.folder_examples(files, data, project, where, training)

    def split_examples(self, data: D, project: Project) -> tuple[Examples, Examples]:
        """Files split by seed as arrays are; both read with the training files' vocabulary."""
        training, held = split_files(self.files(data, "data"), project)
        return (
            self.folder_examples(training, data, project, "data", training),
            self.folder_examples(held, data, project, "data", training),
        )

    def folder_examples(
        self,
        files: FolderFiles,
        data: D,
        project: Project,
        where: str,
        training: FolderFiles | None,
    ) -> Examples:
        """File names and labels; the decoder reads them."""
        decode, batch_map = self.decoder(data, project, files, training, where)
        warning = files.skip_warning(f"{where}.path")
        return Examples(
            tf.data.Dataset.from_tensor_slices((list(files.paths), files.labels)),
            len(files.paths),
            decode,
            files.classes,
            [warning] if warning else [],
            batch_map,
            file_names=True,
        )


def split_files(files: FolderFiles, project: Project) -> tuple[FolderFiles, FolderFiles]:
    """(training, held-out) files of an evaluation split, chosen by seed as arrays are."""
    held = held_out_of(len(files.paths), project)
    return files.subset(~held), files.subset(held)


def training_files(project: Project, files: Callable[[], FolderFiles]) -> FolderFiles:
    """The training data's files (``files()``), less what an evaluation split holds out."""
    if project.evaluation is None or project.evaluation.split is None:
        return files()
    return split_files(files(), project)[0]


def label_encoder(project: Project) -> Callable[[tf.Tensor], tf.Tensor]:
    """Class numbers as the loss takes them, as the synthetic classification data has them."""
    kind, units = project.loss.kind, project.model.output_units
    return lambda label: encode_label(label, kind, units)


def encode_label(label: tf.Tensor, loss: str, classes: int) -> tf.Tensor:
    """A class number as ``loss`` takes it: the number itself for sparse crossentropy, one
    float for binary crossentropy, a one-hot row of ``classes`` for the others."""
    if loss == "sparse_categorical_crossentropy":
        return label
    if loss == "binary_crossentropy":
        return tf.reshape(tf.cast(label, tf.float32), (1,))
    return tf.one_hot(label, classes, dtype=tf.float32)
