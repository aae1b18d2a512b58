"""The process that scans data folders for the window (no Qt here: it is imported there).

A scan in a thread of the window's own process held the interpreter lock for most of
its half second per 100,000 files, and the event loop waited on it (timer lateness of
240-340 ms while typing). In a process of its own it costs the window nothing; what
comes back is a :class:`~engine.datasets.FolderSummary`, a few hundred bytes.

The window and this process share three numbers: the generation of scans the window
still wants (a scan of an older one stops at its next folder), the job running now and
the files it has found so far (the window shows the count).
"""

from __future__ import annotations

import os
import signal
from multiprocessing.connection import Connection
from typing import Any

from ..engine.datasets import IMAGE_EXTENSIONS, FolderError, FolderSummary, summarize_folder

Stamps = tuple[tuple[str, int], ...]
"""Every folder a scan listed, the root first, with its st_mtime_ns then (-1: unreadable)."""
Outcome = tuple[FolderSummary | FolderError, Stamps]


class Cancelled(Exception):
    """The window no longer wants the scan: raised at the next folder it lists."""


def serve(jobs: Connection, generation: Any, running: Any, count: Any) -> None:
    """Answers ``(job, generation, path, extensions, stamps)`` requests until None comes.

    ``stamps`` None asks for a scan; else the folders of a kept scan, to scan again only
    if one of them changed (the answer is None when none did, or when cancelled).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the window's to handle
    while (request := jobs.recv()) is not None:
        job, wanted, path, extensions, stamps = request
        outcome = None
        if generation.value == wanted and (stamps is None or changed(stamps)):
            running.value, count.value = job, 0
            try:
                outcome = scan(path, extensions, generation, wanted, count)
            except Cancelled:
                outcome = None
        jobs.send((job, outcome))


def scan(
    path: str, extensions: tuple[str, ...], generation: Any, wanted: int, count: Any
) -> Outcome:
    """The folder's summary (or why it is none) and the folders it listed, stamped; an
    image folder's summary names its unreadable images too (each file's ends are read:
    a second or so per 100,000 files, here rather than at Run)."""
    folders = [stamped(os.path.expanduser(path))]

    def on_folder(folder: str, found: int) -> None:
        if generation.value != wanted:
            raise Cancelled
        folders.append(stamped(folder))
        count.value = found

    try:
        result: FolderSummary | FolderError = summarize_folder(
            path, extensions, on_folder, check_images=extensions == IMAGE_EXTENSIONS
        )
    except FolderError as exc:
        result = exc
    return result, tuple(folders)


def stamped(folder: str) -> tuple[str, int]:
    try:
        return folder, os.stat(folder).st_mtime_ns
    except OSError:
        return folder, -1


def changed(stamps: Stamps) -> bool:
    """Whether a folder a kept scan listed was changed since (a file or class added or
    removed changes its folder's modification time)."""
    return any(stamped(folder) != (folder, stamp) for folder, stamp in stamps)
