"""Growing buffers and the incremental, debiased EMA behind the loss plot."""

from __future__ import annotations

import math

import numpy as np
import pytest
from distloop.gui.run.series import GrowingArray, Smoother
from hypothesis import given, settings
from hypothesis import strategies as st


def reference_ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard's smoothing, one point at a time."""
    last, count, out = 0.0, 0, []
    for value in values:
        if not math.isfinite(value):
            out.append(math.nan)
            continue
        last = last * weight + (1 - weight) * value
        count += 1
        out.append(last / (1 - weight**count))
    return out


def test_growing_array_keeps_every_value() -> None:
    buffer = GrowingArray(capacity=2)
    expected = []
    for start in range(0, 1000, 7):
        chunk = list(range(start, start + 7))
        buffer.extend(chunk)
        expected += chunk
    assert len(buffer) == len(expected)
    assert np.array_equal(buffer.view(), expected)
    with pytest.raises(ValueError):
        buffer.view()[0] = 5  # read-only: the plot holds it
    buffer.clear()
    assert len(buffer) == 0


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(min_value=-1e6, max_value=1e6),
            st.sampled_from([math.nan, math.inf]),
        ),
        max_size=300,
    ),
    weight=st.sampled_from([0.0, 0.01, 0.5, 0.6, 0.9, 0.99, 0.999]),
    cut=st.integers(min_value=0, max_value=300),
)
def test_matches_tensorboard_and_appends_never_rewrite(
    values: list[float], weight: float, cut: int
) -> None:
    smoother = Smoother(weight)
    first = smoother.extend(values[:cut])
    rest = smoother.extend(values[cut:])
    combined = np.concatenate([first, rest])
    expected = np.array(reference_ema(values, weight))
    assert np.allclose(combined, expected, rtol=1e-9, atol=1e-9, equal_nan=True)


def test_non_finite_losses_leave_gaps() -> None:
    out = Smoother(0.5).extend([1.0, math.nan, 3.0])
    assert out[0] == 1.0 and math.isnan(out[1]) and out[2] == pytest.approx(2.3333333333)


def test_weight_must_be_below_one() -> None:
    with pytest.raises(ValueError):
        Smoother(1.0)
