"""Input pipeline benchmarks (issue 13): an image folder through Distloop's pipeline vs Keras's.

Run with ``python -m benchmarks.data_bench [rounds] [resized]`` from the repository root
(and ``python -m benchmarks.data_bench memory`` for the streaming measurement below). It
writes a folder of PNGs (10 classes of 64x64 RGB images, encoded with ``tf.io.encode_png``;
72x72 with ``resized``, so both pipelines must resize them to the model's 64x64), then
reads it, one shuffled epoch at a time, with Distloop's ``image_folder`` pipeline
(``build_training_data``) and with ``tf.keras.utils.image_dataset_from_directory``
(same image size, batch size and shuffling) in paired rounds (order alternating), and
prints the best images/s of each, the ratio of the bests and the median of the rounds'
ratios (steadier on a shared machine), with the median process CPU time per image of
each (the work done, which other load on the machine moves less than the wall time).
Both decode every image in a parallel map, batch, and prefetch. Keras always resizes (to
the same size too) and batches float32 images in [0, 255]; Distloop resizes only when
some image is not the model's size, batches the decoder's uint8 pixels then, and scales
each batch to float32 in [0, 1]. Before timing,
one epoch of each is compared: the same number of images, float32 of the same shape, and
the same images up to that scale. Distloop's check of every file before a run (a damaged
image is named then, not failed on inside the step) is timed apart: it happens once per
run, not per epoch.

``memory`` writes an uncompressed .npz of ``MEMORY_ROWS`` x ``MEMORY_FEATURES`` float32
(about 400 MB), trains one epoch over it with ``distloop.engine`` (``data.stream`` on,
then off as the baseline) and prints the engine process's peak resident memory, sampled
every 0.2 s from /proc.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
from distloop.engine.config import load_project_data
from distloop.engine.tf.data import build_training_data

CLASSES = 10
PER_CLASS = 300
SIZE = 64
BATCH = 64


RESIZED_FROM = 72


def write_folder(root: Path, size: int = SIZE) -> int:
    """``CLASSES`` x ``PER_CLASS`` random-noise PNGs (incompressible, like photos' detail)."""
    rng = np.random.default_rng(0)
    for label in range(CLASSES):
        folder = root / f"class_{label}"
        folder.mkdir(parents=True)
        for index in range(PER_CLASS):
            pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            (folder / f"{index:04d}.png").write_bytes(tf.io.encode_png(pixels).numpy())
    return CLASSES * PER_CLASS


def distloop_dataset(root: Path) -> tf.data.Dataset:
    project = load_project_data(
        {
            "schema_version": 1,
            "model": {
                "input_shape": [SIZE, SIZE, 3],
                "layers": [{"kind": "dense", "units": CLASSES}],
            },
            "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
            "data": {
                "source": "image_folder",
                "path": str(root),
                "global_batch_size": BATCH,
                "shuffle_buffer": BATCH * 8,
            },
            "training": {"epochs": 1, "seed": 0},
        }
    )
    return build_training_data(project).dataset


def keras_dataset(root: Path) -> tf.data.Dataset:
    return tf.keras.utils.image_dataset_from_directory(
        root,
        image_size=(SIZE, SIZE),
        batch_size=BATCH,
        shuffle=True,
        seed=0,
        verbose=False,
    ).prefetch(tf.data.AUTOTUNE)


def check_like_for_like(ours: tf.data.Dataset, keras: tf.data.Dataset) -> None:
    """One epoch of each: the same images (Distloop's scaled to [0, 1]), float32, same shape."""
    epochs = []
    for dataset in (ours, keras):
        images = np.concatenate([batch.numpy() for batch, _ in dataset])
        assert images.dtype == np.float32 and images.shape[1:] == (SIZE, SIZE, 3)
        epochs.append(np.sort(images.reshape(len(images), -1).sum(axis=1)))
    assert len(epochs[0]) == len(epochs[1]), "the epochs differ in length"
    np.testing.assert_allclose(epochs[0] * 255.0, epochs[1], rtol=1e-5)


def images_per_second(dataset: tf.data.Dataset) -> float:
    start, count = time.perf_counter(), 0
    for images, _ in dataset:
        count += int(images.shape[0])
    return count / (time.perf_counter() - start)


def cpu_seconds() -> float:
    """This process's CPU time so far, every thread's (tf.data's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed_epoch(dataset: tf.data.Dataset, rates: list[float], cpu: list[float], total: int) -> None:
    """One epoch: its images/s into ``rates``, its CPU microseconds per image into ``cpu``."""
    started = cpu_seconds()
    rates.append(images_per_second(dataset))
    cpu.append((cpu_seconds() - started) / total * 1e6)


MEMORY_ROWS = 1_000_000
MEMORY_FEATURES = 100
MEMORY_BATCH = 1000


def engine_peak_rss_mib(project: dict, folder: Path) -> int:
    """Peak resident memory (MiB) of ``python -m distloop.engine`` running ``project``."""
    from benchmarks.engine_bench import _watch_peak_rss

    path = folder / "project.json"
    path.write_text(json.dumps(project))
    command = [sys.executable, "-m", "distloop.engine", str(path), "--out", str(folder / "run")]
    command += ["--quiet", "--overwrite"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    peak = _watch_peak_rss(process)
    _, err = process.communicate()
    if process.returncode:
        raise RuntimeError(err)
    return peak()


def memory() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((MEMORY_ROWS, MEMORY_FEATURES), dtype=np.float32)
        y = rng.integers(0, 2, (MEMORY_ROWS, 1)).astype(np.float32)
        np.savez(folder / "big.npz", x=x, y=y)
        del x, y
        size_mb = (folder / "big.npz").stat().st_size / 1e6
        peaks = {}
        for stream in (True, False):
            project = {
                "schema_version": 1,
                "model": {
                    "input_shape": [MEMORY_FEATURES],
                    "layers": [{"kind": "dense", "units": 1}],
                },
                "loss": {"kind": "binary_crossentropy", "from_logits": True},
                "data": {
                    "source": "numpy",
                    "path": str(folder / "big.npz"),
                    "stream": stream,
                    "global_batch_size": MEMORY_BATCH,
                    "shuffle_buffer": 10_000,
                },
                "training": {"epochs": 1, "seed": 0},
            }
            peaks[stream] = engine_peak_rss_mib(project, folder)
        print(
            f"one epoch over a {size_mb:,.0f} MB .npz ({MEMORY_ROWS:,} x {MEMORY_FEATURES} "
            f"float32, batch {MEMORY_BATCH}): engine peak RSS {peaks[True]:,} MiB streamed, "
            f"{peaks[False]:,} MiB loaded"
        )


def main(rounds: int, file_size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "images"
        total = write_folder(root, file_size)
        started = time.perf_counter()
        ours = distloop_dataset(root)  # lists, checks and test-decodes every file once
        checked = time.perf_counter() - started
        keras = keras_dataset(root)
        check_like_for_like(ours, keras)
        images_per_second(ours.take(2))  # first-iteration tracing out of the timing
        images_per_second(keras.take(2))
        ours_rates: list[float] = []
        keras_rates: list[float] = []
        ours_cpu: list[float] = []
        keras_cpu: list[float] = []
        for round_ in range(rounds):  # paired rounds, the order alternating
            if round_ % 2:
                timed_epoch(keras, keras_rates, keras_cpu, total)
                timed_epoch(ours, ours_rates, ours_cpu, total)
            else:
                timed_epoch(ours, ours_rates, ours_cpu, total)
                timed_epoch(keras, keras_rates, keras_cpu, total)
        ratios = [a / b for a, b in zip(ours_rates, keras_rates, strict=True)]
        print(
            f"image folder ({total} PNGs {file_size}x{file_size} RGB to {SIZE}x{SIZE}, batch "
            f"{BATCH}, {rounds} rounds): "
            f"distloop {max(ours_rates):,.0f} images/s best, image_dataset_from_directory "
            f"{max(keras_rates):,.0f} images/s best, ratio of the bests "
            f"{max(ours_rates) / max(keras_rates):.2f}, median of the rounds' ratios "
            f"{float(np.median(ratios)):.2f}; CPU time per image (median) distloop "
            f"{float(np.median(ours_cpu)):.0f} µs, image_dataset_from_directory "
            f"{float(np.median(keras_cpu)):.0f} µs; the "
            f"run-start check of every file took {checked:.2f} s"
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["memory"]:
        memory()
    else:
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 5,
            RESIZED_FROM if "resized" in sys.argv[2:] else SIZE,
        )
