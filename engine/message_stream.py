"""The protocol over a byte stream: how a run on another machine reports to this one.

``distloop run --messages`` writes every protocol message (``engine.messages``) as one
JSON line on stdout and reads its standard input as a control channel: a ``stop``
line asks the run to stop after the current step (as Ctrl-C does), a ``kill`` line
kills it (as a second Ctrl-C does), and the end of
the input means whoever started the run is gone (an SSH connection dropped, a
laptop closed): the run stops, and is killed if it has not stopped within
:data:`CHANNEL_CLOSED_GRACE_S`, so no task is left running for ever. The parent side,
:class:`engine.cluster.remote.RemoteEngine`, reads the lines back into messages, so a
remote task is one more engine behind the same handle as a local one.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import IO

from .messages import Message, ProtocolError, parse_message

STOP_LINE = "stop"
KILL_LINE = "kill"
CHANNEL_CLOSED_GRACE_S = 15.0
MAX_LINE = 64 * 2**20
"""A longer line is no message of ours (a log line is capped far below this)."""


def write_message(message: Message, stream: IO[str] | None = None) -> None:
    """One message as one line; flushed, since a reader waits for whole lines."""
    out = sys.stdout if stream is None else stream
    out.write(message.model_dump_json() + "\n")
    out.flush()


def read_message(line: str | bytes) -> Message:
    """The message a line holds; ProtocolError when it holds none."""
    if len(line) > MAX_LINE:
        raise ProtocolError(f"a line of {len(line)} bytes is no protocol message")
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"not a protocol message: {str(line)[:200]!r} ({exc})") from None
    return parse_message(raw)


class ControlChannel:
    """Watches standard input for ``stop``, ``kill`` and its end, in a daemon thread."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stop_requested = threading.Event()
        self.kill_requested = threading.Event()
        self.closed = threading.Event()
        self._stream = sys.stdin if stream is None else stream
        threading.Thread(target=self._watch, name="distloop-control", daemon=True).start()

    def _watch(self) -> None:
        try:
            for line in self._stream:
                if line.strip() == STOP_LINE:
                    self.stop_requested.set()
                elif line.strip() == KILL_LINE:
                    self.kill_requested.set()
        except (OSError, ValueError):  # a closed or broken stream is an ended one
            pass
        self.closed.set()
