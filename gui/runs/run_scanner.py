"""Run summaries from a scan of their files, made in a worker thread for the window.

A long run's ``metrics.csv`` takes seconds to read whole (:mod:`engine.csv_summary`), so
the window's thread summarizes without a scan and asks this scanner for the rest; the
runs list and the queue's results share one, so a folder is scanned once for both. A batch
job's run folder is summarized as its row by the job's scheduler
(:mod:`engine.cluster.scheduler`), which is asked for the job's state here too: Slurm's
``scontrol`` can take seconds.
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ...engine.cluster.scheduler import job_run_scheduler
from ...engine.run_history import summarize


class RunScanner(QObject):
    """Summarizes runs with a scan of their files in a worker thread; ``scanned`` brings each.

    One daemon thread takes the folders in turn (a scan of a long run takes seconds, and
    must never hold the window's thread nor its exit); a folder asked for again while it
    waits is scanned once.
    """

    scanned = Signal(object)  # RunSummary, delivered in the thread of the scanner's owner

    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self._waiting: dict[Path, None] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        threading.Thread(target=self._work, name="runs-scanner", daemon=True).start()

    def scan(self, paths: list[Path]) -> None:
        with self._lock:
            self._waiting.update(dict.fromkeys(paths))
        if paths:
            self._wake.set()

    def _work(self) -> None:
        while True:
            self._wake.wait()
            with self._lock:
                if not self._waiting:
                    self._wake.clear()
                    continue
                path = next(iter(self._waiting))
                del self._waiting[path]
            if not path.is_dir():
                continue
            scheduler = job_run_scheduler(path)
            summary = (
                scheduler.with_state(scheduler.summarize(path)) if scheduler else summarize(path)
            )
            try:
                self.scanned.emit(summary)
            except RuntimeError:  # the panel is gone (the window closed): nobody to tell
                return
