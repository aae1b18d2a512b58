"""The studies among the runs, each in a line: what it searches and how far it got (Qt-free).

The window lists every study folder under its runs folder with this, at start and
whenever a trial ends, so it reads little: ``study.json``'s settings and, from
Optuna's ``study.db`` opened read-only (another process may be writing it), how
many trials ended in each state. Whether a study runs now is its folder's lock
(:meth:`engine.run_folder.RunFolderLock.held`), which the process running it holds.
A folder that cannot be read is listed with why, never left out silently.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ..code_text import shortened
from ..problems import ProblemsError
from ..run_folder import STUDY_FILE, RunFolderLock
from .runner import INTERRUPTED, STORAGE_FILE, StudyPlan, read_plan
from .storage import READ_SECONDS, StudyUnreadable, bounded_connection, check_storage, unreadable


@dataclass(frozen=True)
class StudyEntry:
    folder: Path
    plan: StudyPlan | None
    """None when ``study.json`` cannot be read (``error`` says why)."""
    ended: int = 0
    """Trials that count towards the plan: complete, pruned, or failed on their own."""
    pruned: int = 0
    failed: int = 0
    interrupted: int = 0
    """Trials the study stopped with; their values run again when it continues."""
    running: int = 0
    """Trials Optuna has as running: a study killed mid-trial left them so."""
    waiting: int = 0
    """Values queued to run again: those of trials the study stopped with."""
    held: bool = False
    """A process runs the study now (the window, or ``distloop sweep``)."""
    error: str = ""

    @property
    def planned(self) -> int:
        return self.plan.planned_trials() if self.plan is not None else 0

    @property
    def name(self) -> str:
        return self.plan.project.name if self.plan is not None else self.folder.name

    @property
    def state(self) -> str:
        """``running``, ``complete``, ``stopped`` (resumable) or ``unreadable``."""
        if self.held:
            return "running"
        if self.plan is None:
            return "unreadable"
        return "complete" if self.ended >= self.planned else "stopped"


def is_study_folder(path: Path) -> bool:
    return (path / STUDY_FILE).is_file()


def list_studies(root: Path) -> list[StudyEntry]:
    """Every study folder directly under ``root``, newest first (their names start with
    the time they were made)."""
    if not root.is_dir():
        return []
    folders = [p for p in root.iterdir() if p.is_dir() and is_study_folder(p)]
    return [read_entry(folder) for folder in sorted(folders, reverse=True)]


def read_entry(folder: Path) -> StudyEntry:
    held = RunFolderLock.held(folder)
    try:
        plan = read_plan(folder)
    except ProblemsError as exc:
        return StudyEntry(folder, None, held=held, error=str(exc).splitlines()[-1].strip())
    try:
        counts = _trial_counts(folder / STORAGE_FILE)
    except StudyUnreadable as exc:
        return StudyEntry(folder, None, held=held, error=str(exc))
    ended = counts.get("COMPLETE", 0) + counts.get("PRUNED", 0) + counts.get("FAIL", 0)
    return StudyEntry(
        folder,
        plan,
        ended=ended,
        pruned=counts.get("PRUNED", 0),
        failed=counts.get("FAIL", 0),
        interrupted=counts.get(INTERRUPTED, 0),
        running=counts.get("RUNNING", 0),
        waiting=counts.get("WAITING", 0),
        held=held,
    )


def _trial_counts(storage: Path) -> dict[str, int]:
    """Trials by Optuna's state; failed ones the study stopped with under ``interrupted``
    (and not under ``FAIL``). No storage yet: a study that asked for no trial. The file is
    checked first and every query has a deadline (:mod:`engine.study.storage`): a crafted
    one is listed as unreadable, not read without end."""
    if not storage.is_file():
        return {}
    deadline = time.monotonic() + READ_SECONDS
    check_storage(storage, deadline)
    try:
        connection = bounded_connection(storage, deadline)
        try:
            rows = connection.execute(
                "SELECT t.state, EXISTS(SELECT 1 FROM trial_user_attributes a "
                "WHERE a.trial_id = t.trial_id AND a.key = ?) FROM trials t",
                (INTERRUPTED,),
            ).fetchall()
        finally:
            connection.close()
    except (sqlite3.Error, UnicodeDecodeError) as exc:  # SQLite's message may be damaged
        raise unreadable(storage, exc) from None
    counts: dict[str, int] = {}
    for state, interrupted in rows:
        key = INTERRUPTED if interrupted and state == "FAIL" else shortened(str(state))
        counts[key] = counts.get(key, 0) + 1
    return counts
