"""The trained model a run leaves behind: ``model.keras``, and what describes it (imports TF).

A finished or stopped run saves its model (a failed one does not: its weights may
be what failed it). With evaluation on, the saved weights are those of the
evaluation with the lowest ``val_loss``, kept in memory when they appear (a copy
of a small model's arrays costs less than a save at every new best); the last
weights stay in ``checkpoints/`` for a resume. ``model.json`` records which
step the saved weights are, so a resumed run keeps an earlier segment's best
unless it beats it. A classifier evaluated on validation data also gets
``confusion.json``, computed from the saved weights.

Every file is written under a temporary name in the run folder and renamed, so a
crash never leaves half a model under the real name. In a multi-worker run every
task saves, as with checkpoints (TensorFlow allows collectives in a save); only
the chief's land in the run folder, the others' go to a temporary folder that is
removed. Only the chief decides whether a new save replaces an earlier segment's
best, so every task takes part in the same saves whatever its own folder holds.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from ..channel import Channel
from ..config import LossConfig, Project
from ..fileio import atomic_write_text, fsync_folder
from ..run_folder import (
    CONFUSION_FILE,
    MODEL_FILE,
    MODEL_RECORD_FILE,
    SAVED_MODEL_DIR,
    class_names,
    remove_path,
)
from .data import build_eval_data

BEST_VAL_LOSS = "best_val_loss"
LAST_STEP = "last_step"


class ModelKeeper:
    """Keeps a run's best weights and saves its model when the run ends well."""

    def __init__(
        self,
        run_dir: Path,
        models: Mapping[str, tf.keras.Model],
        project: Project,
        channel: Channel,
        *,
        chief: bool,
        resumed_at: int | None,
    ) -> None:
        """``resumed_at`` is the step a resumed run continues from (None for a new run)."""
        self._run_dir = run_dir
        self._models = dict(models)
        self._project = project
        self._channel = channel
        self._chief = chief
        self._best: tuple[int, float, list[np.ndarray]] | None = None
        self._earlier = _earlier_best(run_dir, resumed_at) if chief else None

    def remember(self, step: int, val_loss: float) -> None:
        """Keeps a copy of the weights that gave a new lowest ``val_loss`` (the loop's
        ``KeepModel`` hook says when), to save them if no later evaluation beats them."""
        model = self._models.get("model")
        if model is not None:
            self._best = (step, val_loss, model.get_weights())

    def save(self, last_step: int) -> None:
        """Saves the run's model(s): the best evaluated weights, else the last ones."""
        primary = _primary(self._models)
        if primary is None:
            self._channel.log(
                "distloop predict and the Try it panel use model.keras; custom code's models "
                f"are named {', '.join(self._models)}, so each is saved as model-<name>.keras"
            )
        for name, model in self._models.items():
            if name == primary:
                self._save_primary(model, last_step)
            else:
                self._save_file(model, f"model-{name}.keras")

    def _save_primary(self, model: tf.keras.Model, last_step: int) -> None:
        evaluating = self._project.evaluation is not None
        best = self._best if evaluating else None
        record: dict[str, Any] = {"step": last_step, "selected": LAST_STEP}
        last_weights = None
        if best is not None:
            step, val_loss, weights = best
            record = {"step": step, "selected": BEST_VAL_LOSS, "val_loss": val_loss}
            last_weights = model.get_weights()
            model.set_weights(weights)
        elif evaluating and self._earlier is None:
            self._channel.log(
                "no evaluation gave a finite val_loss: model.keras holds the last weights",
                level="warning",
            )
        try:
            keep = self._earlier is None or (
                best is not None and best[1] < self._earlier.get("val_loss", math.inf)
            )
            if not keep:
                assert self._earlier is not None
                self._channel.log(
                    f"model.keras keeps step {self._earlier['step']} (val_loss "
                    f"{self._earlier['val_loss']:.6g}): this part of the run found no lower "
                    "val_loss"
                )
            saved = self._save_file(model, MODEL_FILE, keep=keep)
            if self._project.training.export_saved_model:
                self._export(model, keep=keep)
            if saved and keep and self._chief:
                self._describe(model, record)
        finally:
            if last_weights is not None:
                model.set_weights(last_weights)

    def _describe(self, model: tf.keras.Model, record: dict[str, Any]) -> None:
        """``model.json`` and the confusion matrix; a run that trained is not failed for them."""
        try:
            atomic_write_text(
                self._run_dir / MODEL_RECORD_FILE,
                json.dumps(record, indent=2) + "\n",
                follow_symlinks=False,
            )
            self._write_confusion(model, record["step"])
        except (OSError, ValueError, tf.errors.OpError) as exc:
            self._channel.log(
                f"cannot describe {MODEL_FILE}: {type(exc).__name__}: {str(exc).splitlines()[0]}",
                level="warning",
            )

    def _save_file(self, model: tf.keras.Model, name: str, *, keep: bool = True) -> bool:
        """Saves ``model`` as ``name``; False (with a warning) when it cannot be saved."""
        try:
            with self._target(name, keep=keep) as path:
                model.save(path)
        # Custom code's models may fail to serialize in any way Keras has; the run trained.
        except Exception as exc:
            self._channel.log(
                f"cannot save {name}: {type(exc).__name__}: {str(exc).splitlines()[0]}; the "
                "weights are in checkpoints/",
                level="warning",
            )
            return False
        return True

    def _export(self, model: tf.keras.Model, *, keep: bool) -> None:
        try:
            with self._target(SAVED_MODEL_DIR, keep=keep) as path:
                model.export(path, verbose=False)
        except Exception as exc:  # as for model.keras: a warning, never a failed run
            self._channel.log(
                f"cannot export {SAVED_MODEL_DIR}/ for TF Serving: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0]}",
                level="warning",
            )

    @contextlib.contextmanager
    def _target(self, name: str, *, keep: bool) -> Any:
        """A temporary path to save ``name`` to, renamed into the run folder when kept.

        Tasks other than the chief, and a save the chief does not keep, write to a
        temporary folder that is removed: the save still runs on every task.
        """
        if not (self._chief and keep):
            scratch = Path(tempfile.mkdtemp(prefix="distloop-model-"))
            try:
                yield str(scratch / name)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            return
        # Keras wants a ``.keras`` file name, so the suffix stays at the end.
        temporary = self._run_dir / f".{secrets.token_hex(4)}.tmp-{name}"
        try:
            yield str(temporary)
            _replace(temporary, self._run_dir / name)
        finally:
            if os.path.lexists(temporary):
                with contextlib.suppress(OSError):
                    remove_path(temporary)

    def _write_confusion(self, model: tf.keras.Model, step: int) -> None:
        project = self._project
        if project.evaluation is None or not project.loss.is_classification:
            return
        matrix = confusion_matrix(model, project)
        if matrix is None:
            self._channel.log(
                "no confusion matrix: binary_crossentropy with several outputs labels each "
                "output on its own (multi-label)"
            )
            return
        names = class_names([self._run_dir], len(matrix))
        report = {
            "step": step,
            "classes": names,
            "matrix": matrix.tolist(),
            "examples": int(matrix.sum()),
            "rows": "true class",
            "columns": "predicted class",
        }
        atomic_write_text(
            self._run_dir / CONFUSION_FILE, json.dumps(report) + "\n", follow_symlinks=False
        )


