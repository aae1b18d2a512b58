"""Image folders as tf.data pipelines: file names in memory, images decoded as batches form.

Training, evaluation and prediction all preprocess an image with :func:`decode_pixels`
(decode, resize to the model's input with bilinear interpolation, as
``image_dataset_from_directory`` does) and :func:`scale` (to [0, 1]), so a model trained
here sees the same pixels when it predicts. The pipelines leave the resize out when the
check before the run found every image already the model's size (a bilinear resize to
the same size returns each pixel unchanged) and then scale whole batches of uint8
pixels: less work per image without changing a bit of what the model sees. Augmentation
(:func:`augment_batch`) is drawn from stateless random ops seeded by the run seed and the
step number: the same step gets the same augmentation in a resumed run, and evaluation
never gets any.
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from ... import phases
from ...config import ImageFolderData, Project
from ...data_sources import DataError
from ...data_sources.folders import (
    FolderError,
    folder_problems,
    image_file_problem,
    scan_folder,
    unreadable_images,
)
from ...data_sources.image_folder import image_channels
from ...data_sources.image_header import MAX_IMAGE_BYTES, pixels_problem
from ...fileio import read_regular_file
from .base import Augment, BatchMap, Decode
from .class_folders import ClassFolderSource, FolderFiles, label_encoder


class ImageFolderTFSource(ClassFolderSource[ImageFolderData]):
    takes_images = True

    def files(self, data: ImageFolderData, where: str) -> FolderFiles:
        return image_files(data, where)

    def decoder(
        self,
        data: ImageFolderData,
        project: Project,
        files: FolderFiles,
        training: FolderFiles | None,
        where: str,
    ) -> tuple[Decode, BatchMap | None]:
        return image_decoder(data, project, files)

    def augment(self, data: ImageFolderData, seed: int) -> Augment | None:
        return augment_batch(data, seed) if data.augments else None

    def changed_file_error(
        self, data: ImageFolderData, where: str, project: Project, error: tf.errors.OpError
    ) -> DataError | None:
        """The image a run failed on mid-run (removed, or replaced since the check before the run
        by one no decoder reads or of another size), as one line naming it; None when no image
        explains ``error``.

        TensorFlow's error comes from inside the step and names a graph node, at best the file,
        so after such a failure the folder is checked again, once, to find it.
        """
        then = "then resume the run: it goes on from its last checkpoint"
        missing = isinstance(error, tf.errors.NotFoundError)
        gone = _MISSING.search(error.message) if missing else None
        if gone is not None and gone[1].startswith(str(Path(data.path).expanduser())):
            return DataError(
                f"{where}.path: {gone[1]} was removed during the run; put it back, {then}"
            )
        try:
            scan = scan_folder(data.path)
        except FolderError as exc:
            return DataError(f"{where}.path: {exc} (it changed during the run)")
        bad = unreadable_images(scan)
        cut = {path for path, _ in bad}
        sound = tuple(str(path) for path, _ in scan.files if path not in cut)
        if not bad:
            bad = [(Path(path), DAMAGED) for path in decode_check.__wrapped__(sound).damaged]
        if bad:
            path, why = bad[0]
            return DataError(
                f"{where}.path: {path} {why} since the run started; replace or remove it, {then}"
            )
        height, width = project.model.input_shape[:2]
        if isinstance(error, tf.errors.InvalidArgumentError) and "expected shape" in error.message:
            resized = _other_size(sound, height, width)
            if resized is not None:
                return DataError(
                    f"{where}.path: {resized} was replaced during the run by an image of "
                    f"another size than the model's {height}x{width} (every image had that "
                    "size when the run started); resume the run: it goes on from its last "
                    "checkpoint and resizes the images that need it"
                )
        return None

    def image_example(
        self, data: ImageFolderData, project: Project, image: str | Path | bytes
    ) -> np.ndarray:
        """One image file (or its bytes) preprocessed exactly as the project's training data
        is, without augmentation: float32 ``model.input_shape``, no batch axis.

        For prediction on a model trained from an image folder. Raises DataError naming the
        file when it is no readable image.
        """
        height, width = project.model.input_shape[:2]
        what = "the image" if isinstance(image, bytes) else str(image)
        try:
            contents = (
                image if isinstance(image, bytes) else read_regular_file(image, MAX_IMAGE_BYTES)
            )
        except OSError as exc:
            raise DataError(f"cannot read {what}: {exc.strerror or exc}") from None
        too_large = pixels_problem(io.BytesIO(contents))
        if too_large is not None:  # decoding would allocate what the header declares
            raise DataError(f"{what} {too_large}")
        try:
            decoded = decode_image(
                tf.constant(contents), height, width, image_channels(data, project.model)
            )
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
            found = None if isinstance(image, bytes) else image_file_problem(Path(image))
            reason = found or "is not a JPEG, PNG, GIF or BMP image TensorFlow can read"
            raise DataError(f"{what} {reason}") from None
        return decoded.numpy()


SOURCE = ImageFolderTFSource()


def image_files(data: ImageFolderData, where: str = "data") -> FolderFiles:
    """The folder's images in label order; unreadable ones fail or are skipped as chosen."""
    field = f"{where}.path"
    phases.begin(f"listing {where}.path's images")
    try:
        scan = scan_folder(data.path, progress=lambda _, found: phases.progress(found))
    except FolderError as exc:
        raise DataError(f"{field}: {exc}") from None
    problems = folder_problems(scan.summary(), field)
    if problems:
        raise DataError(problems[0])
    phases.begin(f"checking {len(scan.files):,} images", total=len(scan.files))
    bad = unreadable_images(scan, phases.progress)
    cut_short = {path for path, _ in bad}
    sound = tuple(str(path) for path, _ in scan.files if path not in cut_short)
    phases.begin(f"decoding {len(sound):,} images once", total=len(sound))
    check = decode_check(sound)
    phases.begin("building the input pipeline")
    damaged = set(check.damaged)
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
    return FolderFiles.of(scan, bad, check.sizes)


