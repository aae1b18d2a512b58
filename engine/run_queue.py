"""A queue of projects run one after another: which runs next, and how the current one ended.

No Qt and no engine here: the window's :class:`~distloop.gui.queue.run_queue.RunQueue` starts
each item through its own Run path and tells this queue when the run began and ended,
so the rules can be read (and tested) apart from the signals that drive them.

What ends a queue: Stop (which stops the current run and the rest with it), the user
declining to run an item (custom code not trusted, no run folder), or the last item.
A run that fails does not: runs over several learning rates expect some to diverge, so
the failure is recorded in its item and the next one starts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from .config import Project
from .run_events import RunOutcome
from .run_history import RunSummary


class ItemState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"


ENDED = (ItemState.FINISHED, ItemState.FAILED, ItemState.STOPPED)


@dataclass
class QueueItem:
    """One project waiting, running or done; ``summary`` is read from its folder at the end
    (first without reading a file whole, then again once its files were scanned)."""

    number: int
    project: Project
    state: ItemState = ItemState.QUEUED
    run_dir: Path | None = None
    summary: RunSummary | None = None
    error: str | None = None


def best_val_loss(item: QueueItem) -> float | None:
    """The lowest ``val_loss`` the item's run evaluated, if it evaluated."""
    validation = item.summary.best_validation if item.summary else None
    return validation.get("val_loss") if validation else None


def ended_state(outcome: RunOutcome | None, stopped_by_user: bool) -> tuple[ItemState, str | None]:
    """How a run ended, and the error to show for a failure.

    A run without an outcome (its engine could not start, or died without a word) failed.
    """
    if outcome is not None and outcome.status == "finished":
        return ItemState.FINISHED, None
    if stopped_by_user or (outcome is not None and outcome.status == "stopped"):
        return ItemState.STOPPED, None
    if outcome is not None and outcome.failure is not None:
        failure = outcome.failure
        return ItemState.FAILED, f"{failure.error_type}: {failure.message}"
    return ItemState.FAILED, "the run ended without reporting how"


class QueueOrder:
    """The queued items in order, the one running now, and whether the queue goes on."""

    def __init__(self) -> None:
        self._items: list[QueueItem] = []
        self._numbers = 0
        self.running = False
        """True from Start until the queue is stopped or empty."""
        self.current: QueueItem | None = None
        """The item whose run is going on now; None between runs and for the window's own."""

    @property
    def items(self) -> list[QueueItem]:
        return list(self._items)

    def queued(self) -> list[QueueItem]:
        return [item for item in self._items if item.state is ItemState.QUEUED]

    def add(self, projects: list[Project]) -> None:
        for project in projects:
            self._numbers += 1
            self._items.append(QueueItem(self._numbers, project))

    def remove(self, items: list[QueueItem]) -> None:
        """Removes the given items unless running: a run is stopped, not removed."""
        self._items = [item for item in self._items if item not in items or item is self.current]

    def clear_ended(self) -> None:
        self._items = [item for item in self._items if item.state not in ENDED]

    def start(self) -> None:
        """The queue runs from now on, if anything waits."""
        self.running = bool(self.queued())

    def stop(self) -> None:
        """The queue runs no further item; the current run is its caller's to stop."""
        self.running = False

    def begin_next(self) -> QueueItem | None:
        """The next queued item, now running; None (and the queue stopped) when none is left."""
        waiting = self.queued()
        if not waiting:
            self.running = False
            return None
        item = waiting[0]
        item.state = ItemState.RUNNING
        self.current = item
        return item

    def decline_current(self) -> None:
        """The current item did not start (the user declined): it waits again, the queue stops."""
        if self.current is not None:
            self.current.state = ItemState.QUEUED
            self.current = None
        self.running = False

    def end_current(self, outcome: RunOutcome | None, stopped_by_user: bool) -> QueueItem | None:
        """Records how the current run ended; the item, or None when none was running.

        A stop by the user stops the queue too; any other end lets the next item start.
        """
        item = self.current
        if item is None:
            return None
        self.current = None
        item.state, item.error = ended_state(outcome, stopped_by_user)
        if stopped_by_user:
            self.running = False
        return item

    def item_of(self, run_dir: Path) -> QueueItem | None:
        """The item whose run wrote ``run_dir``."""
        return next((item for item in self._items if item.run_dir == run_dir), None)
