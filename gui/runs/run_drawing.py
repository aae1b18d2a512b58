"""A past run read for the plot off the window's thread, one at a time, with its progress.

The reading is :mod:`gui.runs.drawn_run_worker`'s, in a process of its own; a
:class:`gui.run.background.Background` thread waits on that process and hands its
progress and its answer to the window's thread. Asking for another run (or for none:
a live run takes the plot) ends the process reading the earlier one at once.
"""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..run.background import Background, Progress
from . import drawn_run_worker
from .drawn_run_worker import DrawnRun

POLL_S = 0.1
"""How often the waiting thread reports the bytes read and looks for a cancel."""


class Cancelled(Exception):
    """Another run was asked for, or none: this one's reading was ended."""


class RunDrawing(QObject):
    """Reads the run last asked for; ``read`` hands its curves out, ``failed`` why not."""

    read = Signal(Path, object)  # the run's folder, its DrawnRun
    failed = Signal(Path, str)  # the run's folder, one line
    progress = Signal(Path, int, int)  # the run's folder, bytes read, bytes in all

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._background = Background(self)
        self._background.done.connect(self._hand_out)
        self._background.failed.connect(self._hand_out_failure)
        self._background.progress.connect(self._report)
        self._reading: Path | None = None
        self._wanted: tuple[Path, float] | None = None
        self._cancel = threading.Event()

    @property
    def reading(self) -> Path | None:
        """The run being read for the plot, None when none is."""
        return self._wanted[0] if self._wanted else None

    def ask(self, run_dir: Path, smoothing: float) -> None:
        """Reads ``run_dir`` (smoothed with ``smoothing``), ending the reading of another."""
        if self._wanted == (run_dir, smoothing) and not self._cancel.is_set():
            return  # being read already (a second double-click)
        self._wanted = (run_dir, smoothing)
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
        run_dir, smoothing = self._wanted
        self._cancel = cancel = threading.Event()
        self._reading = run_dir
        self._background.start(
            lambda progress: _read_in_process(run_dir, smoothing, progress, cancel),
            known=(OSError, Cancelled),
        )

    def _report(self, done: int, total: int, _: str) -> None:
        if self._reading is not None and self._reading == self.reading:
            self.progress.emit(self._reading, done, total)

    def _hand_out(self, result: object) -> None:
        self._ended(result if isinstance(result, DrawnRun) else None, "")

    def _hand_out_failure(self, why: str) -> None:
        self._ended(None, why)

    def _ended(self, drawn: DrawnRun | None, why: str) -> None:
        finished, self._reading = self._reading, None
        if self._wanted is None or finished is None:
            return
        if self._cancel.is_set() or self._wanted[0] != finished:
            self._start()  # another run was asked for while this one was read
            return
        self._wanted = None
        if drawn is not None:
            self.read.emit(finished, drawn)
        else:
            self.failed.emit(finished, why)


def _read_in_process(
    run_dir: Path, smoothing: float, progress: Progress, cancel: threading.Event
) -> DrawnRun:
    """Runs the reading process and waits for its answer (in the background thread)."""
    context = multiprocessing.get_context("spawn")  # a fork would copy Qt's threads
    done, total = context.RawValue("q", 0), context.RawValue("q", 0)
    answers, child = context.Pipe(duplex=False)
    process = context.Process(
        target=drawn_run_worker.serve,
        args=(child, str(run_dir), smoothing, done, total),
        name="distloop-draw-run",
        daemon=True,
    )
    process.start()
    child.close()
    try:
        while not answers.poll(POLL_S):
            if cancel.is_set():
                raise Cancelled(f"{run_dir.name}: another run was asked for")
            if not process.is_alive() and not answers.poll(0):
                raise OSError(f"reading {run_dir.name} ended without an answer")
            progress(done.value, total.value, "")
        succeeded, said = answers.recv()
    except EOFError:
        raise OSError(f"reading {run_dir.name} ended without an answer") from None
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        answers.close()
    if not succeeded:
        raise OSError(said)
    return said
