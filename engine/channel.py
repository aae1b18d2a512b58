"""The engine's sending side of the protocol (see ``engine.messages``).

The queue to the parent is bounded so that a slow or frozen GUI cannot make the
engine's memory grow; when it is full, step metrics wait here and merge into the
next batch (nothing is dropped, ``metrics.csv`` has every step anyway) and log
lines are dropped from the queue (they are still in ``engine.log``). Training
never blocks on the parent, except for the one final message of a run.
"""

from __future__ import annotations

import contextlib
import queue
import time
from pathlib import Path
from typing import Any

from engine.messages import Log, StepMetrics, _Message
from engine.run_folder import LOG_FILE


class Channel:
    def __init__(self, out: Any, task: str | None, run_dir: Path | None) -> None:
        self._queue = out
        self._task = task
        self._pending: StepMetrics | None = None
        self._log_file = (run_dir / LOG_FILE).open("a", encoding="utf-8") if run_dir else None

    @property
    def task(self) -> str | None:
        return self._task

    def send(self, message: _Message, *, timeout_s: float = 10.0) -> None:
        """Sends a message that must arrive (run started, finished, failed)."""
        self._flush_pending()
        self._queue.put(
            message.model_copy(update={"task": self._task}).model_dump(), timeout=timeout_s
        )

    def metrics(self, message: StepMetrics) -> None:
        """Sends step metrics without ever blocking; merges them while the queue is full."""
        if self._pending is not None:
            message = _merge(self._pending, message)
            self._pending = None
        try:
            self._queue.put_nowait(message.model_copy(update={"task": self._task}).model_dump())
        except queue.Full:
            self._pending = message

    def log(self, text: str, level: str = "info", source: str = "engine") -> None:
        """Writes the line to ``engine.log`` and passes it on when the queue has room."""
        if self._log_file is not None:
            stamp = time.strftime("%H:%M:%S")
            self._log_file.write(f"{stamp} {level[0].upper()} [{source}] {text}\n")
            self._log_file.flush()
        message = Log(level=level, source=source, text=text, task=self._task)
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(message.model_dump())

    def _flush_pending(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._queue.put(
                pending.model_copy(update={"task": self._task}).model_dump(), timeout=10
            )

    def close(self) -> None:
        """Delivers what is still pending and waits for the queue's feeder to finish."""
        self._flush_pending()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        close = getattr(self._queue, "close", None)
        if close is not None:
            close()
            self._queue.join_thread()


def _merge(first: StepMetrics, second: StepMetrics) -> StepMetrics:
    replicas = None
    if first.replica_losses is not None and second.replica_losses is not None:
        replicas = first.replica_losses + second.replica_losses
    return StepMetrics(
        steps=first.steps + second.steps,
        losses=first.losses + second.losses,
        elapsed_s=first.elapsed_s + second.elapsed_s,
        replica_losses=replicas,
    )
