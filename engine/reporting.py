"""Collects each step's loss and hands it on in batches (no TensorFlow import here).

Fetching a loss forces TensorFlow to finish the step, so losses are kept as
tensors and fetched together every ``interval_s`` (:data:`REPORT_INTERVAL_S`: often
enough that a step reaches the screen within a tenth of a second, rarely enough that
fetching costs the loop nothing measurable): the training loop never waits for the
plot, and the GUI gets twenty updates a second however fast steps are.

A step's loss is one tensor, or, for custom step code that returns named losses,
a dict of them; the primary loss of such a step is its ``"loss"`` entry, else the
float32 sum of its named losses (see ``engine.messages.StepMetrics``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .channel import Channel
from .messages import PRIMARY_LOSS, StepMetrics
from .run_folder import MetricsWriter, format_loss

REPORT_INTERVAL_S = 0.05


class NonFiniteLossError(ArithmeticError):
    """The loss became NaN or infinite; training stops instead of wasting hours."""

    def __init__(self, step: int, value: float) -> None:
        self.step = step
        super().__init__(
            f"the loss became {format_loss(value)} at step {step}; lower the learning rate, "
            f"check the data, or set training.stop_on_nan to false to keep going"
        )


def primary_loss(named: Mapping[str, np.ndarray]) -> np.ndarray:
    """The loss that stands for named losses: the ``"loss"`` entry, else their float32 sum."""
    if PRIMARY_LOSS in named:
        return named[PRIMARY_LOSS]
    total = np.zeros_like(next(iter(named.values())), dtype=np.float32)
    for value in named.values():
        total = total + value
    return total


class StepReporter:
    def __init__(
        self,
        channel: Channel,
        metrics: MetricsWriter | None,
        *,
        stop_on_nan: bool,
        interval_s: float = REPORT_INTERVAL_S,
        max_pending: int = 1000,
        also: Callable[[list[int], list[float], dict[str, list[float]] | None], None] | None = None,
    ) -> None:
        """``also`` receives every flushed batch too (the chief's TensorBoard writer)."""
        self._channel = channel
        self._metrics = metrics
        self._stop_on_nan = stop_on_nan
        self._interval_s = interval_s
        self._max_pending = max_pending
        self._also = also
        self._chunks: list[tuple[int, int, Any, Any, float]] = []
        self._pending_steps = 0
        self._last_elapsed = 0.0
        self._last_flush = time.monotonic()
        self._warned_non_finite = False
        self.last_step: int | None = None
        self.last_loss: float | None = None

    @property
    def elapsed_s(self) -> float:
        """The training clock at the last flushed step (metrics.csv's ``elapsed_s``)."""
        return self._last_elapsed

    def start_at(self, elapsed_s: float) -> None:
        """Continues a resumed run's clock, so interpolated times never run backwards."""
        self._last_elapsed = elapsed_s

    def record(self, step: int, loss: Any, replica_losses: Any, elapsed_s: float) -> None:
        """Keeps one step's loss tensor; flushes when the interval or the batch is full."""
        self.record_many(step, 1, loss, replica_losses, elapsed_s)

    def record_many(
        self, first_step: int, count: int, losses: Any, replica_losses: Any, elapsed_s: float
    ) -> None:
        """Keeps ``count`` steps' losses (one fused execution) without fetching them."""
        self._chunks.append((first_step, count, losses, replica_losses, elapsed_s))
        self._pending_steps += count
        now = time.monotonic()
        if now - self._last_flush >= self._interval_s or self._pending_steps >= self._max_pending:
            self.flush()

    def flush(self) -> None:
        """Fetches the kept losses, writes them to metrics.csv and sends them on."""
        self._last_flush = time.monotonic()
        if not self._chunks:
            return
        steps: list[int] = []
        losses: list[float] = []
        elapsed: list[float] = []
        replicas: list[list[float]] | None = [] if self._chunks[0][3] is not None else None
        named: dict[str, list[float]] | None = None
        for first, count, loss_values, replica_values, end_s in self._chunks:
            steps += range(first, first + count)
            if isinstance(loss_values, Mapping):
                values = {
                    name: np.asarray(value, dtype=np.float32).reshape(count)
                    for name, value in loss_values.items()
                }
                if named is None:
                    named = {name: [] for name in values}
                for name, value in values.items():
                    named[name] += value.astype(np.float64).tolist()
                losses += primary_loss(values).astype(np.float64).tolist()
            else:
                losses += np.asarray(loss_values, dtype=np.float64).reshape(count).tolist()
            # A fused execution reports one time: spread it evenly over its steps.
            begin_s = self._last_elapsed
            elapsed += [begin_s + (end_s - begin_s) * (i + 1) / count for i in range(count)]
            self._last_elapsed = end_s
            if replicas is not None:
                replicas += np.asarray(replica_values, dtype=np.float64).reshape(count, -1).tolist()
        self._chunks, self._pending_steps = [], 0
        if self._metrics is not None:
            self._metrics.write(steps, losses, elapsed, replicas, named)
        if self._also is not None:
            self._also(steps, losses, named)
        self._channel.metrics(
            StepMetrics(
                steps=steps,
                losses=losses,
                elapsed_s=elapsed,
                replica_losses=replicas,
                named_losses=named,
            )
        )
        self.last_step, self.last_loss = steps[-1], losses[-1]
        self._check_finite(steps, losses)

    def _check_finite(self, steps: list[int], losses: list[float]) -> None:
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
                return
