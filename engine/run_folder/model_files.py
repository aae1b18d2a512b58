"""What a run leaves for prediction: the model's folder, ``classes.json``,
``vocabulary.json``, ``confusion.json`` and ``model.json``, read here.

Training writes them and prediction (``distloop predict``, Try it) reads them, perhaps
from someone else's folder. The data's files are written here too, beside their
readers, so each has one format; the model, its record and its confusion matrix are
saved with the model by ``engine.tf.model_export``. Every reader takes a missing or
crafted file as absent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .folder_io import RunFolderError, load_json, rewrite_file
from .layout import (
    CLASSES_FILE,
    CONFUSION_FILE,
    MODEL_FILE,
    MODEL_RECORD_FILE,
    TASKS_DIR,
    VOCABULARY_FILE,
)
from .trust import refuse_links


def write_classes(run_dir: str | Path, classes: Sequence[str]) -> None:
    """``classes.json``: prediction (``distloop predict``, Try it) names the model's outputs
    by it, in label order; every strategy's chief writes it."""
    rewrite_file(Path(run_dir) / CLASSES_FILE, json.dumps(list(classes)) + "\n")


def write_vocabulary(run_dir: str | Path, vocabulary: Sequence[str]) -> None:
    """``vocabulary.json``: the words a text model was trained on, in number order (0 pads,
    1 is an unknown word). Prediction reads it instead of learning the vocabulary again from
    the data folder, which may have changed (a file added) and would then number the words
    differently from training, silently."""
    rewrite_file(
        Path(run_dir) / VOCABULARY_FILE, json.dumps([str(word) for word in vocabulary]) + "\n"
    )


JSON_READ_LIMIT = 64 * 1024 * 1024
"""The largest run-folder JSON file read (a vocabulary of a million words fits): a shared
run folder is untrusted, and a crafted file must not take the reader's memory."""


def _read_json(path: Path) -> Any:
    """A run-folder JSON file's value, or None when it is missing, too big, or not JSON."""
    try:
        return load_json(path, JSON_READ_LIMIT)
    except (OSError, ValueError):
        return None


def find_model_folder(run_dir: Path) -> Path | None:
    """The folder holding the run's ``model.keras``: the run's own, or its chief task's.

    A local cluster's top-level folder records the run; its chief's task folder
    (``tasks/worker-0``, ``tasks/chief-0``) holds what the chief saved.
    """
    if (run_dir / MODEL_FILE).is_file():
        return run_dir
    for name in ("chief-0", "worker-0"):
        if (run_dir / TASKS_DIR / name / MODEL_FILE).is_file():
            return run_dir / TASKS_DIR / name
    return None


def saved_model_folder(run_dir: Path) -> Path:
    """:func:`find_model_folder` for a prediction: the folder, or a RunFolderError saying
    why there is none (no such folder, a link in it, no ``model.keras`` yet)."""
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir}: no such run folder")
    refuse_links(run_dir)  # the model, classes.json and vocabulary.json: the folder's own
    folder = find_model_folder(run_dir)
    if folder is not None:
        return folder
    others = sorted(path.name for path in run_dir.glob("model-*.keras"))
    named = f" (it has {', '.join(others)}: custom code's models by name)" if others else ""
    raise RunFolderError(
        f"{run_dir}: no {MODEL_FILE} in this run folder{named}; a run saves it when it "
        "finishes or is stopped"
    )


def has_model(run_dir: Path) -> bool:
    """Whether the run left a ``model.keras`` to predict with (cheap: a few ``stat`` calls)."""
    return find_model_folder(run_dir) is not None


def class_names(folders: Sequence[Path], count: int) -> list[str]:
    """The data's class names from ``classes.json`` when it has ``count`` of them, else numbers.

    ``classes.json`` is a list of names, or an object whose ``classes`` is one.
    """
    for folder in folders:
        names = _read_json(folder / CLASSES_FILE)
        if isinstance(names, dict):
            names = names.get("classes")
        if (
            isinstance(names, list)
            and len(names) == count
            and all(isinstance(name, str) for name in names)
        ):
            return names
    return [str(index) for index in range(count)]


def saved_vocabulary(folders: Sequence[Path]) -> list[str] | None:
    """The text vocabulary the run trained with (``vocabulary.json``); None for a run that
    kept none (not a text model, or saved before runs kept it)."""
    for folder in folders:
        words = _read_json(folder / VOCABULARY_FILE)
        if isinstance(words, list) and all(isinstance(word, str) for word in words):
            return words
    return None


def read_confusion(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``confusion.json`` (classes, matrix), or None when it has none that reads."""
    folder = find_model_folder(run_dir)
    report = _read_json(folder / CONFUSION_FILE) if folder is not None else None
    matrix = report.get("matrix") if isinstance(report, dict) else None
    classes = report.get("classes") if isinstance(report, dict) else None
    if not (
        isinstance(matrix, list)
        and isinstance(classes, list)
        and len(matrix) == len(classes)
        and all(isinstance(row, list) and len(row) == len(classes) for row in matrix)
        and all(isinstance(count, int) for row in matrix for count in row)
    ):
        return None
    return report


def read_model_record(run_dir: Path) -> dict[str, Any] | None:
    """``model.json``: which step the saved weights are, and how they were chosen."""
    folder = find_model_folder(run_dir)
    record = _read_json(folder / MODEL_RECORD_FILE) if folder is not None else None
    return record if isinstance(record, dict) else None
