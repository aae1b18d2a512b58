"""Image folders as tf.data pipelines: file names in memory, images decoded as batches form.

Training, evaluation and prediction all preprocess an image with :func:`decode_image`
(decode, resize to the model's input with bilinear interpolation, as
``image_dataset_from_directory`` does, then scale to [0, 1]), so a model trained here
sees the same pixels when it predicts. Augmentation (:func:`augment_batch`) is drawn
from stateless random ops seeded by the run seed and the step number: the same step
gets the same augmentation in a resumed run, and evaluation never gets any.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from ..config import ImageFolderData, Project, image_channels
from ..datasets import FolderError, FolderScan, folder_problems, scan_folder, unreadable_images
from ..synthetic import DataError

Decode = Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]
SHOWN_BAD_FILES = 3
"""Unreadable files a skip warning names; the rest are counted."""


@dataclass(frozen=True)
class FolderFiles:
    """A class folder's files and labels, checked, with what skipping left out."""

    paths: tuple[str, ...]
    labels: np.ndarray
    classes: tuple[str, ...]
    skipped: list[tuple[Path, str]]

    @classmethod
    def of(cls, scan: FolderScan, skipped: list[tuple[Path, str]]) -> FolderFiles:
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
        )

    def subset(self, keep: np.ndarray) -> FolderFiles:
        paths = tuple(path for path, kept in zip(self.paths, keep, strict=True) if kept)
        return FolderFiles(paths, self.labels[keep], self.classes, self.skipped)

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


def image_files(data: ImageFolderData, where: str = "data") -> FolderFiles:
    """The folder's images in label order; unreadable ones fail or are skipped as chosen."""
    field = f"{where}.path"
    try:
        scan = scan_folder(data.path)
    except FolderError as exc:
        raise DataError(f"{field}: {exc}") from None
    problems = folder_problems(scan, field)
    if problems:
        raise DataError(problems[0])
    bad = unreadable_images(scan)
    cut_short = {path for path, _ in bad}
    sound = tuple(str(path) for path, _ in scan.files if path not in cut_short)
    damaged = set(undecodable_images(sound))
    if damaged:
        order = {path: index for index, (path, _) in enumerate(scan.files)}
        bad += [(Path(path), DAMAGED) for path in sound if path in damaged]
        bad.sort(key=lambda item: order[item[0]])
    if bad and data.on_bad_file == "fail":
        path, why = bad[0]
        others = f" ({len(bad) - 1} more unreadable)" if len(bad) > 1 else ""
        raise DataError(
            f"{field}: {path} {why}{others}; replace or remove it, or set "
            f"{where}.on_bad_file to skip"
        )
    return FolderFiles.of(scan, bad)


DAMAGED = "cannot be decoded (its image data is damaged)"
VERIFY_BATCH = 256


