"""A run folder copied here from a host as a tar stream, trusting nothing the host sends.

At the end of ``distloop launch`` the chief's folder comes back over ssh as ``tar -cf -``
(``SshLaunch.fetch``). The host may be anyone's machine, or taken over, and tarfile's own
``filter="data"`` is not a boundary one can rely on: on some Python releases a chain of
links that makes ``os.path.realpath`` stop resolving at PATH_MAX slips past it
(CVE-2025-4517) and writes anywhere. A run folder holds only regular files and folders
(``engine.run_folder.trust``), so that is all this accepts: every member is checked by its
header alone, written by this code (never by tarfile's extraction) into a fresh private
folder, and only a complete, clean copy replaces the old one. Its bytes are bounded by the
free space here, its time by a stall limit and a least rate, so a host that declares a
terabyte or stops sending ends the copy with one line instead of filling the disk or
waiting forever.
"""

from __future__ import annotations

import os
import secrets
import select
import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from ..code_text import printable
from ..run_folder import CHECKPOINT_DIR, remove_path

STALL_S = 120.0
"""How long the copy waits for the host's next byte before it gives up."""
LEAST_RATE = 64 * 1024
"""Bytes per second the copy must average after its first ``STALL_S``: a host that sends
a byte now and then is as stuck as one that sends nothing."""
FREE_SPACE_KEPT = 256 * 1024 * 1024
"""What the copy leaves free on this machine's disk, for the run's own log and status."""
MAX_MEMBERS = 200_000
"""A run folder's files and folders: checkpoints, event files, a SavedModel; far fewer."""
MAX_NAME = 1024
"""The longest path a run folder's member has (``tasks/worker-1/saved_model/variables/...``)."""
_TOO_MANY = f"it sent more than {MAX_MEMBERS} files, more than a run writes"
_BLOCK = tarfile.BLOCKSIZE
_NO_DISK = 1 << 62
"""A relay's byte budget: it writes nothing here, so only its time bounds it."""
_CHUNK = 1024 * 1024
MAX_TRAILER = 1024 * 1024
"""What a sender may write after the archive's end marker: tar pads its last record with
zeros (10 KiB with GNU tar's default blocking), far below this."""


MAX_METADATA = 1024 * 1024
"""The largest pax or GNU long-name header: tarfile reads such a header's body whole into
memory, so a host declaring one of gigabytes would fill it."""
_METADATA = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


class CopyBackError(OSError):
    """Why a host's copy was refused; the folder here is left as it was."""


class _CheckedHeader(tarfile.TarInfo):
    """A member's header as tarfile reads it, refused before a metadata header's body (a
    pax or GNU long-name header, read whole into memory) is read when it declares more
    than :data:`MAX_METADATA`. tarfile reads every following header through this too."""

    @classmethod
    def fromtarfile(cls, archive: tarfile.TarFile) -> tarfile.TarInfo:
        assert archive.fileobj is not None
        block = archive.fileobj.read(_BLOCK)
        header = cls.frombuf(block, archive.encoding, archive.errors)
        header.offset = archive.fileobj.tell() - _BLOCK
        if header.type in _METADATA and header.size > MAX_METADATA:
            raise CopyBackError(
                f"a header before {_shown(header.name)} declares {_size(header.size)} "
                "of names and attributes"
            )
        return header._proc_member(archive)


@dataclass(frozen=True)
class Limits:
    """How long and how much a copy may take (the defaults; tests pass short ones)."""

    stall_s: float = STALL_S
    least_rate: float = LEAST_RATE
    free_space_kept: int = FREE_SPACE_KEPT


