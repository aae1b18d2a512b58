"""The smoothed loss: one definition of where a run's training loss has come to.

One batch's loss is noise: ranking runs by their lowest (or their last) batch picks
the luckiest batch, not the run that learned most. The smoothed loss is the mean
loss of the last tenth of the steps so far (at least one step), so a longer run is
judged on more batches. Everything that judges runs by their training loss uses
this one definition, so the numbers agree wherever they are shown: a study's
``loss`` objective and its pruning reports (live, from the run's messages), the
sweep's results table and the runs list (from ``metrics.csv``).

A non-finite loss in that last tenth makes it None: a run whose loss turned NaN has
no smoothed loss to be ranked by.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

LATE_PARTS = 10
"""The smoothed loss is the mean of the last 1/LATE_PARTS of the steps."""


def late_steps(steps: int) -> int:
    """How many of ``steps`` losses the mean covers: a tenth, rounded up, at least one."""
    return max(1, -(-steps // LATE_PARTS))


class SmoothedLoss:
    """The smoothed loss of the losses given so far, one step each, in step order.

    Keeps only the last tenth (it only ever moves forward), so a run's file is read
    once, in pieces, and a live run costs a tenth of its steps in memory at most.
    """

    def __init__(self) -> None:
        self.steps = 0
        self._late = np.empty(0, dtype=np.float64)

    def extend(self, losses: Iterable[float] | np.ndarray) -> None:
        values = np.fromiter(losses, dtype=np.float64)
        if not len(values):
            return
        self.steps += len(values)
        self._late = np.concatenate([self._late, values])[-late_steps(self.steps) :]

    def value(self) -> float | None:
        """The mean of the last tenth; None with no loss yet, or a non-finite one in it."""
        if not len(self._late) or not np.isfinite(self._late).all():
            return None
        return float(np.mean(self._late))

    def copy(self) -> SmoothedLoss:
        twin = SmoothedLoss()
        twin.steps, twin._late = self.steps, self._late.copy()
        return twin


def smoothed_loss(losses: Iterable[float]) -> float | None:
    """The smoothed loss of a whole run's losses."""
    tracker = SmoothedLoss()
    tracker.extend(losses)
    return tracker.value()
