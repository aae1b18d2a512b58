"""TensorBoard scalars of a run, written by the chief only (imports TensorFlow).

Event files are written directly (``Event`` protocol buffers in a TFRecord file,
the format TensorBoard reads) on a thread of their own: ``tf.summary.scalar``
needs the ``tensorboard`` package, which TensorFlow no longer installs, and an
eager op per step would cost the training loop time it does not need to spend.

Tags: ``loss`` (the primary loss), ``loss/<name>`` for each named loss of custom
step code, and ``eval/<metric>`` (``eval/val_loss``, ...) for evaluations.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from pathlib import Path

import tensorflow as tf
from tensorflow.core.framework.summary_pb2 import Summary
from tensorflow.core.util.event_pb2 import Event

from ..run_folder import TENSORBOARD_DIR, RunFolderError


class TensorBoardWriter:
    def __init__(self, run_dir: Path) -> None:
        folder = run_dir / TENSORBOARD_DIR
        folder.mkdir(parents=True, exist_ok=True)
        if folder.is_symlink():  # TensorFlow's writer would follow it (a resume refuses it first)
            raise RunFolderError(f"{folder} is a symbolic link: event files go into the run folder")
        name = f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}.distloop"
        self._writer = tf.io.TFRecordWriter(str(folder / name))
        self._writer.write(
            Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString()
        )
        self._batches: queue.SimpleQueue[list[tuple[str, int, float]] | threading.Event | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._write, name="tensorboard", daemon=True)
        self._thread.start()

    def __call__(
        self, steps: list[int], losses: list[float], named: dict[str, list[float]] | None = None
    ) -> None:
        """Queues a flushed batch of step losses (``engine.reporting.StepReporter``'s ``also``)."""
        batch = [("loss", step, loss) for step, loss in zip(steps, losses, strict=True)]
        for name, values in (named or {}).items():
            batch += [(f"loss/{name}", step, v) for step, v in zip(steps, values, strict=True)]
        self._batches.put(batch)

    def evaluation(self, step: int, metrics: dict[str, float]) -> None:
        """Queues one evaluation's metrics."""
        self._batches.put([(f"eval/{name}", step, value) for name, value in metrics.items()])

    def sync(self) -> None:
        """Returns once every queued scalar is in the event file (before a checkpoint).

        A checkpoint at step N must never be on disk before the steps up to N are: a
        resume keeps what the checkpoint has and never trains those steps again.
        """
        written = threading.Event()
        self._batches.put(written)
        while not written.wait(timeout=0.1):
            if not self._thread.is_alive():  # it failed writing: nothing more will be written
                return

    def _write(self) -> None:
        while (batch := self._batches.get()) is not None:
            if isinstance(batch, threading.Event):
                batch.set()
                continue
            now = time.time()
            for tag, step, value in batch:
                summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
                self._writer.write(
                    Event(wall_time=now, step=step, summary=summary).SerializeToString()
                )
            self._writer.flush()

    def close(self) -> None:
        self._batches.put(None)
        self._thread.join(timeout=30)
        self._writer.close()
