"""Data folders scanned in another process, once per folder while it is unchanged.

Listing an image folder of 100,000 files takes about half a second, and the window
validates the project on every edit: scanning the folder on each keystroke froze the
window for seconds (minutes for a path typed letter by letter, each prefix a folder to
walk). Here a scan runs in a worker process (:mod:`gui.files.folder_scan_worker`), starts only
once edits pause (:data:`PAUSE_MS`), stops as soon as the forms name another folder
(Browse to ``/`` starts listing a whole disk), and its count of files found is shown.
Its summary is kept by folder with the modification time of every folder it listed, so
edits to other fields re-use it, and a check in the worker (a ``stat`` per folder)
notices files added or removed since.

Summaries land in the cache only; validation reads the cache for the paths the forms
show now, so a scan of an older path can never mark a newer one.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import count
from multiprocessing.connection import Connection
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from ...engine.config import Project
from ...engine.data_sources import source_of
from ...engine.data_sources.folders import FolderError, FolderSummary
from . import folder_scan_worker
from .folder_scan_worker import Outcome, Shared, Stamps

PAUSE_MS = 300
"""How long edits must pause before a folder is scanned: typing a path scans its end only."""
PROGRESS_MS = 100
"""How often the count of a running scan is shown."""
KEPT_SCANS = 8
"""Folders whose scans are kept: the project's few, and a few the user went back from."""

Key = tuple[str, tuple[str, ...]]
"""A folder to scan: its path as the project names it (resolved) and the extensions read."""


@dataclass(frozen=True)
class _Job:
    number: int
    key: Key


def folder_keys(project: Project) -> list[tuple[str, Key]]:
    """The folder sources of ``project`` (paths resolved), each with where it is set."""
    keys = []
    for where, data in project.data_sources():
        folders = source_of(data).class_folders
        if folders is not None:
            keys.append((where, (data.path, folders.extensions)))
    return keys


class FolderScans(QObject):
    """The kept folder summaries, and the worker process that makes them."""

    landed = Signal()
    """A new or changed folder's summary is kept: validate again."""
    progress = Signal(str)
    """What is being scanned now, e.g. ``scanning /data/pets… 12,345 files``; "" when idle."""
    previewed = Signal(str, object)
    """The folder :meth:`preview` asked for, and its FolderSummary or FolderError."""
    _answered = Signal(int, object)  # (job number, Outcome | None), from the reader thread

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._cache: OrderedDict[Key, Outcome] = OrderedDict()
        self._wanted: list[Key] = []
        self._preview: Key | None = None
        self._active: dict[int, _Job] = {}
        self._numbers = count(1)
        self._worker: _Worker | None = None
        self._pause = QTimer(self)
        self._pause.setSingleShot(True)
        self._pause.timeout.connect(self._start)
        self._ticker = QTimer(self)
        self._ticker.setInterval(PROGRESS_MS)
        self._ticker.timeout.connect(self._show_progress)
        self._answered.connect(self._on_answer)

    def cached(self, path: str, extensions: tuple[str, ...]) -> FolderSummary:
        """The kept summary of a folder that :meth:`missing` no longer lists (an
        :data:`~engine.data_sources.folders.FolderScanner`); raises the FolderError its scan
        ended in."""
        result = self._cache[(path, extensions)][0]
        if isinstance(result, FolderError):
            raise result
        return result

    def missing(self, project: Project, *, at_once: bool = False) -> list[str]:
        """The folder fields of ``project`` whose folder is not scanned yet (``data.path``).

        Asks for those scans, and for a check of the kept ones, once edits pause (now
        with ``at_once``: a project just opened); a scan of a folder the project no
        longer names stops now.
        """
        keys = folder_keys(project)
        self._wanted = [key for _, key in keys]
        if any(job.key not in self._keys() for job in self._active.values()):
            self._cancel()
        if self._keys():
            self._pause.start(0 if at_once else PAUSE_MS)
        return [f"{where}.path" for where, key in keys if key not in self._cache]

    def preview(self, path: str, extensions: tuple[str, ...]) -> None:
        """Summarizes a folder for the preview in the scanning process: ``previewed`` comes
        once a kept summary is checked (a stat per folder) or a new one is made;
        :meth:`stop_preview` stops it."""
        self._preview = (path, extensions)
        self._pause.start(0)

    def stop_preview(self) -> None:
        """The preview is not wanted any more (the path it shows was changed)."""
        if self._preview is None:
            return
        self._preview = None
        if any(job.key not in self._wanted for job in self._active.values()):
            self._cancel()
            self._pause.start(0)  # the scans validation still wants start again

    def _keys(self) -> list[Key]:
        """Every folder wanted: the project's, and the previewed one."""
        extra = [self._preview] if self._preview and self._preview not in self._wanted else []
        return [*self._wanted, *extra]

    def scanning(self) -> bool:
        """Whether a scan or a check is under way or waits for edits to pause."""
        return bool(self._active) or self._pause.isActive()

    def close(self) -> None:
        """Ends the worker process (a scan under way stops at its next folder); a later
        scan starts another."""
        self._pause.stop()
        self._cancel()
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def _cancel(self) -> None:
        """Every scan under way stops; :meth:`_start` asks again for those still wanted."""
        if self._worker is not None:
            self._worker.cancel()
        self._active.clear()
        self._ticker.stop()
        self.progress.emit("")

    def _start(self) -> None:
        asked = {job.key for job in self._active.values()}
        for key in self._keys():
            if key in asked:
                continue
            if self._worker is None:
                self._worker = _Worker(self._answered.emit)
            job = _Job(next(self._numbers), key)
            self._active[job.number] = job
            kept = self._cache.get(key)
            self._worker.ask(job, kept[1] if kept else None)
            if kept is None:
                self.progress.emit(f"scanning {key[0]}…")
        if self._active:
            self._ticker.start()

    def _show_progress(self) -> None:
        worker = self._worker
        job = self._active.get(worker.running()) if worker is not None else None
        if worker is not None and job is not None:
            self.progress.emit(worker.progress(job.key[0]))

    def _on_answer(self, number: int, outcome: Outcome | None) -> None:
        job = self._active.pop(number, None)
        if not self._active:
            self._ticker.stop()
            self.progress.emit("")
        if job is not None and job.key == self._preview:
            kept = outcome or self._cache.get(job.key)  # scanned, or checked and unchanged
            if kept is not None:
                self._preview = None
                self.previewed.emit(job.key[0], kept[0])
        if job is None or outcome is None:  # cancelled, or checked and unchanged
            return
        self._cache[job.key] = outcome
        self._cache.move_to_end(job.key)
        while len(self._cache) > KEPT_SCANS:
            self._cache.popitem(last=False)
        self.landed.emit()


