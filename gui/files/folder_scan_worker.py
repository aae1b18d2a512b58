"""The process that scans data folders for the window (no Qt here: it is imported there).

A scan in a thread of the window's own process held the interpreter lock for most of
its half second per 100,000 files, and the event loop waited on it (timer lateness of
240-340 ms while typing). In a process of its own it costs the window nothing; what
comes back is a :class:`~engine.data_sources.folders.FolderSummary`, a few hundred bytes.

The window and this process share a few numbers (:class:`Shared`): the generation of
scans the window still wants (a scan of an older one stops at its next folder), the job
running now and how far it is (the window shows the count).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

from ...engine.data_sources.folders import (
    IMAGE_EXTENSIONS,
    FolderError,
    FolderSummary,
    image_file_problem,
    scan_folder,
)

Stamps = tuple[tuple[str, int], ...]
"""Every folder a scan listed, the root first, with its st_mtime_ns then (-1: unreadable)."""
Outcome = tuple[FolderSummary | FolderError, Stamps]


class Cancelled(Exception):
    """The window no longer wants the scan: raised at the next folder it lists."""


@dataclass(frozen=True)
class Shared:
    """The numbers the window and this process share (``multiprocessing`` RawValues)."""

    generation: Any
    """The scans the window still wants; a scan of an older one stops."""
    running: Any
    """The job being answered."""
    count: Any
    """Files found so far while listing; images checked so far while checking."""
    checking: Any
    """Images whose ends are being read (the count's total); 0 while listing."""


def serve(jobs: Connection, shared: Shared) -> None:
    """Answers ``(job, generation, path, extensions, stamps)`` requests until None comes.

    ``stamps`` None asks for a scan; else the folders of a kept scan, to scan again only
    if one of them changed (the answer is None when none did, or when cancelled).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the window's to handle
    while (request := jobs.recv()) is not None:
        job, wanted, path, extensions, stamps = request
        outcome = None
        if shared.generation.value == wanted and (stamps is None or changed(stamps)):
            shared.running.value, shared.count.value = job, 0
            try:
                outcome = scan(path, extensions, shared, wanted)
            except Cancelled:
                outcome = None
            shared.checking.value = 0
        jobs.send((job, outcome))


CHECK_REPORT = 256
"""Images checked between two looks at the shared numbers (a report and a cancel check)."""


def scan(path: str, extensions: tuple[str, ...], shared: Shared, wanted: int) -> Outcome:
    """The folder's summary (or why it is none) and the folders it listed, stamped; an
    image folder's summary names its unreadable images too (each file's ends are read,
    here rather than at Run: a few seconds per 100,000 files, counted as they go)."""
    folders = [stamped(os.path.expanduser(path))]

    def on_folder(folder: str, found: int) -> None:
        if shared.generation.value != wanted:
            raise Cancelled
        folders.append(stamped(folder))
        shared.count.value = found

    try:
        listed = scan_folder(path, extensions, on_folder)
    except FolderError as exc:
        return exc, tuple(folders)
    summary = listed.summary()
    if extensions != IMAGE_EXTENSIONS:
        return summary, tuple(folders)
    shared.checking.value, shared.count.value = len(listed.files), 0
    bad = []
    for index, (file, _) in enumerate(listed.files):
        if index % CHECK_REPORT == 0:
            if shared.generation.value != wanted:
                raise Cancelled
            shared.count.value = index
        problem = image_file_problem(file)
        if problem is not None:
            bad.append((file, problem))
    return replace(summary, unreadable=tuple(bad[:1]), unreadable_count=len(bad)), tuple(folders)


def stamped(folder: str) -> tuple[str, int]:
    try:
        return folder, os.stat(folder).st_mtime_ns
    except OSError:
        return folder, -1


def changed(stamps: Stamps) -> bool:
    """Whether a folder a kept scan listed was changed since (a file or class added or
    removed changes its folder's modification time)."""
    return any(stamped(folder) != (folder, stamp) for folder, stamp in stamps)
