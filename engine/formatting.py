"""How Distloop writes a duration and a prediction as text.

One duration format, so a run that took ``1 min 05 s`` in the status panel does not
read ``65.0 s`` in the log and ``1:05`` in the runs table; and the terminal's forms of
a prediction (``distloop predict``'s line, and its ``--json``). It imports nothing
heavy: the CLI and the GUI both use it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .messages import Predicted


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


def format_prediction(prediction: Predicted, *, shown: int = 5) -> str:
    """One line: the input, the top class and its probability, then the runners-up."""
    if prediction.classes:
        top, *rest = prediction.classes
        text = f"{prediction.input}: {top.name} {top.probability:.4f}"
        if rest:
            others = ", ".join(f"{c.name} {c.probability:.4f}" for c in rest[: shown - 1])
            more = f", +{len(rest) - shown + 1} more" if len(rest) > shown - 1 else ""
            text += f"  ({others}{more})"
        return text
    values = prediction.values or []
    shown_values = " ".join(f"{value:.6g}" for value in values[:shown])
    more = f" +{len(values) - shown} more" if len(values) > shown else ""
    return f"{prediction.input}: {shown_values}{more}"


def prediction_json(prediction: Predicted) -> str:
    """The machine form of one prediction (``distloop predict --json``)."""
    item: dict[str, Any] = {"input": prediction.input}
    if prediction.classes is not None:
        top = prediction.classes[0]
        item["class"] = top.name
        item["probability"] = top.probability
        item["classes"] = {c.name: c.probability for c in prediction.classes}
    else:
        item["values"] = prediction.values
    return json.dumps(item)
