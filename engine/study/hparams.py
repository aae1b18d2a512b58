"""TensorBoard's HParams dashboard for a study: ``tensorboard --logdir STUDY_DIR``.

The HParams plugin reads three kinds of summary (its ``plugin_data.proto`` and
``api.proto``; the field numbers below are theirs), written here without TensorFlow
(:mod:`engine.event_file`):

- the experiment, once, in the study folder itself: each field of the space as a
  hyperparameter (a range as its interval, choices as their values) and the
  objective as the metric ``study/<objective>``;
- per trial, in its run folder's ``tensorboard/`` beside the engine's scalars (so the
  trial's curves are the session's): the session's start with the trial's values, the
  objective as the scalar ``study/<objective>``, and the session's end. A complete
  trial ends with status success and the value the study was told; a pruned one with
  status unknown (TensorBoard has no "pruned") and the last value it reported before
  it was pruned; a failed one with status failure and no value.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..event_file import (
    event,
    field_bytes,
    field_double,
    field_text,
    field_varint,
    plugin_value,
    scalar_value,
    write_events,
)
from ..run_folder import TENSORBOARD_DIR
from .space import Axis, Choices, SearchSpace

PLUGIN_NAME = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_TAG = "_hparams_/session_start_info"
SESSION_END_TAG = "_hparams_/session_end_info"
SUFFIX = "distloop-study"
"""The end of the event files written here (the engine's end in ``distloop``)."""
STRING, BOOL, FLOAT64 = 1, 2, 3  # api.proto's DataType
TRAINING, VALIDATION = 1, 2  # DatasetType
STATUS = {"complete": 1, "failed": 2, "pruned": 0}  # SUCCESS, FAILURE, UNKNOWN


def metric_tag(objective: str) -> str:
    return f"study/{objective}"


def write_experiment(folder: Path, space: SearchSpace, objective: str, name: str) -> None:
    """The study's experiment summary, unless the folder has it already (a resumed study)."""
    if any(folder.glob(f"events.out.tfevents.*.{SUFFIX}")):
        return
    infos = b"".join(field_bytes(4, _hparam_info(path, axis)) for path, axis in space.axes.items())
    metric = (
        field_bytes(1, field_text(2, metric_tag(objective)))
        + field_text(3, objective)
        + field_text(4, "the study's objective")
        + field_varint(5, VALIDATION if objective.startswith("val_") else TRAINING)
    )
    experiment = field_text(6, name) + field_double(3, time.time()) + infos + field_bytes(5, metric)
    content = field_bytes(2, experiment)
    write_events(folder, [event(time.time(), 0, [_plugin(EXPERIMENT_TAG, content)])], SUFFIX)


def write_trial(
    run_dir: Path,
    space: SearchSpace,
    params: dict[str, Any],
    objective: str,
    *,
    state: str,
    value: float | None,
    step: int,
    started: float,
) -> None:
    """A trial's session: its values, its objective (when it has one) and how it ended."""
    entries = b"".join(
        field_bytes(1, field_text(1, path) + field_bytes(2, _value(space.axes[path], v)))
        for path, v in params.items()
    )
    start = field_bytes(3, entries + field_double(5, started))
    end = field_bytes(4, field_varint(1, STATUS[state]) + field_double(2, time.time()))
    events = [event(started, 0, [_plugin(SESSION_START_TAG, start)])]
    if value is not None:
        events.append(event(time.time(), step, [scalar_value(metric_tag(objective), value)]))
    events.append(event(time.time(), step, [_plugin(SESSION_END_TAG, end)]))
    write_events(run_dir / TENSORBOARD_DIR, events, SUFFIX)


def _plugin(tag: str, content: bytes) -> bytes:
    return plugin_value(tag, PLUGIN_NAME, content)  # version 0: the field left out


def _hparam_info(path: str, axis: Axis) -> bytes:
    info = field_text(1, path) + field_varint(4, _kind(axis))
    if isinstance(axis, Choices):
        values = b"".join(field_bytes(1, _value(axis, v)) for v in axis.values)
        return info + field_bytes(5, values)
    return info + field_bytes(6, field_double(1, axis.low) + field_double(2, axis.high))


def _kind(axis: Axis) -> int:
    """How TensorBoard shows the axis: numbers, true/false, or text (anything mixed)."""
    if not isinstance(axis, Choices):
        return FLOAT64
    if all(isinstance(v, bool) for v in axis.values):
        return BOOL
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in axis.values):
        return FLOAT64
    return STRING


def _value(axis: Axis, value: Any) -> bytes:
    """A ``google.protobuf.Value`` of the axis's kind."""
    kind = _kind(axis)
    if kind == FLOAT64:
        return field_double(2, float(value))
    if kind == BOOL:
        return field_varint(4, int(value))
    return field_text(3, value if isinstance(value, str) else json.dumps(value))
