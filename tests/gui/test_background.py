"""Work off the window's thread is over when its answer reaches the window, not when its
thread ends: a handler that starts the next piece (Check Cluster, then Run on Hosts)
must find the first one over, however late its thread ends."""

from __future__ import annotations

import threading

import pytest
from distloop.gui.run.background import Background


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

    def answered(said: object) -> None:
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
