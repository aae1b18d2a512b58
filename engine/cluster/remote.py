"""A task on another machine, driven like a local engine: its messages come back as JSON
lines over the channel that started it (``distloop run --messages``, see
``engine.message_stream``), and its stop is a line on that channel.

The channel is any command whose standard streams reach the task: ``ssh`` for a
host (:mod:`engine.cluster.ssh`), or the task itself. When the channel ends without
the task's last message (the connection dropped, the host went away), the task has
failed, and the lines the channel printed last say why.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from ..code_text import printable
from ..config import Project
from ..message_stream import KILL_LINE, MAX_LINE, STOP_LINE, read_message
from ..messages import Log, Message, ProtocolError, RunFailed, RunFinished
from ..run_lifecycle import RunLifecycle

TERMINAL_WAIT_S = 15.0
"""After its last message a task still closes its run folder (and its lock) and exits;
its channel's end says it has. A task that says nothing more for this long is done anyway."""
TAIL_LINES = 12
"""Lines of the channel's own output (ssh's errors, the remote command's) kept to say why."""
TAIL_LINE_CHARS = 500
"""The longest line of the channel's own output kept; a longer one is cut."""
KILL_WAIT_S = 5.0


class RemoteEngine:
    """One task behind a command's standard streams; the same calls as ``EngineProcess``.

    ``prepare`` runs first, in :meth:`start` (copying the project to the host); it
    raises OSError to refuse the start. ``where`` names the task in messages
    (``worker:1 on h2``); ``task`` is the name its messages carry (``worker:1``).
    """

    def __init__(
        self,
        project: Project,
        argv: list[str],
        *,
        task: str,
        where: str,
        prepare: Callable[[], None] | None = None,
    ) -> None:
        self.project = project
        self.task = task
        self.where = where
        self._argv = argv
        self._prepare = prepare
        self._process: subprocess.Popen[str] | None = None
        self._inbox: queue.Queue[Message | None] = queue.Queue()
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._lifecycle = RunLifecycle(task)
        self._ended_at: float | None = None
        """When the task's last message came: it is handed out once the task has ended."""
        self._handed_out = False
        self._stream_ended = threading.Event()
        self._killed_on_request = False

    def lock_folder(self) -> None:
        """The task locks its own folder, on its host."""

    def start(self) -> None:
        if self._prepare is not None:
            self._prepare()
        self._process = subprocess.Popen(
            self._argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,  # a Ctrl-C in the launcher's terminal is the launcher's
        )
        threading.Thread(target=self._read_messages, daemon=True).start()
        threading.Thread(target=self._read_tail, daemon=True).start()

    def _read_messages(self) -> None:
        """The task's messages, each line read at most ``MAX_LINE`` long (a host that never
        ends a line costs no more memory), its text made printable (``_printable``)."""
        assert self._process is not None and self._process.stdout is not None
        while line := self._process.stdout.readline(MAX_LINE + 1):
            if not line.strip():
                continue
            try:
                self._inbox.put(_printable(read_message(line)))
            except ProtocolError:  # a login banner or a shell's chatter: say it, go on
                self._keep_tail(line)
        self._stream_ended.set()
        self._inbox.put(None)

    def _read_tail(self) -> None:
        """The channel's own output, line by line; of a longer line than
        ``TAIL_LINE_CHARS``, its start (the rest is read and dropped)."""
        assert self._process is not None and self._process.stderr is not None
        in_long_line = False
        while line := self._process.stderr.readline(TAIL_LINE_CHARS):
            ended = line.endswith("\n")
            if not in_long_line and line.strip():
                self._keep_tail(line if ended else f"{line}...")
            in_long_line = not ended

    def _keep_tail(self, line: str) -> None:
        """One line of the channel's own output, kept to say why it ended: escaped and
        shortened, since the host writes it and a notice prints it."""
        line = line.rstrip()
        cut = line[:TAIL_LINE_CHARS] + ("..." if len(line) > TAIL_LINE_CHARS else "")
        self._tail.append(printable(cut))

    @property
    def pid(self) -> int | None:
        """The channel's process here (the task's own pid is on its host)."""
        return self._process.pid if self._process else None

    @property
    def exit_code(self) -> int | None:
        return self._process.poll() if self._process else None

    @property
    def done(self) -> bool:
        return self._handed_out

    def _send(self, line: str) -> None:
        if self._process is None or self._process.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):  # the channel is gone already
            self._process.stdin.write(line + "\n")
            self._process.stdin.flush()

    def request_stop(self) -> None:
        """The task stops after its current step, with a checkpoint, as after a Ctrl-C."""
        self._send(STOP_LINE)

    def kill(self) -> None:
        """The task is killed on its host, and the channel here ends."""
        if self._process is None or self._process.poll() is not None:
            return
        self._killed_on_request = True
        self._send(KILL_LINE)
        threading.Timer(KILL_WAIT_S, self._end_channel).start()

    def _end_channel(self) -> None:
        """Closing the channel ends the task too (it stops, then is killed, on its host)."""
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(OSError):
                if self._process.stdin is not None:
                    self._process.stdin.close()
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGTERM)

    def stop(self, grace_s: float = 5.0) -> None:
        self.request_stop()
        deadline = time.monotonic() + grace_s
        while not self.done and time.monotonic() < deadline:
            self.poll(0.2)
        if not self.done:
            self.kill()

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        if self._handed_out or self._process is None:
            return []
        if self._ended_at is not None and time.monotonic() - self._ended_at > TERMINAL_WAIT_S:
            return self._hand_out([])
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                message = (
                    self._inbox.get(timeout=remaining)
                    if remaining > 0 and not out
                    else self._inbox.get_nowait()
                )
            except queue.Empty:
                return out
            if message is None:
                return self._hand_out(out)
            self._lifecycle.note(message)
            if message is self._lifecycle.terminal:
                # Handed out once the task has ended on its host: a restart may take its
                # folder right after.
                self._ended_at = time.monotonic()
                continue
            if isinstance(message, Log) and message.level == "error":
                self._tail.append(message.text)
            out.append(message)

    def _hand_out(self, out: list[Message]) -> list[Message]:
        """``out`` and the task's end: its last message, or what the channel's end says."""
        self._handed_out = True
        return [*out, self._lifecycle.terminal or self._channel_ended()]

    def _channel_ended(self) -> RunFinished | RunFailed:
        """The channel ended before the task's last message: killed here, or lost."""
        assert self._process is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=5)
        if self._killed_on_request:
            return self._lifecycle.stopped(killed=True)
        said = "; ".join(self._tail) or "it printed nothing"
        return RunFailed(
            error_type="ConnectionLost",
            message=f"the channel to {self.where} ended (exit code {self._process.returncode}) "
            f"before the task's last message: {said}",
            last_step=self._lifecycle.last_step,
            exit_code=self._process.returncode,
            known=True,
            task=self.task,
        )

    def close(self) -> None:
        """Ends the channel; the task ends with it, if it has not already."""
        if self._process is None:
            return
        self._end_channel()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=KILL_WAIT_S + 5)
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def _printable(message: Message) -> Message:
    """``message`` with every text in it printable (line breaks kept): a host's task, or
    whoever controls the host, must not steer the terminal or the log that show it
    (an escape that erases the notice above, a bidirectional mark)."""
    raw = message.model_dump()
    cleaned = _printable_values(raw)
    return message if cleaned == raw else type(message).model_validate(cleaned)


def _printable_values(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value, lines=True)
    if isinstance(value, dict):
        return {key: _printable_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_printable_values(item) for item in value]
    return value
