"""Synthetic data: seeded random examples, made with numpy only.

Generated here, with numpy's seeded generator, so the same project gives the same examples
on every machine and in every replica layout. The generators take plain values and use
numpy only, so that "Export as script" can copy their source into a standalone script:
same code, same examples.
"""

from __future__ import annotations

import numpy as np

_FLOAT32 = 4


def make_classification(
    examples: int,
    input_shape: list[int],
    num_classes: int,
    noise: float,
    seed: int,
    loss_kind: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Random inputs labelled by a random linear teacher, labels shaped for the loss."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((examples, *input_shape)).astype(np.float32)
    flat = x.reshape(examples, -1)
    teacher = rng.standard_normal((flat.shape[1], num_classes)).astype(np.float32)
    classes = np.argmax(flat @ teacher, axis=1)
    if noise:
        x = x + (noise * rng.standard_normal(x.shape)).astype(np.float32)
    if loss_kind == "sparse_categorical_crossentropy":
        return x, classes.astype(np.int32)
    if loss_kind == "binary_crossentropy" and num_classes == 2:
        return x, classes.astype(np.float32).reshape(-1, 1)
    return x, np.eye(num_classes, dtype=np.float32)[classes]


def make_regression(
    examples: int, input_shape: list[int], outputs: int, noise: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Random inputs with targets from a random linear map plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((examples, *input_shape)).astype(np.float32)
    flat = x.reshape(examples, -1)
    teacher = rng.standard_normal((flat.shape[1], outputs)).astype(np.float32)
    teacher /= np.sqrt(flat.shape[1])
    y = flat @ teacher + noise * rng.standard_normal((examples, outputs))
    return x, y.astype(np.float32)


def generated_bytes(examples: int, noise: float, example_bytes: int) -> int:
    """Memory the generators' arrays take for ``examples`` of ``example_bytes`` (float32
    features and labels): numpy draws float64 (a second draw for the noise), casts to
    float32, and tf.data copies the arrays into tensors."""
    draws = 2 if noise else 1
    values = example_bytes // _FLOAT32
    return examples * (values * (8 * draws + _FLOAT32) + example_bytes)
