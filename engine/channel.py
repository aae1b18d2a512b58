"""The engine's sending side of the protocol (see ``engine.messages``).

The queue to the parent is bounded so that a slow or frozen GUI cannot make the
engine's memory grow, and training never waits for the parent: what does not
fit waits here, in order. Consecutive step batches that wait merge into one
(nothing is dropped; ``metrics.csv`` has every step anyway), and log lines that
find the queue busy are dropped from it (they are still in ``engine.log``). Only
:meth:`Channel.close`, at the very end of a run, waits until everything is
delivered: a frozen parent that recovers still learns how the run ended, and a
dead one ends this process anyway (the parent watchdog in ``engine.child_main``).
"""

from __future__ import annotations

import collections
import contextlib
import queue
import threading
from pathlib import Path
from typing import Any, TextIO

from .messages import Log, StepMetrics, _Message
from .run_folder import LOG_FILE, RunFolderError, folder_write_error, log_line, open_log


class Channel:
    def __init__(self, out: Any, task: str | None, run_dir: Path | None) -> None:
        self._queue = out
        self._task = task
        self._waiting: collections.deque[_Message] = collections.deque()
        self._lock = threading.RLock()
        """The loop and the resource sampler (``engine.system_metrics``) both send: one
        message must not be delivered twice, nor one batch merged into another's copy."""
        self._log_file: TextIO | None = None
        self.log_error: RunFolderError | None = None
        """Why ``engine.log`` could not be opened (a link to elsewhere, no permission): the
        run fails with it first thing, through this channel, whose messages still go out."""
        if run_dir is not None:
            try:
                self._log_file = open_log(run_dir)
            except OSError as exc:
                self.log_error = folder_write_error(run_dir, exc, LOG_FILE)
        self.last_step: int | None = None
        """The last step reported (and written to metrics.csv): where a failure stopped."""

    @property
    def task(self) -> str | None:
        return self._task

    def send(self, message: _Message) -> None:
        """Queues a message that must arrive (run started, finished, failed), in order."""
        with self._lock:
            self._waiting.append(message.model_copy(update={"task": self._task}))
            self._deliver(block=False)

    def metrics(self, message: StepMetrics) -> None:
        """Sends step metrics without blocking; merges them with a batch still waiting."""
        message = message.model_copy(update={"task": self._task})
        if message.steps:
            self.last_step = message.steps[-1]
        with self._lock:
            if self._waiting and isinstance(self._waiting[-1], StepMetrics):
                message = _merge(self._waiting.pop(), message)
            self._waiting.append(message)
            self._deliver(block=False)

    def log(
        self, text: str, level: str = "info", source: str = "engine", *, forward: bool = True
    ) -> None:
        """Writes the line to ``engine.log`` and, with ``forward``, passes it on when the
        queue has room."""
        if self._log_file is not None:
            try:
                self._log_file.write(log_line(level, source, text))
                self._log_file.flush()
            except OSError:  # a full disk: the run stops on its own write; the parent hears it
                self._close_log()
        if self._waiting or not forward:
            return
        message = Log(level=level, source=source, text=text, task=self._task)
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(message.model_dump())

    def _deliver(self, *, block: bool) -> None:
        while self._waiting:
            try:
                self._queue.put(self._waiting[0].model_dump(), block=block)
            except queue.Full:
                return
            self._waiting.popleft()

    def flush(self) -> None:
        """Delivers everything still waiting, however long the parent takes to read: a
        process that answers requests (prediction) ends each answer with it."""
        with self._lock:
            self._deliver(block=True)

    def close(self) -> None:
        """Delivers everything still waiting, then closes the queue and the log."""
        self.flush()
        self._close_log()
        close = getattr(self._queue, "close", None)
        if close is not None:
            close()
            self._queue.join_thread()

    def _close_log(self) -> None:
        if self._log_file is not None:
            with contextlib.suppress(OSError):  # closing flushes, which a full disk refuses
                self._log_file.close()
            self._log_file = None


def _merge(first: StepMetrics, second: StepMetrics) -> StepMetrics:
    replicas = None
    if first.replica_losses is not None and second.replica_losses is not None:
        replicas = first.replica_losses + second.replica_losses
    named = None
    if first.named_losses is not None and second.named_losses is not None:
        named = {
            name: values + second.named_losses[name] for name, values in first.named_losses.items()
        }
    return StepMetrics(
        task=first.task,
        steps=first.steps + second.steps,
        losses=first.losses + second.losses,
        elapsed_s=first.elapsed_s + second.elapsed_s,
        replica_losses=replicas,
        named_losses=named,
    )
