"""How Distloop writes a duration, a count and a number in a table as text.

One duration format, so a run that took ``1 min 05 s`` in the status panel does not
read ``65.0 s`` in the log and ``1:05`` in the runs table. It imports nothing of ours:
the CLI, the GUI and the engine's lowest layers all use it.
"""

from __future__ import annotations

import math


def format_duration(seconds: float) -> str:
    """``12.3 s`` under a minute, ``1 min 05 s`` under an hour, ``1 h 02 min`` beyond.

    Tenths only where they matter (short runs and steps); an hour-long run's seconds
    are noise. Negative or non-finite input (a clock that jumped) reads as no time.
    """
    if not math.isfinite(seconds) or seconds < 0:
        seconds = 0.0
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        minutes, secs = divmod(whole, 60)
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


COUNT_UNITS = ((1e3, "k"), (1e6, "M"), (1e9, "B"))
EXACT_COUNT_BELOW = 100_000
"""Counts below this are written out (``99,999``): six characters, like a compact one."""


def format_count(count: int) -> str:
    """``12,345`` in full; ``123k``, ``10.0M``, ``1.50B`` from 100,000 on.

    Three significant digits and a unit keep a table's column narrow enough for any
    count (``10,000,000`` steps was elided to ``10,…000``); the exact count belongs in
    the cell's tooltip.
    """
    if abs(count) < EXACT_COUNT_BELOW:
        return f"{count:,}"
    for size, unit in COUNT_UNITS:
        scaled = float(f"{count / size:.3g}")
        if abs(scaled) < 1000 or unit == COUNT_UNITS[-1][1]:  # 999,999 reads 1.00M, not 1e+03k
            break
    return f"{scaled:.{max(0, 2 - int(math.log10(abs(scaled))))}f}{unit}"


def format_compact(value: float) -> str:
    """Four significant digits, an exponent without padding: ``0.4321``, ``9.96e-5``, ``inf``.

    For tables: a float32's full text (``0.00099597``) was elided to ``0.000…99597``.
    """
    text = f"{value:.4g}"
    mantissa, marker, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if marker else text
