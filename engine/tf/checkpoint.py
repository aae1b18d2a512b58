"""Checkpoints of a run: model, optimizer and step counter (imports TensorFlow).

The data position is not in the checkpoint (TensorFlow cannot checkpoint a
distributed iterator); the step counter is enough because the input pipeline is
one deterministic sequence that a resumed run skips forward (``engine.tf.data``).

With several workers, every task must save (saving is collective), but only the
chief keeps what it wrote; the others write to a temporary folder of their own
and remove it, as TensorFlow's multi-worker tutorial does. Every task restores
from its own folder's ``checkpoints/``: on a resume, every task must start from
the chief's checkpoint, so the launcher copies it there first
(``engine.cluster.LocalCluster``; on real hosts, copy it or share the folder).

A save that fails (a full disk) leaves no trace: its half-written files and its
``_temp`` folder are removed and the ``checkpoint`` index keeps naming the last
complete checkpoint, so a resume starts from there.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import tensorflow as tf

from ..fileio import atomic_write_text
from ..run_folder import CHECKPOINT_DIR, CHECKPOINT_INDEX_FILE, folder_write_error, remove_path


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be restored: corrupt, or from a different model."""


class RunCheckpoints:
    def __init__(
        self,
        run_dir: Path,
        model: tf.keras.Model | dict[str, tf.keras.Model],
        optimizer: tf.keras.optimizers.Optimizer | dict[str, tf.keras.optimizers.Optimizer],
        *,
        is_chief: bool,
        task: str | None,
    ) -> None:
        """``model`` and ``optimizer`` are dicts by name when custom code trains several."""
        self._is_chief = is_chief
        self._step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self._checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=self._step)
        name = (
            CHECKPOINT_DIR
            if is_chief
            else f"{CHECKPOINT_DIR}-tmp-{(task or 'task').replace(':', '-')}"
        )
        self._run_dir = run_dir
        self._restore_from = run_dir / CHECKPOINT_DIR
        self.directory = run_dir / name
        """Where this task writes its checkpoints (a temporary folder unless it is the chief)."""
        self._manager = tf.train.CheckpointManager(self._checkpoint, self.directory, max_to_keep=3)
        self.last_saved: int | None = None

    def restore_latest(self) -> int:
        """Restores the newest checkpoint; returns its step (0 when there is none)."""
        path = tf.train.latest_checkpoint(str(self._restore_from))
        if path is None:
            return 0
        try:
            self._checkpoint.restore(path).assert_existing_objects_matched()
        except Exception as exc:  # corrupt files surface as IndexError, OpError, ValueError...
            raise CheckpointError(
                f"cannot restore {path}: it is corrupt or does not fit this project's model "
                f"and optimizer ({type(exc).__name__}: {str(exc).splitlines()[0]})"
            ) from exc
        self.last_saved = int(self._step.numpy())
        return self.last_saved

    def save(self, step: int) -> None:
        """Saves the state after ``step`` (the loop's checkpoint hook says when, and records
        the steps up to it first: ``engine.loop_hooks.Checkpointing``)."""
        self._step.assign(step)
        index = self.directory / CHECKPOINT_INDEX_FILE
        previous = index.read_text(encoding="utf-8") if index.is_file() else None
        try:
            self._manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as exc:
            error = folder_write_error(
                self._run_dir, exc, f"the checkpoint of step {step}", parts=[self.directory.name]
            )
            self._discard(step, previous)
            raise error from None
        self.last_saved = step
        if not self._is_chief:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _discard(self, step: int, previous_index: str | None) -> None:
        """Removes what a failed save of ``step`` wrote and puts the index back as it was."""
        if not self._is_chief:
            shutil.rmtree(self.directory, ignore_errors=True)
            return
        for path in [
            *self.directory.glob(f"ckpt-{step}.*"),
            *self.directory.glob(f"ckpt-{step}_temp*"),
            # TensorFlow's atomic write of the index
            *self.directory.glob(f"{CHECKPOINT_INDEX_FILE}.tmp*"),
        ]:
            with contextlib.suppress(OSError):
                remove_path(path)
        index = self.directory / CHECKPOINT_INDEX_FILE
        with contextlib.suppress(OSError):
            current = index.read_text(encoding="utf-8") if index.is_file() else None
            if current != previous_index:
                if previous_index is None:
                    index.unlink()
                else:
                    atomic_write_text(index, previous_index, follow_symlinks=False)
