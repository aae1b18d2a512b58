"""Where runs go and what a new run folder is called.

A folder's name must be unique and sort in the order runs were made, while the name
a user reads (``seed #3``) must be short and counted per project: both are decided
here, once, when the folder is made.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path

from .folder_io import load_json, rewrite_file
from .layout import CREATED, STATUS_FILE


def default_runs_root() -> Path:
    """Where runs go when the user names no folder: the per-user data directory."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("distloop", appauthor=False)) / "runs"


def new_run_dir(project_name: str, root: Path | None = None) -> Path:
    """A fresh, uniquely named folder: ``20261202-130512-seed-the-guide-s-custom-loop``.

    The run's readable name (``seed #3``: the project's name and a counter over the
    runs of that project under ``root``) is decided here, once, and kept in a
    ``status.json`` that says ``created``: the folder name is unique but unreadable,
    and the project's name alone is the same for every run of a project.
    """
    root = root or default_runs_root()
    folder = new_folder(project_name, root)
    try:
        record = {"status": CREATED, "name": _next_run_name(project_name, root, folder)}
        rewrite_file(folder / STATUS_FILE, json.dumps(record, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def new_folder(name: str, root: Path) -> Path:
    """A fresh, empty folder under ``root`` named by the time and ``name``
    (``20261202-130512-seed-study``): unique, and in the order folders were made."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "run"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        candidate = root / (f"{stamp}-{slug}" if n == 0 else f"{stamp}-{slug}-{n}")
        try:
            candidate.mkdir(parents=True)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"no free folder name under {root}")


def _next_run_name(project_name: str, root: Path, run_dir: Path) -> str:
    """``<project name> #<n>``, one past the highest number a run of that project has."""
    pattern = re.compile(rf"{re.escape(project_name)} #(\d+)")
    highest = 0
    for folder in root.iterdir():
        if folder == run_dir or not folder.is_dir():
            continue
        try:
            record = load_json(folder / STATUS_FILE)
        except (OSError, ValueError):  # another run's unreadable status names no run
            continue
        name = record.get("name") if isinstance(record, dict) else None
        match = pattern.fullmatch(name) if isinstance(name, str) else None
        if match:
            highest = max(highest, int(match.group(1)))
    return f"{project_name} #{highest + 1}"


def folder_stamp(run_dir: Path) -> datetime | None:
    """When :func:`new_run_dir` made the folder, read from its name; None for other names."""
    match = re.match(r"(\d{8}-\d{6})-", run_dir.name)
    if match is None:
        return None
    try:
        return datetime.strptime(match.group(1), "%Y%m%d-%H%M%S")
    except ValueError:
        return None
