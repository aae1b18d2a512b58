"""``status.json``: how a run stands, and the name, notes and tags a user gave it.

The run history summarizes a run from this one file, and the engine, the parent and
the window all write it (the engine as the run goes, the parent when it makes the
folder or the engine died, the window for notes), so it is always rewritten whole and
atomically, keeping what the others wrote.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .folder_io import load_json, rewrite_file
from .layout import STATUS_FILE


def write_status(run_dir: str | Path, status: str, **details: Any) -> None:
    """Records how the run stands; atomic, so a reader never sees half a status.

    Earlier details are kept (the start time, the strategy and replicas the engine
    reported, the run's name, notes and tags), so the run history can summarize any
    run from this one file; an error is kept only while the run stays failed (a
    resumed run clears it). A resume reports a start time of its own: the run's
    ``started_at`` stays the first one, and the resume's becomes ``resumed_at``.
    """
    record = _read_record(run_dir)
    if status != "failed":
        record.pop("error", None)
        record.pop("error_type", None)
    first_start = record.get("started_at")
    record.update(status=status, updated_at=time.time(), **details)
    if isinstance(first_start, int | float) and details.get("started_at", first_start) != (
        first_start
    ):
        record.update(started_at=first_start, resumed_at=details["started_at"])
    rewrite_file(Path(run_dir) / STATUS_FILE, json.dumps(record, indent=2) + "\n")


def update_status(run_dir: str | Path, **details: Any) -> None:
    """Sets details of ``status.json`` (a name, notes, tags) and leaves how the run stands.

    Atomic like :func:`write_status`, and without its ``updated_at``: editing a
    run's notes does not make it longer.
    """
    record = _read_record(run_dir)
    record.update(details)
    rewrite_file(Path(run_dir) / STATUS_FILE, json.dumps(record, indent=2) + "\n")


def _read_record(run_dir: str | Path) -> dict[str, Any]:
    try:
        record = load_json(Path(run_dir) / STATUS_FILE)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def read_status(run_dir: str | Path) -> dict[str, Any]:
    """``status.json``; raises OSError or ValueError when it cannot be read (:func:`load_json`)."""
    record = load_json(Path(run_dir) / STATUS_FILE)
    if not isinstance(record, dict):
        raise ValueError(f"{STATUS_FILE} is not a JSON object")
    return record
