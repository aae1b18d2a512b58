"""Writing files so that a crash or a full disk never leaves a half-written one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(path: str | Path, text: str) -> None:
    """Writes to a temporary file beside ``path``, syncs it, then renames it over ``path``.

    The rename is atomic on POSIX and Windows, so readers see the old content or
    the new, never a mix; on failure the temporary file is removed and the old
    file is untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
