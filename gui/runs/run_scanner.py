"""Run summaries from a scan of their files, made off the window's thread.

A long run's ``metrics.csv`` takes seconds to read whole (:mod:`engine.csv_summary`), so
the window's thread summarizes without a scan and asks this scanner for the rest; the
runs list and the queue's results share one, so a folder is scanned once for both. A batch
job's run folder is summarized as its row by the job's scheduler
(:mod:`engine.cluster.scheduler`), which is asked for the job's state here too: Slurm's
``scontrol`` can take seconds.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ...engine.cluster.scheduler import job_run_scheduler
from ...engine.run_history import RunSummary, summarize
from ..common.background import Background, WhenBusy


class RunScanner(QObject):
    """Summarizes runs with a scan of their files off the window's thread; ``scanned``
    brings each. The folders are taken in turn (a scan of a long run takes seconds, and
    must never hold the window's thread nor its exit); a folder asked for again while it
    waits is scanned once.
    """

    scanned = Signal(object)  # RunSummary, delivered in the thread of the scanner's owner

    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self._background = Background(self, WhenBusy.QUEUE, name="runs-scanner")
        self._background.done.connect(self._hand_out)

    def scan(self, paths: list[Path]) -> None:
        for path in paths:
            self._background.start(lambda _progress, path=path: _summary(path), key=path)

    def _hand_out(self, _path: Path, summary: RunSummary | None) -> None:
        if summary is not None:
            self.scanned.emit(summary)


def _summary(path: Path) -> RunSummary | None:
    """The run's summary from a scan of its files; None when its folder is gone."""
    if not path.is_dir():
        return None
    scheduler = job_run_scheduler(path)
    return scheduler.with_state(scheduler.summarize(path)) if scheduler else summarize(path)
