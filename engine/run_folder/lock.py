"""The lock that keeps two runs from writing one folder, and the disk reserve it holds.

Two writers would interleave their steps in one ``metrics.csv``; the lock is taken by
the parent before anything is written and handed to the engine process, so it is
its own module with the one platform difference (no ``fcntl`` on Windows) kept here.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .folder_io import RunFolderError
from .layout import LOCK_FILE

try:
    import fcntl
except ImportError:  # Windows: run folders are neither locked nor given a reserve there
    fcntl = None  # type: ignore[assignment]

RESERVE_BYTES = 32 * 1024
"""Kept in the lock file while a run lasts: on a full disk, enough to write its status."""


class RunFolderBusy(RunFolderError):
    """Another run writes this folder now: two writers would interleave their steps."""

    holder: int | None = None
    """The process that holds the folder's lock, when it said so."""


class RunFolderLock:
    """An exclusive lock on a run folder, held for as long as a run writes there.

    The parent takes it before it writes anything and hands it to the engine
    process (its descriptor, sent after the job: ``engine.child_process``), which then
    holds the same open lock file: the lock lasts until both
    have let go, so an engine that outlives its parent for a moment still holds
    it. It is ``flock`` on ``.distloop.lock`` (the file stays; the lock goes with
    the processes, even when they are killed), which holds the pid of the taker
    and keeps :data:`RESERVE_BYTES` of the disk: a run that fails on a full disk
    gives them back (:meth:`free_reserve`) to record that it failed.
    """

    def __init__(self, folder: Path, fd: int) -> None:
        self.folder = folder
        self._fd = fd

    @classmethod
    def acquire(cls, folder: Path) -> RunFolderLock:
        """Locks ``folder`` (which must exist) or raises RunFolderBusy naming who holds it."""
        path = folder / LOCK_FILE
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as exc:
            raise RunFolderError(
                f"cannot lock the run folder {folder}: {exc.strerror or exc} ({path})"
            ) from None
        if fcntl is None:
            return cls(folder, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).split(b"\n")[0].decode("ascii", "replace")
            os.close(fd)
            by = f" (process {holder})" if holder.isdigit() else ""
            busy = RunFolderBusy(
                f"the run folder {folder} is in use by another run{by}: wait for it to end, "
                "or choose another folder"
            )
            busy.holder = int(holder) if holder.isdigit() else None
            raise busy from None
        # The holder's pid is only for the message above, and the reserve only helps a
        # full disk end well: neither may stop a run from starting.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            owner = f"{os.getpid()}\n".encode()
            os.pwrite(fd, owner + bytes(RESERVE_BYTES), 0)
        return cls(folder, fd)

    @staticmethod
    def held(folder: Path) -> bool:
        """Whether a process holds ``folder``'s lock now (this one too, through another
        acquire); asks without taking it or writing to the lock file."""
        if fcntl is None:
            return False
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(folder / LOCK_FILE, flags)
        except OSError:  # no lock file: never locked; a link: no run's
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # and with it the shared lock just taken
        return False

    def handle(self) -> int | None:
        """The locked descriptor, to hand to a running engine; None where nothing is locked."""
        return self._fd if self._fd >= 0 and fcntl is not None else None

    def free_reserve(self) -> None:
        """Gives the reserved space back to the disk, for a failing run's last records."""
        if self._fd >= 0 and fcntl is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, os.pread(self._fd, 32, 0).find(b"\n") + 1)

    def release(self) -> None:
        """Lets go of this process's hold (the engine's own copy lasts until it exits).

        The reserve goes too: a run folder keeps no 32 KiB of zeros once its run ended.
        """
        if self._fd >= 0:
            self.free_reserve()
            os.close(self._fd)
            self._fd = -1