@functools.lru_cache(maxsize=4)
def undecodable_images(paths: tuple[str, ...]) -> tuple[str, ...]:
    """The files TensorFlow's decoder refuses, found by decoding each once, in parallel.

    The structural check (:func:`~engine.datasets.unreadable_images`) sees a file cut
    short, not damage inside it; a damaged file would otherwise fail the run from inside
    the training step, where no error names a file. Cached: the training and the
    evaluation pipelines of a run share the answer.
    """

    def decodes(path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image = tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
        return path, tf.shape(image)[0]

    decoded = (
        tf.data.Dataset.from_tensor_slices(list(paths))
        .map(decodes, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .ignore_errors()
        .batch(VERIFY_BATCH)
    )
    good = {path.decode() for names, _ in decoded.as_numpy_iterator() for path in names}
    return tuple(path for path in paths if path not in good)


def decode_image(contents: tf.Tensor, height: int, width: int, channels: int) -> tf.Tensor:
    """One encoded image (JPEG, PNG, BMP, GIF's first frame) as float32 [height, width,
    channels] in [0, 1]: the preprocessing shared by training, evaluation and prediction."""
    image = tf.io.decode_image(contents, channels=channels, expand_animations=False)
    image = tf.image.resize(image, (height, width))
    return image / 255.0


def image_decoder(data: ImageFolderData, project: Project) -> Decode:
    """The map function from (file name, label) to (image, label shaped for the loss)."""
    height, width = project.model.input_shape[:2]
    channels = image_channels(data, project.model)
    encode = label_encoder(project)

    def decode(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image = decode_image(tf.io.read_file(path), height, width, channels)
        image.set_shape((height, width, channels))
        return image, encode(label)

    return decode


def label_encoder(project: Project) -> Callable[[tf.Tensor], tf.Tensor]:
    """Class numbers as the loss takes them, as the synthetic classification data has them."""
    kind, units = project.loss.kind, project.model.output_units
    if kind == "sparse_categorical_crossentropy":
        return lambda label: label
    if kind == "binary_crossentropy":
        return lambda label: tf.reshape(tf.cast(label, tf.float32), (1,))
    return lambda label: tf.one_hot(label, units, dtype=tf.float32)


def load_image_for_model(image: str | Path | bytes, project: Project) -> np.ndarray:
    """One image file (or its bytes) preprocessed exactly as the project's training data
    is, without augmentation: float32 ``model.input_shape``, no batch axis.

    For prediction on a model trained from an image folder. Raises DataError naming the
    file when it is no readable image.
    """
    data = project.data
    if not isinstance(data, ImageFolderData):
        raise DataError(f"data: the project trains on {data.source} data, not an image folder")
    height, width = project.model.input_shape[:2]
    what = "the image" if isinstance(image, bytes) else str(image)
    try:
        contents = image if isinstance(image, bytes) else Path(image).read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        decoded = decode_image(
            tf.constant(contents), height, width, image_channels(data, project.model)
        )
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
        raise DataError(
            f"{what} is not a JPEG, PNG, GIF or BMP image TensorFlow can read"
        ) from None
    return decoded.numpy()


def augment_batch(
    data: ImageFolderData, seed: int
) -> Callable[[tf.Tensor, tuple[tf.Tensor, tf.Tensor]], tuple[tf.Tensor, tf.Tensor]]:
    """The map function that augments global batch number ``step`` (flip, rotate, crop)."""
    max_angle = math.radians(data.rotation)

    def augment(step: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        images, labels = batch

        def seed_for(op: int) -> tf.Tensor:  # one stream per step and operation
            return tf.stack([tf.constant(seed, tf.int64), step * 3 + op])

        if data.flip:
            images = tf.image.stateless_random_flip_left_right(images, seed=seed_for(0))
        if max_angle > 0:
            angles = tf.random.stateless_uniform(
                tf.shape(images)[:1], seed=seed_for(1), minval=-max_angle, maxval=max_angle
            )
            images = _rotate(images, angles)
        if data.crop > 0:
            images = _crop(images, data.crop, seed_for(2))
        return images, labels

    return augment


def _rotate(images: tf.Tensor, angles: tf.Tensor) -> tf.Tensor:
    """Each image turned by its angle about its centre; corners outside filled with 0."""
    shape = tf.shape(images)
    height, width = tf.cast(shape[1], tf.float32), tf.cast(shape[2], tf.float32)
    cos, sin = tf.cos(angles), tf.sin(angles)
    x_offset = ((width - 1) - (cos * (width - 1) - sin * (height - 1))) / 2.0
    y_offset = ((height - 1) - (sin * (width - 1) + cos * (height - 1))) / 2.0
    zeros = tf.zeros_like(angles)
    transforms = tf.stack([cos, -sin, x_offset, sin, cos, y_offset, zeros, zeros], axis=1)
    return tf.raw_ops.ImageProjectiveTransformV3(
        images=images,
        transforms=transforms,
        output_shape=shape[1:3],
        fill_value=0.0,
        interpolation="BILINEAR",
        fill_mode="CONSTANT",
    )


def _crop(images: tf.Tensor, fraction: float, seed: tf.Tensor) -> tf.Tensor:
    """Each image cut to a random box losing up to ``fraction`` per side, resized back."""
    count = tf.shape(images)[0]
    cuts = tf.random.stateless_uniform((count, 4), seed=seed, minval=0.0, maxval=fraction)
    boxes = tf.stack([cuts[:, 0], cuts[:, 1], 1.0 - cuts[:, 2], 1.0 - cuts[:, 3]], axis=1)
    size = images.shape[1:3] if images.shape[1:3].is_fully_defined() else tf.shape(images)[1:3]
    return tf.image.crop_and_resize(images, boxes, tf.range(count), size)
