"""The one way Distloop starts a child process and reads it (TensorFlow-free).

Every process that may load TensorFlow (a run's engine, warm or cold, the device probe,
a prediction process) is a :class:`ChildProcess`: started with multiprocessing's
``spawn`` context, never ``fork`` (a fork after TensorFlow or Qt loaded inherits their
threads' locks), and given the same three ends (:class:`ChildEnds`): a pipe on which the
parent sends typed requests (``engine.messages``: an ``EngineJob``, a ``PredictRequest``),
the queue on which the child's ``engine.channel.Channel`` sends its messages back, and
the stop request, an Event rather than a message so that it works while the queue is
full. Both directions carry protocol messages as plain dicts, parsed on arrival, so
anything else is refused as a :class:`engine.messages.ProtocolError` instead of misread.
What runs in the child is ``engine.child_main``'s.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import Any

from .messages import Message, _Message, parse_message

QUEUE_SIZE = 512
"""Messages waiting for the parent; a child's Channel holds the rest (engine.channel)."""
_ctx = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class ChildEnds:
    """What a child's main function gets first: its ends of the parent's channels."""

    requests: Connection
    out: Any
    """The queue a ``Channel`` sends on."""
    stop: Any
    """The parent's stop request (a ``multiprocessing.Event``), checked between steps."""

    def receive(self) -> Message:
        """The parent's next request, blocking; EOFError once the parent closed its end."""
        return parse_message(self.requests.recv())

    def receive_handle(self) -> int:
        """A file descriptor the parent sent after a request (the run folder's lock)."""
        return reduction.recv_handle(self.requests)


def describe_exit(exit_code: int | None, process: str = "the engine process") -> str:
    """Says how a process ended in words a user can act on."""
    if exit_code is None:
        return f"{process} is still running"
    if exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        hint = (
            " (the system also does this when memory runs out)"
            if -exit_code == signal.SIGKILL
            else ""
        )
        return f"{process} was killed by {name}{hint}"
    return f"{process} exited with code {exit_code} without reporting why"


class ChildProcess:
    """A spawned child, started at once, and the parent's ends of its channels.

    ``main(ends, *args)`` runs in the child. The parent sends requests with :meth:`send`
    and reads the child's messages with :meth:`receive`; :meth:`close` ends the child if
    it still runs and lets go of every end, so nothing of it outlives its owner.
    """

    def __init__(
        self,
        main: Callable[..., None],
        *args: Any,
        name: str,
        daemon: bool = False,
    ) -> None:
        self._queue: Any = _ctx.Queue(QUEUE_SIZE)
        self.stop_event: Any = _ctx.Event()
        self._requests, child_end = _ctx.Pipe()  # a socket pair: descriptors pass too
        ends = ChildEnds(child_end, self._queue, self.stop_event)
        self._process = _ctx.Process(target=main, args=(ends, *args), name=name, daemon=daemon)
        self._process.start()
        child_end.close()
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def exitcode(self) -> int | None:
        return self._process.exitcode

    def is_alive(self) -> bool:
        return self._process.is_alive()

    def send(self, request: _Message) -> None:
        """Sends a request; OSError or ValueError when the child (or its pipe) is gone."""
        self._requests.send(request.model_dump())

    def send_handle(self, fd: int) -> None:
        """Passes a file descriptor, which the child holds from then on as its own."""
        reduction.send_handle(self._requests, fd, self._process.pid)

    def close_requests(self) -> None:
        """No more requests: a child waiting for one sees its pipe end and exits."""
        self._requests.close()

    def receive(self, timeout_s: float | None) -> Message:
        """The child's next message, waiting at most ``timeout_s`` (None: no limit).

        Raises ``queue.Empty`` when none came in time, ProtocolError (a ValueError) for
        something that is not a message of this Distloop, and OSError or EOFError once
        :meth:`close` closed the queue.
        """
        try:
            if timeout_s is not None and timeout_s <= 0:  # a Queue waits for ever on one < 0
                raw = self._queue.get_nowait()
            else:
                raw = self._queue.get(timeout=timeout_s)
        except ValueError:  # the queue's own "is closed", not a message's fault
            raise EOFError("the child's queue is closed") from None
        return parse_message(raw)

    def join(self, timeout_s: float | None = None) -> None:
        self._process.join(timeout_s)

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()

    def close(self, wait_s: float = 0.0) -> None:
        """Ends the child (after ``wait_s`` for it to exit on its own) and closes its ends."""
        if self._closed:
            return
        self._closed = True
        self._requests.close()
        if wait_s > 0:
            self._process.join(wait_s)
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)
        self._queue.close()
        self._queue.cancel_join_thread()
