"""TensorBoard scalars of a run, written by the chief only (imports TensorFlow).

Summaries are written on a thread of their own: an eager ``tf.summary.scalar`` per
step would cost the training loop time it does not need to spend.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import tensorflow as tf

TENSORBOARD_DIR = "tensorboard"


class TensorBoardWriter:
    def __init__(self, run_dir: Path) -> None:
        self._writer = tf.summary.create_file_writer(str(run_dir / TENSORBOARD_DIR))
        self._batches: queue.SimpleQueue[tuple[list[int], list[float]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write, name="tensorboard", daemon=True)
        self._thread.start()

    def __call__(self, steps: list[int], losses: list[float]) -> None:
        self._batches.put((steps, losses))

    def _write(self) -> None:
        while (batch := self._batches.get()) is not None:
            with self._writer.as_default():
                for step, loss in zip(*batch, strict=True):
                    tf.summary.scalar("loss", loss, step=step)
            self._writer.flush()

    def close(self) -> None:
        self._batches.put(None)
        self._thread.join(timeout=30)
        self._writer.close()
