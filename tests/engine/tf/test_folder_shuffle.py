"""Folders bigger than the shuffle buffer train on mixed classes, reproducibly.

A folder lists its files class by class; a user's folder holds far more files a class
than ``data.shuffle_buffer``. The pipeline shuffles the whole list of names every epoch,
seeded by ``training.seed``, so the first batches already hold every class in the
folder's shares, a run with the same seed sees the same batches, and a resumed run goes
on with the batches the unbroken run had.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from distloop.engine.config import Project
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import read_metrics
from support.data_folders import write_image_folder, write_linked_folder
from support.distloop_testing import distloop, interrupt_after, run_engine

CLASSES = 4
PER_CLASS = 5_000
BUFFER = 2048
BATCH = 64


def folder_project(path: Path, kind: str = "image", **changes: Any) -> dict:
    """The digits example's batching on ``path``: buffer 2048, batches of 64."""
    if kind == "image":
        model = {
            "input_shape": [8, 8, 1],
            "layers": [
                {"kind": "flatten"},
                {"kind": "dense", "units": 16, "activation": "relu"},
                {"kind": "dense", "units": CLASSES},
            ],
        }
        data: dict[str, Any] = {"source": "image_folder"}
    else:
        model = {
            "input_shape": [6],
            "layers": [
                {"kind": "embedding", "input_dim": 50, "output_dim": 4},
                {"kind": "flatten"},
                {"kind": "dense", "units": CLASSES},
            ],
        }
        data = {"source": "text_folder", "sequence_length": 6, "vocabulary_size": 50}
    data |= {"path": str(path), "global_batch_size": BATCH, "shuffle_buffer": BUFFER}
    data |= changes.pop("data", {})
    project = {
        "schema_version": 1,
        "name": "big folder",
        "strategy": {"kind": "default"},
        "model": model,
        "optimizer": {"kind": "adam", "learning_rate": 0.01},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": data,
        "training": {"steps": 12, "seed": 0},
    }
    return project | changes


def batch_labels(project: Project, batches: int, skip_steps: int = 0) -> list[np.ndarray]:
    """The labels of the run's first ``batches`` batches (after ``skip_steps``)."""
    from distloop.engine.tf.data import build_training_data

    dataset = build_training_data(project, skip_steps=skip_steps).dataset
    return [labels.numpy() for _, labels in dataset.take(batches)]


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_linked_folder(tmp_path_factory.mktemp("big") / "images", PER_CLASS)


@pytest.fixture(scope="module")
def text_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_linked_folder(tmp_path_factory.mktemp("big") / "texts", PER_CLASS, kind="text")


def assert_mixed(batches: list[np.ndarray]) -> None:
    """Every batch holds several classes and, together, each class about its share (1/4)."""
    counts = Counter(np.concatenate(batches).tolist())
    total = sum(counts.values())
    assert all(len(set(batch.tolist())) >= 3 for batch in batches), batches
    shares = [counts[label] / total for label in range(CLASSES)]
    assert all(0.18 < share < 0.32 for share in shares), shares


@pytest.mark.parametrize("cache", [False, True], ids=["names", "cached"])
def test_an_image_folder_bigger_than_the_buffer_gives_mixed_batches(
    image_folder: Path, cache: bool
) -> None:
    project = load_project_data(folder_project(image_folder, data={"cache": cache}))
    assert_mixed(batch_labels(project, 12))


def test_a_text_folder_bigger_than_the_buffer_gives_mixed_batches(text_folder: Path) -> None:
    project = load_project_data(folder_project(text_folder, kind="text"))
    assert_mixed(batch_labels(project, 12))


def test_the_order_follows_the_seed_and_changes_every_epoch(tmp_path: Path) -> None:
    folder = write_linked_folder(tmp_path / "images", 300)
    per_epoch = CLASSES * 300 // BATCH  # 18 full batches, then a short one
    project = load_project_data(folder_project(folder, training={"steps": 40, "seed": 3}))
    first = batch_labels(project, 40)
    again = batch_labels(project, 40)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    other = load_project_data(folder_project(folder, training={"steps": 40, "seed": 4}))
    seeded = zip(first, batch_labels(other, 40), strict=True)
    assert not all(np.array_equal(a, b) for a, b in seeded)
    epoch_one, epoch_two = first[: per_epoch + 1], first[per_epoch + 1 :][: per_epoch + 1]
    assert not all(np.array_equal(a, b) for a, b in zip(epoch_one, epoch_two, strict=True))
    # Every file once an epoch: each epoch holds each class's 300 files.
    assert Counter(np.concatenate(epoch_one).tolist()) == dict.fromkeys(range(CLASSES), 300)
    resumed = batch_labels(project, 40 - 25, skip_steps=25)
    assert all(np.array_equal(a, b) for a, b in zip(first[25:], resumed, strict=True))


