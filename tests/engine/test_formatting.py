"""One duration format for the status panel, the runs table, the log and the terminal."""

from __future__ import annotations

import pytest
from distloop.engine.formatting import format_compact, format_count, format_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0.0 s"),
        (12.34, "12.3 s"),
        (59.94, "59.9 s"),
        (59.96, "1 min 00 s"),  # never "60.0 s"
        (65, "1 min 05 s"),
        (3599.4, "59 min 59 s"),
        (3599.6, "1 h 00 min"),
        (3725, "1 h 02 min"),
        (2 * 86400 + 61, "48 h 01 min"),
        (-3, "0.0 s"),
        (float("nan"), "0.0 s"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0"),
        (99_999, "99,999"),
        (100_000, "100k"),
        (123_456, "123k"),
        (999_999, "1.00M"),
        (10_000_000, "10.0M"),
        (999_999_999, "1.00B"),
        (1_500_000_000, "1.50B"),
    ],
)
def test_format_count_keeps_any_count_to_six_characters(count: int, text: str) -> None:
    assert format_count(count) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.00099597, "0.000996"), (9.9597e-5, "9.96e-5"), (1.2345678, "1.235"), (1.0, "1")],
)
def test_format_compact_has_four_digits_and_a_short_exponent(value: float, text: str) -> None:
    assert format_compact(value) == text