class _BoundedStream:
    """A pipe read with a stall limit, a least rate and a byte budget."""

    def __init__(self, pipe: IO[bytes], budget: int, limits: Limits) -> None:
        self._fd = pipe.fileno()
        self._budget = budget
        self._limits = limits
        self._began = time.monotonic()
        self.received = 0

    def read(self, size: int = -1) -> bytes:
        if size == 0:
            return b""
        size = _CHUNK if size < 0 else min(size, _CHUNK)
        ready, _, _ = select.select([self._fd], [], [], self._limits.stall_s)
        if not ready:
            raise CopyBackError(f"it sent nothing for {self._limits.stall_s:g} s")
        data = os.read(self._fd, size)
        self.received += len(data)
        if self.received > self._budget:
            raise CopyBackError(f"it sent more than the {_size(self._budget)} there is room for")
        elapsed = time.monotonic() - self._began
        late = elapsed - self._limits.stall_s
        if late > 0 and self.received < late * self._limits.least_rate:
            raise CopyBackError(
                f"it sent {_size(self.received)} in {elapsed:.0f} s, slower than "
                f"{_size(int(self._limits.least_rate))}/s"
            )
        return data


def receive_run_folder(
    pipe: IO[bytes], into: Path, scratch: Path, limits: Limits | None = None
) -> None:
    """Reads a tar stream of a run folder from ``pipe`` and puts it at ``into``.

    The members are written into a fresh folder in ``scratch`` (on the same disk, named
    as a run's temporary so that a crash leaves nothing a resume keeps), which then
    replaces ``into``. CopyBackError (or tarfile's own errors for a broken stream) when
    the stream is refused; ``into`` is then untouched and nothing is left in ``scratch``.
    """
    limits = limits or Limits()
    scratch.mkdir(parents=True, exist_ok=True)
    budget = max(shutil.disk_usage(scratch).free - limits.free_space_kept, 0)
    stream = _BoundedStream(pipe, budget, limits)
    tag = secrets.token_hex(4)
    fresh = scratch / f".{tag}.tmp-{into.name}"
    fresh.mkdir(mode=0o700)
    try:
        with tarfile.open(  # type: ignore[call-overload]
            fileobj=stream, mode="r|", tarinfo=_CheckedHeader
        ) as archive:
            _write_members(archive, fresh, budget)
        _read_to_the_end(stream)
        fresh.chmod(0o755)
        _replace(into, fresh, scratch / f".{tag}.old-{into.name}")
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


def _read_to_the_end(stream: _BoundedStream) -> None:
    """Reads what the sender writes after the archive's end marker (tar's padding of its
    last record) until it closes the pipe, so that it finishes and exits by itself: its
    exit status then says whether the copy went well, which a sender stopped midway (or
    killed for being slow to exit on a busy machine) cannot say."""
    trailing = 0
    while data := stream.read(_CHUNK):
        trailing += len(data)
        if trailing > MAX_TRAILER:
            raise CopyBackError("it kept sending after the archive's end")


def relay_checkpoints(source: IO[bytes], target: IO[bytes], limits: Limits | None = None) -> None:
    """Passes a tar stream of a task's ``checkpoints/`` folder from one host to another
    (a resume's copy of the chief's checkpoints), re-written here member by member: only
    plain files and folders inside ``checkpoints/`` pass, with plain modes, so the
    receiving host's ``tar`` never sees a link, a device or a name reaching out of it.
    Bounded in time as a copy back is; CopyBackError at the first member refused."""
    limits = limits or Limits()
    stream = _BoundedStream(source, _NO_DISK, limits)
    with (
        tarfile.open(  # type: ignore[call-overload]
            fileobj=stream, mode="r|", tarinfo=_CheckedHeader
        ) as archive,
        tarfile.open(fileobj=target, mode="w|", format=tarfile.GNU_FORMAT) as out,
    ):
        for count, member in enumerate(archive, start=1):
            if count > MAX_MEMBERS:
                raise CopyBackError(_TOO_MANY)
            parts = _plain_parts(member.name)
            if not parts or parts[0] != CHECKPOINT_DIR:
                raise CopyBackError(f"{_shown(member.name)} is not inside {CHECKPOINT_DIR}/")
            clean = tarfile.TarInfo("/".join(parts))
            clean.mtime = member.mtime
            if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
                clean.size, clean.mode = member.size, 0o644
                out.addfile(clean, archive.extractfile(member))
            elif member.type == tarfile.DIRTYPE:
                clean.type, clean.mode = tarfile.DIRTYPE, 0o755
                out.addfile(clean)
            else:
                raise CopyBackError(_kind_refusal(member))