def test_a_split_of_a_class_sorted_folder_holds_out_every_class(image_folder: Path) -> None:
    """The evaluation split is a seeded random choice of the files, not the list's tail."""
    from distloop.engine.tf.data import build_eval_data, build_training_data

    data = folder_project(image_folder, evaluation={"every": 10, "split": 0.2})
    project = load_project_data(data)
    held, count = build_eval_data(project)
    labels = np.concatenate([batch.numpy() for _, batch in held])
    assert count == len(labels) == CLASSES * PER_CLASS // 5
    shares = np.bincount(labels, minlength=CLASSES) / count
    assert np.all(np.abs(shares - 1 / CLASSES) < 0.03), shares
    assert build_training_data(project).examples == CLASSES * PER_CLASS - count


@pytest.mark.slow
def test_a_folder_run_learns_as_a_fully_shuffled_one_does(tmp_path: Path) -> None:
    """Buffer 128 on classes of 1,200 files: the held-out accuracy a buffer of the whole
    folder reaches (before, the run ended on batches of the last class: chance)."""
    folder = write_linked_folder(tmp_path / "images", 1_200)
    accuracy = {}
    for buffer in (128, CLASSES * 1_200):
        data = folder_project(
            folder,
            data={"shuffle_buffer": buffer},
            evaluation={"every": 60, "split": 0.2},
            training={"steps": 60, "seed": 0},
        )
        result = run_engine(load_project_data(data), None, timeout_s=600)
        assert result["terminal"].status == "finished", result["terminal"]
        accuracy[buffer] = result["evals"][-1].metrics["val_accuracy"]
    assert accuracy[CLASSES * 1_200] > 0.9, accuracy
    assert accuracy[128] >= accuracy[CLASSES * 1_200] - 0.05, accuracy


@pytest.mark.slow
def test_a_resumed_folder_run_trains_on_the_unbroken_runs_batches(tmp_path: Path) -> None:
    folder = write_linked_folder(tmp_path / "images", 400)
    data = folder_project(
        folder,
        data={"shuffle_buffer": 256, "global_batch_size": 32},
        training={"steps": 120, "seed": 5, "checkpoint_every": 10},
    )
    project = load_project_data(data)  # 50 steps an epoch: the run crosses two epochs
    whole = run_engine(project, None, timeout_s=600)
    run_dir = tmp_path / "run"
    interrupt_after(project, run_dir, 30, kill=False)
    assert read_metrics(run_dir)["step"][-1] < 120
    resumed = run_engine(project, run_dir, resume=True, timeout_s=600)
    assert resumed["terminal"].status == "finished"
    metrics = read_metrics(run_dir)
    assert metrics["step"] == list(range(1, 121))
    np.testing.assert_allclose(np.float32(metrics["loss"]), whole["losses"], rtol=1e-5)


@pytest.mark.slow
def test_a_cache_on_a_run_shorter_than_an_epoch_is_explained_once(tmp_path: Path) -> None:
    """TensorFlow's "did not fully read the dataset being cached" said nothing a user could
    act on; the run now caches only what it reads again, and says so in its own words."""
    folder = write_image_folder(tmp_path / "shapes", per_class=40)  # 120 images: 15 steps
    logs = {}
    for steps in (3, 20):
        data = folder_project(folder, data={"cache": True, "global_batch_size": 8})
        data["model"]["layers"][-1]["units"] = 3
        data["training"] = {"steps": steps, "seed": 0}
        project = tmp_path / f"{steps}.json"
        project.write_text(json.dumps(data))
        run_dir = tmp_path / f"run-{steps}"
        result = distloop("run", str(project), "--out", str(run_dir), "--quiet")
        assert result.returncode == 0, result.stderr
        logs[steps] = (result.stdout + result.stderr, (run_dir / "engine.log").read_text())
    shown, log = logs[3]
    note = (
        "data.cache is on, but this run trains 3 step(s), no more than one epoch (15 steps): "
        "no example is read twice, so nothing is cached (the cache serves the second epoch on)"
    )
    assert shown.count(note) == 1 and note in log
    for shown, log in logs.values():
        assert "did not fully read the dataset being cached" not in shown + log
    assert "data.cache is on" not in logs[20][0] + logs[20][1]
