"""Whether the training data is ordered by label beyond what its shuffle buffer mixes.

A CSV, ``.npz`` or TFRecord file keeps its examples in the user's order, and a shuffle
buffer of B examples only mixes examples B apart: a file sorted by class trains on
batches of one class at a time, and the model ends up predicting the last class it saw,
while the loss looks fine. The check reads the labels of the file's first examples (a
bounded read however big the file: :data:`SAMPLE_BYTES`) and finds its longest run of
one label; it warns when that run is far longer than chance gives and the buffer cannot
hold it. TensorFlow-free: ``distloop validate`` and the engine's log say it before a
step runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..config import Project
from . import source_of

SAMPLE_EXAMPLES = 100_000
"""Labels read at least (when the file has them): enough to see the runs of a sorted file."""
MAX_SAMPLE_EXAMPLES = 1_000_000
"""Labels read at most, for the biggest shuffle buffers."""
SAMPLE_BYTES = 16 << 20
"""Bytes of the file read at most, whatever its examples' width: a few tenths of a second
at a run's start (800 rows of 2,048 features; a sorted file's first class is longer)."""
CHANCE_FACTOR = 8
"""How many times longer than chance's longest run a run must be to mean an ordered file."""


@dataclass(frozen=True)
class LabelRun:
    """The longest run of one label among the labels read."""

    start: int
    length: int
    label: float
    share: float
    """The label's share of the labels read."""
    read: int
    """How many labels were read."""


def sample_size(shuffle_buffer: int) -> int:
    """Labels to read: twice the buffer, so a run longer than it shows, within bounds."""
    return min(max(SAMPLE_EXAMPLES, 2 * shuffle_buffer + 1), MAX_SAMPLE_EXAMPLES)


def longest_run(labels: np.ndarray) -> LabelRun:
    """The first longest run of equal labels in ``labels`` (one label an example)."""
    changes = np.flatnonzero(labels[1:] != labels[:-1]) + 1
    starts = np.concatenate(([0], changes))
    lengths = np.diff(np.concatenate((starts, [len(labels)])))
    at = int(np.argmax(lengths))
    label = labels[starts[at]]
    share = float(np.mean(labels == label))
    return LabelRun(int(starts[at]), int(lengths[at]), float(label), share, len(labels))


def chance_run(count: int, share: float) -> float:
    """About the longest run of a label of ``share`` (below 1) among ``count`` shuffled
    labels."""
    misses = count * (1 - share)
    return max(1.0, math.log(max(misses, 1.0)) / -math.log(share))


def label_order_notes(project: Project) -> list[str]:
    """The warning for training data ordered by label beyond its shuffle buffer, or []."""
    data = project.data
    if not project.loss.is_classification:
        return []  # a regression target has no runs of one class to mix
    sample = source_of(data).label_sample(data, sample_size(data.shuffle_buffer), SAMPLE_BYTES)
    if sample is None or len(sample.labels) < 2:
        return []
    run, buffer = longest_run(sample.labels), data.shuffle_buffer
    if run.share >= 1 and sample.whole:
        return []  # one label throughout: shuffling changes nothing
    chance = 0.0 if run.share >= 1 else chance_run(run.read, run.share)
    if run.length <= CHANCE_FACTOR * chance or 2 * run.length <= buffer:
        return []
    longer = " or more" if run.start + run.length == run.read and not sample.whole else ""
    mixes = f"mixes only {buffer} examples at a time" if buffer else "is 0 (no shuffle)"
    return [
        f"data: {data.path} is ordered by label: examples {run.start + 1}-"
        f"{run.start + run.length} all have label {run.label:g} ({run.length}{longer} in a "
        f"row), and data.shuffle_buffer {mixes}, so batches hold one label at a time and the "
        "model learns the last one it saw; set data.shuffle_buffer to the number of "
        "examples (it holds them in memory), or shuffle the file's rows once"
    ]
