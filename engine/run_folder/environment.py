"""``environment.json``: what made the run (``engine.run_environment`` collects it).

Each engine writes its own as it starts; a cluster's top level has none, its tasks'
folders do, and the chief's (the first task folder by name: ``chief-0``, else
``worker-0``) speaks for the run where one is read back, as its steps do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .folder_io import load_json, rewrite_file
from .layout import ENVIRONMENT_FILE, TASKS_DIR

ENVIRONMENT_READ_LIMIT = 1 << 20
"""The largest ``environment.json`` read: a few hundred packages and a capped diff are
well under 100 KiB."""


def write_environment(run_dir: str | Path, record: dict[str, Any]) -> None:
    """Writes the run's record, atomically (a failure stops the run, as any write here)."""
    rewrite_file(Path(run_dir) / ENVIRONMENT_FILE, json.dumps(record, indent=2) + "\n")


def read_environment(run_dir: str | Path) -> dict[str, Any]:
    """The run's record: its own, or its chief task's in a cluster's folder. Raises OSError
    when there is none (a run of an earlier Distloop) or it cannot be read, ValueError when
    it is not a JSON object."""
    folder = Path(run_dir)
    path = folder / ENVIRONMENT_FILE
    if not path.exists() and (folder / TASKS_DIR).is_dir():
        tasks = sorted(
            entry for entry in (folder / TASKS_DIR).iterdir() if (entry / ENVIRONMENT_FILE).exists()
        )
        path = tasks[0] / ENVIRONMENT_FILE if tasks else path
    record = load_json(path, ENVIRONMENT_READ_LIMIT)
    if not isinstance(record, dict):
        raise ValueError(f"{ENVIRONMENT_FILE} is not a JSON object")
    return record
