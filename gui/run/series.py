"""Plot data that grows by the batch: amortized-doubling buffers and an incremental EMA.

A long run reports millions of steps. Appending to Python lists and converting
them on every redraw would cost O(n) per batch; these buffers append in amortized
O(batch) and hand the plot a numpy view without copying. The smoothing is
TensorBoard's debiased exponential moving average, computed only for the new
points, so appending never rewrites a smoothed value already drawn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike, NDArray

# Powers a^-k stay below 1e150 inside a block, so the block formula cannot overflow.
_MAX_BLOCK = 4096
_MAX_EXPONENT = 150.0


class GrowingArray:
    """A 1-D float64 array with amortized O(1) append."""

    def __init__(self, capacity: int = 1024) -> None:
        self._data = np.empty(max(capacity, 1), dtype=np.float64)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def extend(self, values: ArrayLike) -> None:
        new = np.asarray(values, dtype=np.float64).ravel()
        end = self._size + len(new)
        if end > len(self._data):
            grown = np.empty(max(end, 2 * len(self._data)), dtype=np.float64)
            grown[: self._size] = self._data[: self._size]
            self._data = grown
        self._data[self._size : end] = new
        self._size = end

    def view(self) -> NDArray[np.float64]:
        """The values so far, without copying; read-only so a caller cannot corrupt it."""
        out = self._data[: self._size]
        out.flags.writeable = False
        return out

    def clear(self) -> None:
        self._size = 0

    def truncate(self, size: int) -> None:
        """Keeps the first ``size`` values (a resumed run drops the steps it redoes)."""
        self._size = max(0, min(size, self._size))


def _raw_ema(values: NDArray[np.float64], weight: float, start: float) -> NDArray[np.float64]:
    """``s_k = weight * s_{k-1} + (1 - weight) * x_k`` from ``s_{-1} = start``, vectorized.

    Within a block, ``s_k = a^(k+1) s + (1-a) a^k cumsum(a^-j x_j)``; blocks are
    short enough that ``a^-j`` stays finite for any weight.
    """
    if weight == 0.0:
        return values.copy()
    out = np.empty_like(values)
    block = int(min(_MAX_BLOCK, max(1.0, _MAX_EXPONENT / -math.log10(weight))))
    state = start
    for begin in range(0, len(values), block):
        chunk = values[begin : begin + block]
        k = np.arange(len(chunk), dtype=np.float64)
        powers = weight**k
        smoothed = weight * powers * state + (1.0 - weight) * powers * np.cumsum(chunk * weight**-k)
        out[begin : begin + len(chunk)] = smoothed
        state = float(smoothed[-1])
    return out


class Smoother:
    """TensorBoard's smoothing: a debiased EMA that skips NaN and infinite losses.

    Debiasing divides by ``1 - weight^n`` (n finite points so far), so the curve
    starts at the first loss instead of climbing up from zero. A non-finite loss
    gets a NaN (a gap) and leaves the average untouched.
    """

    def __init__(self, weight: float) -> None:
        if not 0.0 <= weight < 1.0:
            raise ValueError(f"smoothing weight must be in [0, 1), not {weight}")
        self.weight = weight
        self._raw = 0.0
        self._count = 0

    def extend(self, values: Iterable[float] | NDArray[np.float64]) -> NDArray[np.float64]:
        """The smoothed values of ``values``, continuing from everything extended before."""
        x = np.asarray(values, dtype=np.float64)
        out = np.full(len(x), np.nan)
        finite = np.isfinite(x)
        kept = x[finite]
        if len(kept):
            raw = _raw_ema(kept, self.weight, self._raw)
            counts = self._count + np.arange(1, len(kept) + 1, dtype=np.float64)
            out[finite] = raw / (1.0 - self.weight**counts)
            self._raw = float(raw[-1])
            self._count += len(kept)
        return out
