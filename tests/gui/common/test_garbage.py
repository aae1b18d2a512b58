"""Cycles holding Qt objects are collected on the window's thread only (gui/common/garbage.py):
collected on another thread, a QObject's destructor deadlocked the window's thread."""

from __future__ import annotations

import gc
import threading

from distloop.gui.common.garbage import MainThreadCollector
from distloop.gui.shell.app import application
from PySide6.QtCore import QObject


class _Cycle:
    """A cycle holding a QObject, which says on which thread it was collected."""

    def __init__(self, collected_on: list[str]) -> None:
        self.collected_on = collected_on
        self.qt_object = QObject()
        self.itself = self

    def __del__(self) -> None:
        self.collected_on.append(threading.current_thread().name)


def _churn() -> None:
    """Allocations far past every threshold of the collector, cycles among them."""
    for _ in range(20):
        junk: list[list] = [[] for _ in range(10_000)]
        for item in junk:
            item.append(item)


def _collected_on(collector: bool, qtbot) -> list[str]:
    collected_on: list[str] = []
    running = MainThreadCollector(interval_ms=50) if collector else None
    try:
        _Cycle(collected_on)
        worker = threading.Thread(target=_churn, name="worker")
        worker.start()
        worker.join()
        if running is not None:
            assert collected_on == []  # the worker's allocations collected nothing
        qtbot.waitUntil(lambda: bool(collected_on), timeout=5000)
    finally:
        if running is not None:
            running.stop()
    return collected_on


def test_garbage_a_worker_would_collect_is_collected_on_the_window_s_thread(qtbot) -> None:
    gc.enable()  # as outside the collector (tests/gui/conftest.py turns it off)
    assert _collected_on(False, qtbot) == ["worker"]  # what deadlocked a window's thread
    assert _collected_on(True, qtbot) == [threading.main_thread().name]
    assert gc.isenabled()


def test_the_oldest_generation_past_its_threshold_is_collected(qtbot, monkeypatch) -> None:
    collected: list[int] = []
    monkeypatch.setattr(gc, "get_count", lambda: (701, 11, 3))
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or 0)
    collector = MainThreadCollector(interval_ms=10_000)
    try:
        collector.check()
    finally:
        collector.stop()
    assert collected == [1]  # generation 1 passed 10; generation 2 is 3 of 10


def test_the_application_the_window_runs_in_collects_on_its_thread(qapp) -> None:
    """``distloop`` (and every script that starts the window the same way) gets one."""
    application()
    application()
    assert len(qapp.findChildren(MainThreadCollector)) == 1
