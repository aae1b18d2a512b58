"""``engine.log``: its records, written so no line starts with outside text, and its tail.

The log holds what users and data wrote (paths, errors, tracebacks), and may be a
crafted file in someone else's folder: how a record is written and how the log is
opened and read back for an error report are kept together here.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TextIO

from ..fileio import open_bytes, open_text
from .layout import LOG_FILE


def log_line(level: str, source: str, text: str) -> str:
    """One record of ``engine.log``: every line of ``text`` after the record's prefix.

    A record's text holds what users and data wrote (a data path, an error naming a
    file, a traceback): a line break in it starts a line with the prefix again, so
    no line of the log ever begins with text from outside, whatever the log is (a
    log appended to a crafted ``authorized_keys`` once gave its reader a key).
    """
    prefix = f"{time.strftime('%H:%M:%S')} {level[0].upper()} [{source}] "
    return "".join(f"{prefix}{line}\n" for line in text.splitlines() or [""])


def open_log(run_dir: Path) -> TextIO:
    """``engine.log``, opened to append records (:func:`log_line`), never through a link."""
    return open_text(run_dir / LOG_FILE, "a")


TAIL_BYTES = 64 * 1024
"""How much of the end of ``engine.log`` :func:`tail_log` reads: plenty for its last lines."""


def tail_log(run_dir: str | Path, lines: int = 20) -> list[str]:
    """The last lines of the engine log, for error reports after a crash."""
    try:
        with open_bytes(Path(run_dir) / LOG_FILE) as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_BYTES))
            return handle.read().decode("utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []
