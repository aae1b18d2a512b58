"""The checks every array source shares (an .npz file, a CSV file, loaded or streamed):
real, finite numbers, labels the loss can take, examples of the model's input shape.

Checked here, before TensorFlow sees the arrays, so an error names the file, the field and
the example, not a TF op.
"""

from __future__ import annotations

import numpy as np

from ..config import LossConfig, ModelConfig
from .base import DataError

_NUMBER_KINDS = "biuf"
_KIND_NAMES = {"c": "complex numbers", "U": "strings", "S": "bytes", "O": "Python objects"}


def check_array(array: object, what: str, first: int = 0) -> None:
    """Refuses what ``astype(np.float32)`` would coerce silently or fail on.

    ``first``: the number of the array's first example in its file (a streamed chunk's).
    """
    if not isinstance(array, np.ndarray):  # a zip member numpy did not write: raw bytes
        raise DataError(f"{what} is not a numpy array; write the file with numpy.savez")
    if array.ndim == 0:
        raise DataError(f"{what} is a single value; it needs one entry per example (first axis)")
    if array.dtype.kind not in _NUMBER_KINDS:
        kind = _KIND_NAMES.get(array.dtype.kind, f"{array.dtype} values")
        raise DataError(f"{what} holds {kind} (dtype {array.dtype}); it needs real numbers")
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array.reshape(len(array), -1)).all(axis=1)
        if bad.any():
            raise DataError(
                f"{what} holds NaN or infinity (example {first + int(np.argmax(bad))}, counting "
                "from 0); "
                "fill or remove those values"
            )


def fit_to_model(
    x: np.ndarray,
    y: np.ndarray,
    model: ModelConfig,
    loss: LossConfig,
    field: str,
    label_field: str,
    origin: str,
    classes: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Features shaped for the model; labels typed for the loss (class ids for sparse)."""
    if len(x) != len(y):
        raise DataError(f"{field}: {origin} has {len(x)} feature rows but {len(y)} labels")
    if len(x) == 0:
        raise DataError(f"{field}: {origin} holds no examples")
    if int(np.prod(x.shape[1:])) != model.input_size:
        raise DataError(
            f"{field}: examples in {origin} have shape {list(x.shape[1:])}, "
            f"but model.input_shape is {model.input_shape}"
        )
    # No copy when already float32: a loaded file's features are most of a run's memory.
    x = x.reshape(len(x), *model.input_shape).astype(np.float32, copy=False)
    if loss.kind == "sparse_categorical_crossentropy":
        return x, class_ids(y, label_field, origin, classes)
    return x, y.astype(np.float32, copy=False)


def class_ids(
    y: np.ndarray, field: str, origin: str, classes: int | None, first: int = 0
) -> np.ndarray:
    """Sparse crossentropy's labels: one whole class number per example, in the model's range.

    TensorFlow would truncate 1.5 to class 1 without a word, and fail inside the
    step (or, on a GPU, return garbage) for a class the model has no output for.
    """
    if int(np.prod(y.shape[1:])) != 1:
        raise DataError(
            f"{field}: labels in {origin} have shape {list(y.shape[1:])} per example; "
            "sparse_categorical_crossentropy takes one class number per example "
            "(categorical_crossentropy takes one-hot rows)"
        )
    flat = y.reshape(len(y))
    wrong = flat != np.round(flat) if flat.dtype.kind == "f" else np.zeros(len(flat), bool)
    top = "" if classes is None else f"..{classes - 1}"
    if wrong.any():
        at = int(np.argmax(wrong))
        raise DataError(
            f"{field}: label {flat[at]} in {origin} (example {first + at}, counting from 0) is "
            "not a "
            f"whole number; sparse_categorical_crossentropy takes class numbers 0{top}"
        )
    outside = (flat < 0) | (flat >= classes if classes is not None else False)
    if outside.any():
        at = int(np.argmax(outside))
        units = "" if classes is None else f": the model's last layer has {classes} units"
        raise DataError(
            f"{field}: label {flat[at]:g} in {origin} (example {first + at}, counting from 0) is "
            "not a "
            f"class number 0{top}{units}, one per class"
        )
    return y.astype(np.int32)
