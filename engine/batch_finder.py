"""The batch-size search's rules (TensorFlow-free): which global batch to try next, and
what the trials say.

The search doubles the global batch from where it starts until a size does not fit
(its engine ran out of memory, the memory estimate refuses it, or the data is smaller
than one batch), then halves the gap between the largest size that fit and the
smallest that did not, in steps of whole replicas (every replica takes an equal share
of each batch), to within a quarter of the largest size that fit. Each trial's
throughput is reported, so the fastest size can be picked, not only the largest: a
batch past the memory bandwidth's sweet spot often trains fewer examples a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .config import Project
from .data_sources.base import DataError
from .project_file import load_project_data

PRECISION = 4
"""The search ends once the largest size that fit is within a PRECISION-th of the smallest
that did not: each trial starts an engine, and the last few percent are not worth minutes."""


@dataclass(frozen=True)
class BatchTrial:
    """One global batch size tried: whether it fit, at how many examples a second."""

    batch: int
    fits: bool
    examples_per_s: float | None = None
    reason: str = ""
    """Why it did not fit: the engine's failure, or the check that refused it."""
    ran: bool = True
    """False when a check refused the size before any engine ran it."""

    def describe(self, replicas: int) -> str:
        share = f"{self.batch // replicas} per replica" if replicas > 1 else "one replica"
        if self.fits:
            speed = f"{self.examples_per_s:,.0f} examples/s" if self.examples_per_s else "ran"
            return f"global batch {self.batch} ({share}): fits, {speed}"
        how = "does not fit" if self.ran else "not tried"
        return f"global batch {self.batch} ({share}): {how}: {self.reason}"


class LargerThanData(DataError):
    """A trial's global batch holds more examples than the data: its batches would be the
    whole data, smaller than the size tried, and its throughput a fiction."""


def refuse_larger_than_data(batch: int, examples: int) -> None:
    """Raises :class:`LargerThanData` when one global batch of ``batch`` needs more than
    the ``examples`` the run trains on (known once the engine read the data)."""
    if batch > examples:
        raise LargerThanData(
            f"the data has {examples:,} training examples, fewer than one global batch of {batch:,}"
        )


def trial_project(project: Project, batch: int, steps: int) -> Project:
    """``project`` at global batch ``batch`` for ``steps`` steps, without evaluation or
    saved models, validated again (raises ProblemsError: a batch larger than the data, or
    not divisible by the replicas, is refused as the project's own check refuses it)."""
    data = project.model_dump(mode="json")
    data["data"]["global_batch_size"] = batch
    data["training"].update(
        steps=steps, epochs=None, checkpoint_every=None, export_saved_model=False
    )
    data["evaluation"] = None
    return load_project_data(data, f"global batch {batch}")


def next_batch(trials: Mapping[int, BatchTrial], replicas: int, largest: int | None) -> int | None:
    """The next global batch to try; None when the search is over.

    Doubling while every size fit (up to ``largest``), then the midpoint, rounded down
    to whole replicas, between the largest size that fit and the smallest that did not,
    until they are within a PRECISION-th of each other.
    """
    fitting = [batch for batch, trial in trials.items() if trial.fits]
    failing = [batch for batch, trial in trials.items() if not trial.fits]
    if not fitting:
        return None
    good = max(fitting)
    if not failing:
        if largest is not None and good >= largest:
            return None
        doubled = good * 2
        return doubled if largest is None else min(doubled, largest)
    bad = min(failing)
    if bad - good <= good // PRECISION:
        return None
    middle = (good + bad) // 2 // replicas * replicas
    return middle if good < middle < bad else None


def throughput(metrics: Mapping[str, list[float]], batch: int) -> float | None:
    """Examples a second over the steps after the first (which traces the step)."""
    elapsed = metrics.get("elapsed_s", [])
    if len(elapsed) < 2 or elapsed[-1] <= elapsed[0]:
        return None
    return (len(elapsed) - 1) * batch / (elapsed[-1] - elapsed[0])


def largest_fitting(trials: Mapping[int, BatchTrial], replicas: int) -> str:
    """The search's answer in one line: the largest size that fit, and the fastest."""
    fitting = sorted((trial for trial in trials.values() if trial.fits), key=lambda t: t.batch)
    largest = fitting[-1]
    share = f" ({largest.batch // replicas} per replica on {replicas} replicas)"
    line = f"largest global batch that fits: {largest.batch}" + (share if replicas > 1 else "")
    timed = [trial for trial in fitting if trial.examples_per_s]
    if timed:
        fastest = max(timed, key=lambda trial: trial.examples_per_s or 0.0)
        line += f"; fastest: {fastest.batch} at {fastest.examples_per_s:,.0f} examples/s"
    return line
