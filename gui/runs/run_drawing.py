"""Past runs read for the plot off the window's thread, one request at a time, with progress.

The reading is :mod:`gui.runs.drawn_run_worker`'s, in a process of its own; a
:class:`gui.run.background.Background` thread waits on that process and hands its
progress and its answer to the window's thread. Asking for something else (or for
nothing: a live run takes the plot) ends the process reading the earlier one at once.
The runs panel keeps one for the run drawn as the plot's own and one for the compared runs.
"""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..run.background import Background, Progress
from . import drawn_run_worker
from .drawn_run_worker import ComparedRuns, DrawnRunRequest

Request = DrawnRunRequest | ComparedRuns

POLL_S = 0.1
"""How often the waiting thread reports the bytes read and looks for a cancel."""


class Cancelled(Exception):
    """Something else was asked for, or nothing: this reading was ended."""


class RunDrawing(QObject):
    """Reads what was asked last; ``read`` hands out what it read, ``failed`` why not."""

    read = Signal(object, object)  # the request, what its ``read`` returned
    failed = Signal(object, str)  # the request, one line
    progress = Signal(object, int, int)  # the request, bytes read, bytes in all

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._background = Background(self)
        self._background.done.connect(self._hand_out)
        self._background.failed.connect(self._hand_out_failure)
        self._background.progress.connect(self._report)
        self._reading: Request | None = None
        self._wanted: Request | None = None
        self._cancel = threading.Event()

    @property
    def reading(self) -> Request | None:
        """What is being read for the plot, None when nothing is."""
        return self._wanted

    def ask(self, request: Request) -> None:
        """Reads what ``request`` asks, ending the reading of anything else."""
        if self._wanted == request and not self._cancel.is_set():
            return  # being read already (a second double-click)
        self._wanted = request
        if self._background.running:
            self._cancel.set()  # its end starts this one
        else:
            self._start()

    def cancel(self) -> None:
        """Reads nothing more: the plot shows something else now."""
        self._wanted = None
        if self._background.running:
            self._cancel.set()

    def _start(self) -> None:
        assert self._wanted is not None
        request = self._wanted
        self._cancel = cancel = threading.Event()
        self._reading = request
        self._background.start(
            lambda progress: _read_in_process(request, progress, cancel),
            known=(OSError, Cancelled),
        )

    def _report(self, done: int, total: int, _: str) -> None:
        if self._reading is not None and self._reading == self.reading:
            self.progress.emit(self._reading, done, total)

    def _hand_out(self, result: object) -> None:
        self._ended(result, None)

    def _hand_out_failure(self, why: str) -> None:
        self._ended(None, why)

    def _ended(self, result: object, why: str | None) -> None:
        finished, self._reading = self._reading, None
        if self._wanted is None or finished is None:
            return
        if self._cancel.is_set() or self._wanted != finished:
            self._start()  # something else was asked for while this was read
            return
        self._wanted = None
        if why is None:
            self.read.emit(finished, result)
        else:
            self.failed.emit(finished, why)


def _read_in_process(request: Request, progress: Progress, cancel: threading.Event) -> object:
    """Runs the reading process and waits for its answer (in the background thread)."""
    what = ", ".join(path.name for path in _folders(request))
    context = multiprocessing.get_context("spawn")  # a fork would copy Qt's threads
    done, total = context.RawValue("q", 0), context.RawValue("q", 0)
    answers, child = context.Pipe(duplex=False)
    process = context.Process(
        target=drawn_run_worker.serve,
        args=(child, request, done, total),
        name="distloop-draw-run",
        daemon=True,
    )
    process.start()
    child.close()
    try:
        while not answers.poll(POLL_S):
            if cancel.is_set():
                raise Cancelled(f"{what}: something else was asked for")
            if not process.is_alive() and not answers.poll(0):
                raise OSError(f"reading {what} ended without an answer")
            progress(done.value, total.value, "")
        succeeded, said = answers.recv()
    except EOFError:
        raise OSError(f"reading {what} ended without an answer") from None
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        answers.close()
    if not succeeded:
        raise OSError(said)
    return said


def _folders(request: Request) -> tuple[Path, ...]:
    return request.runs if isinstance(request, ComparedRuns) else (request.run_dir,)
