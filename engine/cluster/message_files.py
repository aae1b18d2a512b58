"""A task's ``messages.jsonl`` read as it grows, from a file system another machine writes.

A Slurm job's tasks each record their protocol messages (``distloop run
--record-messages``) in their own folder on the shared file system; the follower here
reads them back. Such a file is untrusted (anyone who can write the job folder wrote
it): only a regular file is read, a line that holds no message is a warning, bytes
that are no UTF-8 are replaced, and a line longer than any message is cut off, so a
crafted file costs a line of warning, never a crash or a read without end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..fileio import open_text
from ..message_stream import MAX_LINE, read_message
from ..messages import Log, Message, ProtocolError


class MessagesTail:
    """The messages written to ``path`` since byte ``start``, as they arrive."""

    def __init__(self, path: Path, start: int = 0) -> None:
        self.path = path
        self._start = start
        self._stream: TextIO | None = None
        self._partial = ""

    def read(self) -> list[Message]:
        """The whole lines written since the last read; nothing while the file is missing
        (its task has not started), a warning for a line that is no message."""
        if self._stream is None:
            try:
                self._stream = open_text(self.path, "r", errors="replace")
            except OSError:
                return []
            self._stream.seek(self._start)
        try:
            text = self._partial + self._stream.read(MAX_LINE)
        except OSError as exc:
            return [Log(level="warning", text=f"cannot read {self.path}: {exc}")]
        *lines, self._partial = text.split("\n")
        if len(self._partial) > MAX_LINE:  # no message is that long: not a run's file
            lines.append(self._partial)
            self._partial = ""
        read: list[Message] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                read.append(read_message(line))
            except ProtocolError as exc:
                read.append(Log(level="warning", text=f"{self.path}: {exc}"))
        return read

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
