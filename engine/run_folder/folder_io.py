"""Writing and reading a run folder's small files, the same way for every file.

A run that cannot write its folder must stop with one line a user can act on (a full
disk names the folder and its free space), and a folder that may come from anyone
must not make a reader follow a link or swallow a crafted file: every module of
:mod:`engine.run_folder` replaces files with :func:`rewrite_file`, reads JSON with
:func:`load_json` and turns a failed write into :class:`RunFolderError` here.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..fileio import FileRefused, atomic_write_text, read_regular_file
from .layout import METRICS_FILE

STATUS_READ_LIMIT = 1024 * 1024
"""The largest ``status.json`` read: a run's record with long notes is a few KiB."""


class RunFolderError(OSError):
    """The run folder cannot be written (full disk, no permission): the run must stop.

    Its message stands on its own, as the one line a user reads.
    """


def folder_write_error(
    run_dir: str | Path, exc: BaseException, what: str, *, parts: Sequence[str] = ()
) -> RunFolderError:
    """The error to stop a run with when writing ``what`` into ``run_dir`` failed.

    A full disk names the folder and its free space, the two things a user needs
    to act on; other failures name ``what`` and the system's reason. A file or folder
    missing under a write means the run folder is being deleted (rm -rf, a file
    manager): whichever write meets that first, it is said the same way, naming the
    first of ``metrics.csv``, ``parts`` (what the write went into) and ``what`` that is
    gone. rm -rf takes a folder's entries in no set order, so ``checkpoints/`` may go
    while ``metrics.csv`` is still there.
    """
    reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0] or type(exc).__name__
    missing = getattr(exc, "errno", None) == errno.ENOENT or "No such file or directory" in str(exc)
    if missing:
        gone = (
            name for name in (METRICS_FILE, *parts) if not os.path.lexists(Path(run_dir) / name)
        )
        return folder_deleted_error(run_dir, next(gone, what))
    if getattr(exc, "errno", None) == errno.ENOSPC or "No space left on device" in str(exc):
        try:
            free = f"{shutil.disk_usage(run_dir).free:,} bytes free"
        except OSError:
            free = "free space unknown"
        return RunFolderError(
            f"no space left on device in {run_dir} ({free}): cannot write {what}; free some "
            "space, then resume the run"
        )
    return RunFolderError(f"cannot write {what} in {run_dir}: {reason}")


def folder_deleted_error(run_dir: str | Path, gone: str) -> RunFolderError:
    """Going on would write a partial folder again at the next save, one no list shows."""
    return RunFolderError(
        f"the run folder {run_dir} was deleted while the run wrote it ({gone} is gone): "
        "the run stops"
    )


def rewrite_file(path: Path, text: str) -> None:
    """Replaces a file of the run folder (never through a link); a failure stops the run."""
    try:
        atomic_write_text(path, text, follow_symlinks=False)
    except OSError as exc:
        raise folder_write_error(path.parent, exc, path.name) from None


def load_json(path: Path, limit: int = STATUS_READ_LIMIT) -> Any:
    """The value of a run folder's JSON file of at most ``limit`` bytes.

    Raises OSError when it cannot be read (missing; a link, a FIFO or a device, or
    too big: :func:`engine.fileio.read_regular_file`; nested deeper than Python's
    recursion limit, which a crafted ``status.json`` is to end the runs list or a
    prediction with a RecursionError), ValueError when it is not JSON (half written).
    """
    data = read_regular_file(path, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise FileRefused(errno.EINVAL, "nests too deeply", str(path)) from None
