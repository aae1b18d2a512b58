"""Past runs read for the plot off the window's thread, one request at a time, with progress.

The reading is :mod:`gui.runs.drawn_run_worker`'s, in a process of its own; a
:class:`gui.common.background.Background` thread waits on that process and hands its
progress and its answer to the window's thread. Asking for something else (or for
nothing: a live run takes the plot) ends the process reading the earlier one at once.
The runs panel keeps one for the run drawn as the plot's own and one for the compared runs.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..common.background import Background, Progress, WhenBusy
from . import drawn_run_worker
from .drawn_run_worker import ComparedRuns, DrawnRunRequest

Request = DrawnRunRequest | ComparedRuns

POLL_S = 0.1
"""How often the waiting thread reports the bytes read (and so learns of a cancel)."""


class RunDrawing(QObject):
    """Reads what was asked last; ``read`` hands out what it read, ``failed`` why not."""

    read = Signal(object, object)  # the request, what its ``read`` returned
    failed = Signal(object, str)  # the request, one line
    progress = Signal(object, int, int)  # the request, bytes read, bytes in all

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._background = Background(self, WhenBusy.REPLACE)
        self._background.done.connect(self._hand_out)
        self._background.failed.connect(self._hand_out_failure)
        self._background.progress.connect(
            lambda request, done, total, _what: self.progress.emit(request, done, total)
        )
        self._wanted: Request | None = None

    @property
    def reading(self) -> Request | None:
        """What is being read for the plot, None when nothing is."""
        return self._wanted

    def ask(self, request: Request) -> None:
        """Reads what ``request`` asks, ending the reading of anything else."""
        if self._wanted == request:
            return  # being read already (a second double-click)
        self._wanted = request
        self._background.start(
            lambda progress: _read_in_process(request, progress), known=(OSError,), key=request
        )

    def cancel(self) -> None:
        """Reads nothing more: the plot shows something else now."""
        self._wanted = None
        self._background.cancel()

    def _hand_out(self, request: Request, result: object) -> None:
        self._wanted = None
        self.read.emit(request, result)

    def _hand_out_failure(self, request: Request, why: str) -> None:
        self._wanted = None
        self.failed.emit(request, why)


def _read_in_process(request: Request, progress: Progress) -> object:
    """Runs the reading process and waits for its answer (in the background thread); ends
    it when the reading is cancelled (``progress`` raises Cancelled)."""
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
