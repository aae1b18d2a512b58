"""Writing files so that a crash or a full disk never leaves a half-written one, reading
only regular files where a FIFO or a device would hang the reader, and reading files from
folders that may come from anyone without following links (:func:`read_regular_file`)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Any, BinaryIO, Literal, TextIO

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


def file_kind_problem(path: str | Path) -> str | None:
    """Why ``path`` is no regular file a loader can read, or None when it is one (links
    followed): missing, a folder, a FIFO, a device or a socket.

    A FIFO named as a data or model file blocks its reader until someone writes to it, a
    device such as ``/dev/zero`` never ends, and a folder fails only later, inside a run.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    kinds = {stat.S_ISFIFO: "a FIFO (named pipe)", stat.S_ISSOCK: "a socket"}
    kind = next((name for test, name in kinds.items() if test(mode)), "a device")
    return f"is {kind}, not a regular file"


class NotRegularFileError(OSError):
    """:func:`open_regular` was given a FIFO, a device, a socket or a folder."""


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for reading in binary, only if it is a regular file.

    Opened without blocking and checked on the open descriptor, so a FIFO never blocks
    the open and nothing can swap the file between the check and the read. Raises
    NotRegularFileError (an OSError) saying what ``path`` is instead.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(
                f"{path} {file_kind_problem(path) or 'is not a regular file'}"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class FileRefused(OSError):
    """A file that is not read: a link, not a regular file, or larger than the reader allows.

    Its ``strerror`` says which, in words a user reads after the file's name.
    """


_NO_FOLLOW = (
    getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)


def _open_regular(path: str | Path, flags: int, *, regular: bool = True) -> int:
    """A descriptor of ``path`` opened with ``flags``, never through a link, and with
    ``regular`` only when it is a regular file (a FIFO does not block the open either:
    ``O_NONBLOCK``)."""
    try:
        fd = os.open(path, flags | _NO_FOLLOW, NEW_FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefused(exc.errno, "is a symbolic link", str(path)) from None
        raise
    if regular and not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileRefused(errno.EINVAL, "is not a regular file", str(path))
    return fd


def open_text(path: str | Path, mode: Literal["r", "a"], **options: Any) -> TextIO:
    """``open(path, mode, encoding="utf-8", **options)``, never through a link.

    For run folders: appending to a crafted ``engine.log -> ~/.ssh/authorized_keys``
    would write there, and reading a ``metrics.csv -> /dev/zero`` would never end, so
    only a regular file is read. Appending writes to what is there by that name (a
    device node, which only root can make there: ``/dev/full`` for a full disk).
    """
    if mode == "r":
        return os.fdopen(_open_regular(path, os.O_RDONLY), mode, encoding="utf-8", **options)
    fd = _open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, regular=False)
    return os.fdopen(fd, mode, encoding="utf-8", **options)


def open_bytes(path: str | Path) -> BinaryIO:
    """``open(path, "rb")`` for a regular file, never a link (a run folder's engine.log or
    metrics.csv, read whole or from its end, may be a crafted link to ``/dev/zero``)."""
    return os.fdopen(_open_regular(path, os.O_RDONLY), "rb")


def read_regular_file(path: str | Path, limit: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes.

    A file from a shared folder is untrusted: a link is not followed (``O_NOFOLLOW``),
    a FIFO or a device (``/dev/zero``) is refused without reading a byte or waiting
    for a writer (``O_NONBLOCK``), and at most ``limit + 1`` bytes are read, so a
    file that grows while it is read costs no more memory than one that did not.
    """
    fd = _open_regular(path, os.O_RDONLY)
    try:
        if os.fstat(fd).st_size > limit:
            raise FileRefused(errno.EFBIG, f"is larger than {limit:,} bytes", str(path))
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise FileRefused(errno.EFBIG, f"is larger than {limit:,} bytes", str(path))
    return b"".join(chunks)