def _write_members(archive: tarfile.TarFile, fresh: Path, budget: int) -> None:
    """Writes each member as this process's own file or folder; the first that a run
    folder cannot hold refuses the whole stream."""
    written = 0
    for count, member in enumerate(archive, start=1):
        if count > MAX_MEMBERS:
            raise CopyBackError(_TOO_MANY)
        parts = _plain_parts(member.name)
        if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
            written += member.size + _BLOCK
            if written > budget:
                raise CopyBackError(
                    f"{_shown(member.name)} is {_size(member.size)}, more than the "
                    f"{_size(budget)} there is room for"
                )
            if not parts:
                raise CopyBackError("it sent the folder itself as a file")
            _write_file(archive, member, fresh, parts)
        elif member.type == tarfile.DIRTYPE:
            if parts:
                _make_folder(fresh, parts)
        else:
            raise CopyBackError(_kind_refusal(member))


def _kind_refusal(member: tarfile.TarInfo) -> str:
    kind = _KINDS.get(member.type, "no regular file")
    return f"{_shown(member.name)} is {kind}, and a run folder holds only files and folders"


_KINDS = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.CONTTYPE: "a contiguous file",
    tarfile.GNUTYPE_SPARSE: "a sparse file",
}


def _plain_parts(name: str) -> tuple[str, ...]:
    """The member's path inside the folder, part by part (``()`` for the folder itself).

    Only a relative path of plain names: never absolute, never ``..``, no empty or
    control-character part, ``./`` allowed only in front (``tar -C DIR -cf - .``)."""
    path = name[2:] if name.startswith("./") else name
    path = path.rstrip("/")
    if path in ("", "."):
        return ()
    parts = tuple(path.split("/"))
    bad = (
        len(name) > MAX_NAME
        or PurePosixPath(name).is_absolute()
        or any(part in ("", ".", "..") for part in parts)
        or any(ord(char) < 0x20 or char == "\x7f" for char in path)
    )
    if bad:
        raise CopyBackError(f"{_shown(name)} is not a path inside the run folder")
    return parts


def _make_folder(fresh: Path, parts: tuple[str, ...]) -> None:
    """A folder and its parents, each checked to be a folder this copy made."""
    folder = fresh
    for part in parts:
        folder = folder / part
        try:
            folder.mkdir(mode=0o755)
        except FileExistsError:
            if folder.is_symlink() or not folder.is_dir():
                raise CopyBackError(f"{'/'.join(parts)} comes as a file and a folder") from None


def _write_file(
    archive: tarfile.TarFile, member: tarfile.TarInfo, fresh: Path, parts: tuple[str, ...]
) -> None:
    """The member's bytes into a new file: never over one already there (a member sent
    twice), never through a link (there are none: this copy makes none)."""
    _make_folder(fresh, parts[:-1])
    target = fresh.joinpath(*parts)
    source = archive.extractfile(member)
    assert source is not None  # a regular member always has its bytes
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except FileExistsError:
        raise CopyBackError(f"{_shown(member.name)} comes twice") from None
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(_CHUNK):
            out.write(chunk)


def _replace(into: Path, fresh: Path, old: Path) -> None:
    """``fresh`` becomes ``into``; the earlier ``into`` (a link replaced as a link) goes."""
    into.parent.mkdir(parents=True, exist_ok=True)
    if into.is_symlink() or into.exists():
        os.replace(into, old)
    os.replace(fresh, into)
    if old.is_symlink() or old.exists():
        remove_path(old)


def _shown(name: str) -> str:
    """A member's name in a message: escaped, and short, however long the host made it."""
    return printable(name[:200]) + ("..." if len(name) > 200 else "")


def _size(count: int) -> str:
    """``count`` bytes as a person reads them: ``512 bytes``, ``64.0 MiB``, ``1024.0 GiB``."""
    if count < 1024:
        return f"{count} bytes"
    amount, unit = count / 1024, "KiB"
    for larger in ("MiB", "GiB"):
        if amount < 1024:
            break
        amount, unit = amount / 1024, larger
    return f"{amount:.1f} {unit}"