class _Worker:
    """The scanning process, the pipe to it and the thread that reads its answers."""

    def __init__(self, answer: Any) -> None:
        context = multiprocessing.get_context("spawn")  # a fork would copy Qt's threads
        self._shared = Shared(*(context.RawValue("q", 0) for _ in range(4)))
        self._jobs, child = context.Pipe()
        self._process = context.Process(
            target=folder_scan_worker.serve,
            args=(child, self._shared),
            name="distloop-folder-scans",
            daemon=True,  # ended with the window's process, even in the middle of a scan
        )
        self._process.start()
        child.close()
        threading.Thread(
            target=_read_answers,
            args=(self._jobs, answer),
            name="distloop-folder-answers",
            daemon=True,
        ).start()

    def ask(self, job: _Job, stamps: Stamps | None) -> None:
        path, extensions = job.key
        self._jobs.send((job.number, self._shared.generation.value, path, extensions, stamps))

    def cancel(self) -> None:
        self._shared.generation.value += 1

    def running(self) -> int:
        return self._shared.running.value

    def progress(self, path: str) -> str:
        """How far the running job is, e.g. ``scanning /data… 12,345 files``."""
        done, checking = self._shared.count.value, self._shared.checking.value
        if checking:
            return f"checking the images in {path}… {done:,} of {checking:,}"
        return f"scanning {path}… {done:,} files"

    def close(self) -> None:
        """Asks the process to end; the reader thread closes the pipe once it has."""
        self.cancel()
        with contextlib.suppress(OSError):  # the process is gone already
            self._jobs.send(None)


def _read_answers(jobs: Connection, answer: Any) -> None:
    """Hands each answer to the window's thread (``answer`` is a queued signal's emit)."""
    while True:
        try:
            number, outcome = jobs.recv()
        except (EOFError, OSError):  # the process ended: the window is done with scans
            jobs.close()
            return
        try:
            answer(number, outcome)
        except RuntimeError:  # the window was deleted
            return
