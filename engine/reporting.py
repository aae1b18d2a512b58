"""Collects each step's loss and hands it on in batches (no TensorFlow import here).

Fetching a loss forces TensorFlow to finish the step, so losses are kept as
tensors and fetched together every ``interval_s``: the training loop never waits
for the plot, and the GUI gets about ten updates a second however fast steps are.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from engine.channel import Channel
from engine.messages import StepMetrics
from engine.run_folder import MetricsWriter, format_loss


class NonFiniteLossError(ArithmeticError):
    """The loss became NaN or infinite; training stops instead of wasting hours."""

    def __init__(self, step: int, value: float) -> None:
        self.step = step
        super().__init__(
            f"the loss became {format_loss(value)} at step {step}; lower the learning rate, "
            f"check the data, or set training.stop_on_nan to false to keep going"
        )


class StepReporter:
    def __init__(
        self,
        channel: Channel,
        metrics: MetricsWriter | None,
        *,
        stop_on_nan: bool,
        interval_s: float = 0.1,
        max_pending: int = 1000,
    ) -> None:
        self._channel = channel
        self._metrics = metrics
        self._stop_on_nan = stop_on_nan
        self._interval_s = interval_s
        self._max_pending = max_pending
        self._steps: list[int] = []
        self._losses: list[Any] = []
        self._replica_losses: list[Any] = []
        self._elapsed: list[float] = []
        self._last_flush = time.monotonic()
        self._warned_non_finite = False
        self.last_step: int | None = None
        self.last_loss: float | None = None

    def record(self, step: int, loss: Any, replica_losses: Any, elapsed_s: float) -> None:
        """Keeps the step's loss tensor; flushes when the interval or the batch is full."""
        self._steps.append(step)
        self._losses.append(loss)
        if replica_losses is not None:
            self._replica_losses.append(replica_losses)
        self._elapsed.append(elapsed_s)
        now = time.monotonic()
        if now - self._last_flush >= self._interval_s or len(self._steps) >= self._max_pending:
            self.flush()

    def flush(self) -> None:
        """Fetches the kept losses, writes them to metrics.csv and sends them on."""
        self._last_flush = time.monotonic()
        if not self._steps:
            return
        losses = [float(np.asarray(v)) for v in self._losses]
        replicas = (
            [np.asarray(v, dtype=np.float64).ravel().tolist() for v in self._replica_losses]
            if self._replica_losses
            else None
        )
        steps, elapsed = self._steps, self._elapsed
        self._steps, self._losses, self._replica_losses, self._elapsed = [], [], [], []
        if self._metrics is not None:
            self._metrics.write(steps, losses, elapsed, replicas)
        self._channel.metrics(
            StepMetrics(steps=steps, losses=losses, elapsed_s=elapsed, replica_losses=replicas)
        )
        self.last_step, self.last_loss = steps[-1], losses[-1]
        for step, loss in zip(steps, losses, strict=True):
            if not math.isfinite(loss):
                if self._stop_on_nan:
                    raise NonFiniteLossError(step, loss)
                if not self._warned_non_finite:
                    self._warned_non_finite = True
                    self._channel.log(
                        f"the loss became {format_loss(loss)} at step {step}; continuing "
                        "because training.stop_on_nan is false",
                        level="warning",
                    )
                break
