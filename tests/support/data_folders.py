"""Small image folders for tests, written without an imaging library (PNG is zlib + CRCs)."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np


def png_bytes(pixels: np.ndarray) -> bytes:
    """An 8-bit grayscale ([h, w] or [h, w, 1]) or RGB ([h, w, 3]) PNG of ``pixels``."""
    image = np.asarray(pixels, dtype=np.uint8)
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    color_type = 0 if image.ndim == 2 else 2
    rows = image.reshape(image.shape[0], -1)
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", image.shape[1], image.shape[0], 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def class_pattern(label: int, size: int) -> np.ndarray:
    """A bright band whose place tells the class: learnable by a dense model in a few steps."""
    image = np.zeros((size, size), dtype=np.float32)
    band = max(1, size // 4)
    start = (label * band * 3 // 2) % (size - band + 1)
    image[start : start + band, :] = 1.0
    return image


def write_image_folder(
    root: Path,
    classes: tuple[str, ...] = ("circle", "square", "triangle"),
    per_class: int = 12,
    size: int = 8,
    seed: int = 0,
) -> Path:
    """``root/<class>/<n>.png`` grayscale images of a learnable pattern plus noise."""
    rng = np.random.default_rng(seed)
    for label, name in enumerate(classes):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            noisy = class_pattern(label, size) * 200 + rng.uniform(0, 55, (size, size))
            (folder / f"{index:03d}.png").write_bytes(png_bytes(noisy))
    return root


def write_linked_folder(
    root: Path, per_class: int, classes: int = 4, kind: str = "image", size: int = 8
) -> Path:
    """``root/class<k>/<n>.png`` (or ``.txt``) as a user's big folder is: ``per_class``
    files a class, made in seconds as hard links of a few learnable originals a class."""
    rng = np.random.default_rng(0)
    originals = root.parent / f"{root.name}-originals"
    for label in range(classes):
        sources = []
        for variant in range(8):
            if kind == "image":
                noisy = class_pattern(label, size) * 200 + rng.uniform(0, 55, (size, size))
                source = originals / f"{label}-{variant}.png"
                contents = png_bytes(noisy)
            else:
                source = originals / f"{label}-{variant}.txt"
                contents = f"word{label} other{variant} word{label} end".encode()
            source.parent.mkdir(parents=True, exist_ok=True)
            source.write_bytes(contents)
            sources.append(source)
        folder = root / f"class{label}"
        folder.mkdir(parents=True)
        suffix = sources[0].suffix
        for index in range(per_class):
            os.link(sources[index % len(sources)], folder / f"{index:06d}{suffix}")
    return root


def image_project(path: Path, **changes: object) -> dict:
    data = {"source": "image_folder", "path": str(path), "global_batch_size": 8}
    data.update(changes.pop("data", {}))  # type: ignore[arg-type]
    project = {
        "schema_version": 1,
        "name": "images",
        "strategy": {"kind": "mirrored", "cpu_replicas": 2},
        "model": {
            "input_shape": [8, 8, 1],
            "layers": [
                {"kind": "dense", "units": 16, "activation": "relu"},
                {"kind": "dense", "units": 3},
            ],
        },
        "optimizer": {"kind": "adam", "learning_rate": 0.02},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": data,
        "training": {"steps": 24, "seed": 1},
    }
    project.update(changes)
    return project