def _primary(models: Mapping[str, tf.keras.Model]) -> str | None:
    """The model saved as ``model.keras``: the one named ``model``, or the only one."""
    if "model" in models:
        return "model"
    return next(iter(models)) if len(models) == 1 else None


def _earlier_best(run_dir: Path, resumed_at: int | None) -> dict[str, Any] | None:
    """An earlier segment's best-by-val_loss record, when this run continues that segment."""
    if resumed_at is None:
        return None
    try:
        record = json.loads((run_dir / MODEL_RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(record, dict)
        or record.get("selected") != BEST_VAL_LOSS
        or not isinstance(record.get("step"), int)
        or record["step"] > resumed_at
        or not isinstance(record.get("val_loss"), float)
        or not (run_dir / MODEL_FILE).is_file()
    ):
        return None
    return record


def _replace(source: Path, target: Path) -> None:
    """Renames ``source`` over ``target`` (a file or a folder) and makes it durable."""
    if target.is_dir() and not target.is_symlink():
        old = target.with_name(f".{secrets.token_hex(4)}.old-{target.name}")
        os.replace(target, old)
        os.replace(source, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(source, target)
    fsync_folder(target.parent)


def predicted_classes(outputs: np.ndarray, loss: LossConfig) -> np.ndarray | None:
    """Each example's class as evaluation counts it; None for multi-label binary outputs."""
    if loss.kind == "binary_crossentropy":
        if outputs.shape[-1] != 1:
            return None
        threshold = 0.0 if loss.from_logits else 0.5  # a logit of 0 is a probability of 0.5
        return (outputs[..., 0] > threshold).astype(np.int64)
    return np.argmax(outputs, axis=-1).astype(np.int64)


def _true_classes(labels: np.ndarray, loss: LossConfig) -> np.ndarray:
    if loss.kind == "binary_crossentropy":
        return (labels.reshape(len(labels), -1)[:, 0] > 0.5).astype(np.int64)
    if loss.kind == "categorical_crossentropy":
        return np.argmax(labels, axis=-1).astype(np.int64)
    return labels.reshape(-1).astype(np.int64)


def confusion_matrix(model: tf.keras.Model, project: Project) -> np.ndarray | None:
    """Counts of (true class, predicted class) over one pass of the validation data."""
    dataset, _ = build_eval_data(project)
    matrix: np.ndarray | None = None
    for features, labels in dataset:
        outputs = np.asarray(model(features, training=False))
        predicted = predicted_classes(outputs, project.loss)
        if predicted is None:
            return None
        if matrix is None:
            size = 2 if project.loss.kind == "binary_crossentropy" else outputs.shape[-1]
            matrix = np.zeros((size, size), dtype=np.int64)
        np.add.at(matrix, (_true_classes(labels.numpy(), project.loss), predicted), 1)
    return matrix
