"""What the engine is doing when it is not stepping, told as it happens (TF-free).

A run spends seconds to minutes outside its steps: loading TensorFlow, checking every
file of a data folder, building the model, tracing the step, its first step, each
evaluation, saving the model and writing checkpoints. Without a word a working run
looked hung (62 s to the first step on a 100,000-image folder, 22 s after the last).
Each such part is a phase: its start goes to the parent as a :class:`~engine.messages.Phase`
(its progress too, where it can be counted), and its end writes how long it took to the
log. An engine process runs one run, so the process has one :class:`Phases`, which the
code deep in the data pipeline reaches through :func:`progress` without a channel in
every signature.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .formatting import format_duration
from .messages import Phase

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .channel import Channel

PROGRESS_INTERVAL_S = 0.25
"""Progress is sent at most this often: a count per file would flood the queue."""
LOGGED_AT_INFO_S = 0.5
"""Shorter phases (most checkpoints) log their duration at debug level only."""


class Phases:
    """The run's phases: one at a time, each ended by the next or by :meth:`end`."""

    def __init__(self, channel: Channel, clock: Callable[[], float] = time.monotonic) -> None:
        self._channel = channel
        self._clock = clock
        self._current: Phase | None = None
        self._began = 0.0
        self._sent = 0.0

    def begin(self, name: str, total: int | None = None) -> None:
        """``name`` starts now (``checking 100,000 images``); the phase before it ends."""
        self.end()
        self._current = Phase(name=name, done=0 if total else None, total=total)
        self._began = self._sent = self._clock()
        self._channel.send(self._current)

    def progress(self, done: int, total: int | None = None) -> None:
        """The current phase got ``done`` of ``total`` (its own total when None) done."""
        current = self._current
        now = self._clock()
        if current is None or now - self._sent < PROGRESS_INTERVAL_S:
            return
        self._sent = now
        self._channel.send(
            current.model_copy(update={"done": done, "total": total or current.total})
        )

    def end(self) -> None:
        """The current phase is over: the log says how long it took."""
        if self._current is None:
            return
        took = self._clock() - self._began
        level = "info" if took >= LOGGED_AT_INFO_S else "debug"
        self._channel.log(f"{self._current.name}: {format_duration(took)}", level=level)
        self._current = None

    @contextmanager
    def phase(self, name: str, total: int | None = None) -> Iterator[None]:
        """``name`` for the time of the ``with`` block."""
        self.begin(name, total)
        try:
            yield
        finally:
            self.end()


_process_phases: Phases | None = None


def use(phases: Phases | None) -> None:
    """The process's phases from now on (None: none told, as in tests and scripts)."""
    global _process_phases
    _process_phases = phases


def begin(name: str, total: int | None = None) -> None:
    """Starts a phase of the process's run, when it has one."""
    if _process_phases is not None:
        _process_phases.begin(name, total)


def progress(done: int, total: int | None = None) -> None:
    """Tells the current phase's progress, when the process's run has one."""
    if _process_phases is not None:
        _process_phases.progress(done, total)


def end() -> None:
    if _process_phases is not None:
        _process_phases.end()


@contextmanager
def phase(name: str, total: int | None = None) -> Iterator[None]:
    """A phase of the process's run for the ``with`` block (nothing without one)."""
    if _process_phases is None:
        yield
        return
    with _process_phases.phase(name, total):
        yield
