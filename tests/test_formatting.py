"""One duration format for the status panel, the runs table, the log and the terminal."""

from __future__ import annotations

import pytest
from distloop.engine.formatting import format_duration


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