DAMAGED = "cannot be decoded (its image data is damaged)"
VERIFY_BATCH = 256


@dataclass(frozen=True)
class DecodeCheck:
    """What decoding every file once found."""

    damaged: tuple[str, ...]
    """The files TensorFlow's decoder refuses."""
    sizes: frozenset[tuple[int, int]]
    """The (height, width) of the images that decoded."""


@functools.lru_cache(maxsize=4)
def decode_check(paths: tuple[str, ...]) -> DecodeCheck:
    """Decodes each file once, in parallel: which are damaged, which sizes the rest have.

    The structural check (:func:`~engine.data_sources.folders.unreadable_images`) sees a file cut
    short, not damage inside it; a damaged file would otherwise fail the run from inside
    the training step, where no error names a file. Cached: the training and the
    evaluation pipelines of a run share the answer.
    """

    def decodes(path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image = tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
        return path, tf.shape(image)[:2]

    decoded = (
        tf.data.Dataset.from_tensor_slices(list(paths))
        .map(decodes, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .ignore_errors()
        .batch(VERIFY_BATCH)
    )
    good: set[str] = set()
    sizes: set[tuple[int, int]] = set()
    for names, shapes in decoded.as_numpy_iterator():
        phases.progress(len(good))
        good.update(path.decode() for path in names)
        sizes.update((int(height), int(width)) for height, width in shapes)
    return DecodeCheck(tuple(path for path in paths if path not in good), frozenset(sizes))


_MISSING = re.compile(r"\}\} (.+?); No such file or directory")
"""Where TensorFlow's error for a file that is gone names it."""


_MISSING = re.compile(r"\}\} (.+?); No such file or directory")
"""Where TensorFlow's error for a file that is gone names it."""


def _other_size(paths: tuple[str, ...], height: int, width: int) -> str | None:
    """The first of ``paths`` whose image is not ``height`` x ``width`` (decoding them all)."""

    def size(path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image = tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
        return path, tf.shape(image)[:2]

    found = (
        tf.data.Dataset.from_tensor_slices(list(paths))
        .map(size, num_parallel_calls=tf.data.AUTOTUNE)
        .ignore_errors()
        .filter(lambda _, shape: tf.reduce_any(shape != (height, width)))
        .take(1)
    )
    return next((path.decode() for path, _ in found.as_numpy_iterator()), None)


def decode_pixels(
    contents: tf.Tensor, height: int, width: int, channels: int, resize: bool = True
) -> tf.Tensor:
    """One encoded image (JPEG, PNG, BMP, GIF's first frame) at [height, width, channels],
    not yet scaled: float32 in [0, 255] when resized, else uint8 (for images the check
    before the run found to have that size)."""
    image = tf.io.decode_image(contents, channels=channels, expand_animations=False)
    if resize:
        image = tf.image.resize(image, (height, width))
        image.set_shape((height, width, channels))
        return image
    # A file replaced by one of another size since the check fails here (a resize on this
    # path would cost every image a test); changed_file_error then names it.
    return tf.ensure_shape(image, (height, width, channels))


def scale(pixels: tf.Tensor) -> tf.Tensor:
    """Pixels (one image or a batch, uint8 or float32) as float32 in [0, 1]."""
    return tf.cast(pixels, tf.float32) / 255.0


def decode_image(contents: tf.Tensor, height: int, width: int, channels: int) -> tf.Tensor:
    """One encoded image as float32 [height, width, channels] in [0, 1], as the pipelines'
    batches hold it (:func:`image_decoder`)."""
    return scale(decode_pixels(contents, height, width, channels))


def image_decoder(
    data: ImageFolderData, project: Project, files: FolderFiles
) -> tuple[Decode, BatchMap | None]:
    """The map function from (file name, label) to (image, label shaped for the loss), and
    the one that finishes its batches, if they need one.

    When every one of ``files`` already has the model's size the images are not resized
    and stay uint8 (a quarter of float32's bytes to batch and cache) until
    :func:`scale_batch` scales each batch in one operation. Resized images are float32
    already, and are scaled one at a time while they are still in the processor's cache.
    """
    height, width = project.model.input_shape[:2]
    channels = image_channels(data, project.model)
    encode = label_encoder(project)
    resize = files.sizes != {(height, width)}

    def decode(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        pixels = decode_pixels(tf.io.read_file(path), height, width, channels, resize)
        return (scale(pixels) if resize else pixels), encode(label)

    return decode, (None if resize else scale_batch)


def scale_batch(pixels: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The map function that scales a batch of uint8 pixels to [0, 1]: one operation per
    batch, the same numbers as one per image."""
    return scale(pixels), labels


def augment_batch(
    data: ImageFolderData, seed: int
) -> Callable[[tf.Tensor, tuple[tf.Tensor, tf.Tensor]], tuple[tf.Tensor, tf.Tensor]]:
    """The map function that augments global batch number ``step`` (flip, rotate, crop)."""

    def augment(step: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        images, labels = batch
        return augment_images(images, step, seed, data.flip, data.rotation, data.crop), labels

    return augment


def augment_images(
    images: tf.Tensor, step: tf.Tensor, seed: int, flip: bool, rotation: float, crop: float
) -> tf.Tensor:
    """Global batch number ``step`` flipped, rotated by up to ``rotation`` degrees and cropped
    by up to ``crop`` per side, at random: stateless ops seeded by the run seed and the step,
    so a resumed run draws what the first run drew for the same step."""

    def seed_for(op: int) -> tf.Tensor:  # one stream per step and operation
        return tf.stack([tf.constant(seed, tf.int64), step * 3 + op])

    if flip:
        images = tf.image.stateless_random_flip_left_right(images, seed=seed_for(0))
    max_angle = math.radians(rotation)
    if max_angle > 0:
        angles = tf.random.stateless_uniform(
            tf.shape(images)[:1], seed=seed_for(1), minval=-max_angle, maxval=max_angle
        )
        images = _rotate(images, angles)
    if crop > 0:
        images = _crop(images, crop, seed_for(2))
    return images


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
