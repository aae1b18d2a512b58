"""A scripted engine handle and a scripted clock, for a run's session and its adapters:
every wait is a number the test sets, never a sleep."""

from __future__ import annotations

from distloop.engine.messages import Message, RunFinished


class Clock:
    """A session's time, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ScriptedHandle:
    """Hands out one scripted batch per poll; done once it sent its end, or was killed.
    It counts what it was asked (starts, stops, kills)."""

    def __init__(self, *batches: list[Message]) -> None:
        self.batches = list(batches)
        self.started = self.stops = self.kills = 0
        self.killed = False
        self._ended = False

    @property
    def done(self) -> bool:
        return self._ended or self.killed

    def start(self) -> None:
        self.started += 1

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        batch = self.batches.pop(0) if self.batches else []
        self._ended = self._ended or any(isinstance(m, RunFinished) for m in batch)
        return batch

    def request_stop(self) -> None:
        self.stops += 1

    def kill(self) -> None:
        self.kills += 1
        self.killed = True

    def stop(self, grace_s: float = 5.0) -> None:
        self.request_stop()
        self.kill()

    def close(self) -> None:
        pass
