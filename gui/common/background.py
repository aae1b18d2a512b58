"""Work off the window's thread, the window's one idiom for it (as Orange3's ``concurrent``).

Reading a long run, listing studies, asking hosts over ssh: seconds to minutes during
which the window must keep painting and answering. A :class:`Background` runs each piece
of work in a daemon thread and hands its answer to the window's thread as Qt signals
(queued there because the object lives there), with the work's *key* so that the owner
knows what was answered. What happens when work is asked for while some runs is the
owner's choice (:class:`WhenBusy`): refused, replacing it (the latest request wins, and
the running one is cancelled), or queued once per key.

Cancellation is cooperative: the work's ``progress`` callback raises :class:`Cancelled`
at its next report once the work is cancelled, and a cancelled work's answer is never
handed out. Work counts as running until its answer is handed out on the window's
thread, not until its thread ends: a handler that starts the next piece of work, or
enables the actions that start one, must find this one over. (Judged by the thread, a
busy machine let the thread outlive the handler's call, Run on Hosts stayed greyed out
as "a check is running" after the check, and nothing enabled it again.)
"""

from __future__ import annotations

import collections
import contextlib
import enum
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

Progress = Callable[[int, int, str], None]
"""``progress(done, in_all, what)``: reports how far the work is; raises Cancelled once
the work is cancelled."""
Work = Callable[[Progress], Any]


class Cancelled(Exception):
    """The work was cancelled: its answer is not wanted any more."""


class WhenBusy(enum.Enum):
    """What :meth:`Background.start` does while other work runs."""

    REFUSE = "refuse"  # start says False: one piece at a time (Check Cluster, a dump)
    REPLACE = "replace"  # the latest request wins; the running one is cancelled
    QUEUE = "queue"  # each waits its turn, a key at most once in the queue


@dataclass(eq=False)
class _Job:
    work: Work
    known: tuple[type[Exception], ...]
    key: Hashable
    cancel: threading.Event = field(default_factory=threading.Event)


class Background(QObject):
    """Work in a thread, one at a time: ``progress`` as it goes, then ``done`` or ``failed``."""

    progress = Signal(object, int, int, str)  # key, steps done, steps in all, what is done
    done = Signal(object, object)  # key, what the work returned
    failed = Signal(object, str)  # key, one line: why the work could not be done
    _ended = Signal(object, bool, object)  # from the work's thread: job, succeeded, answer

    def __init__(
        self,
        parent: QObject | None = None,
        when_busy: WhenBusy = WhenBusy.REFUSE,
        name: str = "distloop-background",
    ) -> None:
        """``name`` names the work's threads (in a stack dump, a profile)."""
        super().__init__(parent)
        self._when_busy = when_busy
        self._name = name
        self._running: _Job | None = None
        self._waiting: collections.OrderedDict[Hashable, _Job] = collections.OrderedDict()
        self._ended.connect(self._hand_out)

    @property
    def running(self) -> bool:
        """Work runs or waits, or its answer is not handed out yet."""
        return self._running is not None or bool(self._waiting)

    def start(
        self, work: Work, known: tuple[type[Exception], ...] = (), key: Hashable = None
    ) -> bool:
        """Runs ``work(progress)`` in a thread, or as :class:`WhenBusy` says while other
        work runs; False when refused. An exception of a ``known`` type says its own
        line; any other is named too."""
        job = _Job(work, known, key)
        if self._running is None:
            self._launch(job)
            return True
        if self._when_busy is WhenBusy.REFUSE:
            return False
        if self._when_busy is WhenBusy.REPLACE:
            self._running.cancel.set()
            self._waiting.clear()
        if key not in self._waiting:
            self._waiting[key] = job
        return True

    def cancel(self) -> None:
        """Nothing asked so far is answered: the waiting work is dropped and the running
        work is told to stop at its next progress report."""
        self._waiting.clear()
        if self._running is not None:
            self._running.cancel.set()

    def _launch(self, job: _Job) -> None:
        self._running = job

        def report(done: int, in_all: int, what: str) -> None:
            if job.cancel.is_set():
                raise Cancelled
            self.progress.emit(job.key, done, in_all, what)

        def run() -> None:
            try:
                answer: object = job.work(report)
                succeeded = True
            except Cancelled:
                answer, succeeded = None, False
            except job.known as exc:
                answer, succeeded = str(exc), False
            except Exception as exc:  # a bug or a broken system: one line, never a crash
                answer, succeeded = f"{type(exc).__name__}: {exc}", False
            with contextlib.suppress(RuntimeError):  # the window is gone: nobody to tell
                self._ended.emit(job, succeeded, answer)

        threading.Thread(target=run, name=self._name, daemon=True).start()

    @Slot(object, bool, object)
    def _hand_out(self, job: _Job, succeeded: bool, answer: object) -> None:
        self._running = None
        if self._waiting:
            self._launch(self._waiting.popitem(last=False)[1])
        if job.cancel.is_set():
            return
        if succeeded:
            self.done.emit(job.key, answer)
        else:
            self.failed.emit(job.key, str(answer))
