"""How Distloop writes a duration, the same in the window, the runs table and the terminal.

One function, so a run that took ``1 min 05 s`` in the status panel does not
read ``65.0 s`` in the log and ``1:05`` in the runs table. It imports nothing
heavy: the CLI and the GUI both use it.
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
