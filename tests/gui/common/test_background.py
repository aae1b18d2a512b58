"""The window's one idiom for work off its thread: over when its answer reaches the window,
not when its thread ends (a handler that starts the next piece, Check Cluster then Run on
Hosts, must find the first one over, however late its thread ends); refused, replaced or
queued while other work runs; a cancelled work stopped at its next progress report and
its answer never handed out."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from distloop.gui.common.background import Background, Progress, WhenBusy


class _Lingering(threading.Thread):
    """A thread that outlives its work, as one does on a busy machine."""

    let_go = threading.Event()

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.let_go.wait(10)


def test_the_answer_is_handed_out_once_the_work_counts_as_over(
    qtbot, monkeypatch: pytest.MonkeyPatch
) -> None:
    background = Background()
    seen: list[tuple[object, bool, bool]] = []

    def answered(_key: object, said: object) -> None:
        running = background.running
        again = not seen and background.start(lambda _progress: "second")
        seen.append((said, running, again))

    background.done.connect(answered)
    background.failed.connect(answered)
    with monkeypatch.context() as patched:
        patched.setattr(threading, "Thread", _Lingering)
        assert background.start(lambda _progress: "first")
    assert background.running and not background.start(lambda _progress: "refused")
    try:
        qtbot.waitUntil(lambda: len(seen) == 2, timeout=10_000)
    finally:
        _Lingering.let_go.set()
    assert seen == [("first", False, True), ("second", False, False)]
    assert not background.running

    def broken(_progress: object) -> None:
        raise OSError("h2: no answer within 15 s")

    seen.clear()
    assert background.start(broken, known=(OSError,))
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=10_000)
    assert seen[0] == ("h2: no answer within 15 s", False, True)


def _gate() -> tuple[threading.Event, Callable[[Progress], str]]:
    """Work that waits for the gate to open, reporting progress while it waits."""
    gate = threading.Event()

    def work(progress: Progress) -> str:
        while not gate.wait(0.01):
            progress(0, 1, "waiting")
        return "gated"

    return gate, work


def test_the_latest_request_replaces_the_waiting_one_and_cancels_the_running_one(qtbot) -> None:
    """A study opened while another is read, a run drawn while another is: the answer
    that arrives is the last one asked for, and the first work stops early."""
    background = Background(when_busy=WhenBusy.REPLACE)
    answers: list[tuple[object, object]] = []
    background.done.connect(lambda key, said: answers.append((key, said)))
    gate, slow = _gate()
    stopped = threading.Event()

    def first(progress: Progress) -> str:
        try:
            return slow(progress)
        finally:
            stopped.set()

    assert background.start(first, key="first")
    assert background.start(lambda _progress: "second", key="second")
    assert background.start(lambda _progress: "third", key="third")
    assert stopped.wait(10), "the running work was not stopped at its next progress report"
    qtbot.waitUntil(lambda: not background.running, timeout=10_000)
    assert answers == [("third", "third")]
    gate.set()


def test_queued_work_runs_in_turn_each_key_once_while_it_waits(qtbot) -> None:
    """The runs' scans: every folder asked for is scanned, in order, once while it waits."""
    background = Background(when_busy=WhenBusy.QUEUE)
    answers: list[object] = []
    background.done.connect(lambda key, _said: answers.append(key))
    gate, slow = _gate()
    background.start(slow, key="a")
    for key in ("b", "c", "b", "a"):
        assert background.start(lambda _progress: None, key=key)
    gate.set()
    qtbot.waitUntil(lambda: not background.running, timeout=10_000)
    assert answers == ["a", "b", "c", "a"]


def test_cancelled_work_is_never_answered_and_a_failure_is_one_line(qtbot) -> None:
    background = Background()
    said: list[tuple[str, object]] = []
    background.done.connect(lambda _key, answer: said.append(("done", answer)))
    background.failed.connect(lambda _key, line: said.append(("failed", line)))
    gate, slow = _gate()
    background.start(slow)
    background.cancel()
    qtbot.waitUntil(lambda: not background.running, timeout=10_000)
    assert said == []

    def bug(_progress: object) -> None:
        raise KeyError("step")

    background.start(bug)
    qtbot.waitUntil(lambda: not background.running, timeout=10_000)
    assert said == [("failed", "KeyError: 'step'")]
    gate.set()
