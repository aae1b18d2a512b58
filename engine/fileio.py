"""Writing files so that a crash or a full disk never leaves a half-written one."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

NEW_FILE_MODE = 0o666
"""What a new file asks for; the system takes the user's umask off, as for any editor's save."""


def atomic_write_text(path: str | Path, text: str, *, follow_symlinks: bool = True) -> None:
    """Writes to a temporary file beside ``path``, syncs it, then renames it over ``path``.

    The rename is atomic on POSIX and Windows, so readers see the old content or
    the new, never a mix; on failure the temporary file is removed and the old
    file is untouched. The folder is synced after the rename, so the new name
    survives a power cut too. A saved file keeps its mode and owner (a shared,
    group-writable project stays so), and a link keeps being a link: the file it
    points to gets the new content. ``follow_symlinks=False`` replaces a link
    with the file instead, for run folders, where a crafted link must never make
    a run write somewhere else.
    """
    path = Path(os.path.realpath(path)) if follow_symlinks else Path(path)
    try:
        existing: os.stat_result | None = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISLNK(existing.st_mode):
        existing = None  # the link itself is replaced: the new file is like a new one
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            if existing is not None:
                _take_owner_and_mode(handle.fileno(), existing)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new, empty temporary file in ``path``'s folder, created with the umask's mode.

    ``tempfile.mkstemp`` would create it 0600, which the rename would then give
    the saved file.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, flags, NEW_FILE_MODE), tmp
        except FileExistsError:
            continue


def _take_owner_and_mode(fd: int, target: os.stat_result) -> None:
    """Gives the temporary file the replaced file's owner and mode.

    Owner first: a chown clears the setuid bits. Only root may give a file away;
    anyone else keeps the group when they are in it, and saves the file as theirs.
    Windows has neither call; its only mode, read-only, would refuse the save anyway.
    """
    if hasattr(os, "fchown"):
        current = os.fstat(fd)
        for uid in (target.st_uid, -1):
            if (current.st_uid, current.st_gid) == (target.st_uid, target.st_gid):
                break
            with contextlib.suppress(PermissionError):
                os.fchown(fd, uid, target.st_gid)
                break
    if hasattr(os, "fchmod"):
        os.fchmod(fd, stat.S_IMODE(target.st_mode))


def fsync_folder(folder: Path) -> None:
    """Makes a rename or a new name in ``folder`` durable (POSIX; Windows has no folder fsync)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
