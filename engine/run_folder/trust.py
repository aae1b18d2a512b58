"""What a run folder may hold, and the checks before a run trusts one: the trust boundary.

A run folder may come from anyone ("resume my run", "try my model"). ``--overwrite``
must replace a run folder and nothing else (:func:`unknown_entries`,
:func:`not_a_run_folder`), and a resume must not follow a crafted link or a checkpoint
index that names files elsewhere (:func:`prepare_resume`). These rules are kept
together so that what a run writes and what a run accepts are read side by side.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from ..fileio import read_regular_file
from .folder_io import RunFolderError, load_json
from .layout import (
    CHECKPOINT_DIR,
    CHECKPOINT_INDEX_FILE,
    CLASSES_FILE,
    CONFUSION_FILE,
    CREATED,
    ENVIRONMENT_FILE,
    EVAL_FILE,
    FINDER_FILE,
    LABEL_FILE,
    LOCK_FILE,
    LOG_FILE,
    LR_CURVE_FILE,
    MESSAGES_FILE,
    METRICS_FILE,
    MODEL_FILE,
    MODEL_RECORD_FILE,
    PROJECT_FILE,
    SAVED_MODEL_DIR,
    STACKS_FILE,
    STATUS_FILE,
    SYSTEM_METRICS_FILE,
    TASKS_DIR,
    TENSORBOARD_DIR,
    VOCABULARY_FILE,
)


def folder_entries(run_dir: Path) -> list[Path]:
    """What is in a run folder, the lock file aside: an empty list is a fresh folder.

    A ``status.json`` that only names the run :func:`new_run_dir` made holds no run either.
    """
    return sorted(
        p
        for p in run_dir.iterdir()
        if p.name != LOCK_FILE and not (p.name == STATUS_FILE and _only_created(p))
    )


def _only_created(status_file: Path) -> bool:
    try:
        record = load_json(status_file)
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("status") == CREATED


# --- what a run folder may contain --------------------------------------------------------

_FILE, _FOLDER = "file", "folder"
_TEMPORARY = re.compile(r"\.[0-9a-f]{8}\.(tmp|old)-.+|\..+\.[0-9a-f]{8}\.tmp")
"""A file or folder being written when its writer died: ``atomic_write_text``'s
``.<name>.<hex>.tmp`` and the model export's ``.<hex>.tmp-<name>`` / ``.<hex>.old-<name>``."""
_RUN_ENTRIES: dict[str, str] = {
    PROJECT_FILE: _FILE,
    METRICS_FILE: _FILE,
    EVAL_FILE: _FILE,
    SYSTEM_METRICS_FILE: _FILE,
    STATUS_FILE: _FILE,
    ENVIRONMENT_FILE: _FILE,
    LOG_FILE: _FILE,
    STACKS_FILE: _FILE,
    MESSAGES_FILE: _FILE,
    MODEL_FILE: _FILE,
    MODEL_RECORD_FILE: _FILE,
    CONFUSION_FILE: _FILE,
    CLASSES_FILE: _FILE,
    VOCABULARY_FILE: _FILE,
    LABEL_FILE: _FILE,
    LOCK_FILE: _FILE,
    FINDER_FILE: _FILE,
    LR_CURVE_FILE: _FILE,
    CHECKPOINT_DIR: _FOLDER,
    TENSORBOARD_DIR: _FOLDER,
    SAVED_MODEL_DIR: _FOLDER,
}
"""A single run's folder (a cluster task's too), by name: what :mod:`engine.run_folder`'s
layout lists, and ``label.txt`` (an earlier version's run name)."""
_NON_CHIEF_CHECKPOINTS = re.compile(rf"{CHECKPOINT_DIR}-tmp-.+")
"""Where a task other than the chief saves its checkpoints, removed after each save."""
_RUN_PATTERNS = {
    re.compile(r"model-.+\.keras"): _FILE,  # custom code's models, by name
    _NON_CHIEF_CHECKPOINTS: _FOLDER,
}
_CLUSTER_ENTRIES: dict[str, str] = {
    PROJECT_FILE: _FILE,
    METRICS_FILE: _FILE,
    EVAL_FILE: _FILE,
    STATUS_FILE: _FILE,
    LOG_FILE: _FILE,
    LABEL_FILE: _FILE,
    LOCK_FILE: _FILE,
    TASKS_DIR: _FOLDER,
}
"""A local cluster's top folder (``engine.cluster.top_folder``): its tasks' folders are
single run folders under ``tasks/``."""
_TASK_FOLDER = re.compile(r"[a-z]+-\d+")
"""``worker-1``: ``engine.cluster_layout.plan.task_dir_name``."""
_CHECKPOINT_ENTRY = re.compile(
    rf"{CHECKPOINT_INDEX_FILE}|ckpt-\d+\.index|ckpt-\d+\.data-\d+-of-\d+"
)
"""What TensorFlow's ``CheckpointManager`` keeps in ``checkpoints/``: the index and each
checkpoint's files."""
_CHECKPOINT_TEMPORARY = re.compile(rf"ckpt-\d+_temp|{CHECKPOINT_INDEX_FILE}\.tmp[0-9a-f]+")
"""What it writes there on the way: a checkpoint's shards before they are merged, and the
index's atomic write."""
_EVENT_FILE = re.compile(r"events\.out\.tfevents\..+")


def _kind(entry: os.DirEntry[str]) -> str | None:
    """``file``, ``folder``, or None for a link (removed as a link) and anything else."""
    if entry.is_dir(follow_symlinks=False):
        return _FOLDER
    if entry.is_file(follow_symlinks=False):
        return _FILE
    return None


def unknown_entries(run_dir: Path) -> list[str]:
    """What in ``run_dir`` no run writes, as paths inside it; empty for a run folder.

    A single run's folder, or a cluster's top folder with its tasks' folders: every
    name must be one a run writes, of the kind it writes (``metrics.csv/`` as a folder
    is not a run's), and ``checkpoints/`` and ``tensorboard/`` may hold only what
    TensorFlow writes there. A link counts as what its name says: removing it removes
    the link only. A leftover temporary of a killed run is the run's too.
    """
    cluster = (run_dir / TASKS_DIR).is_dir() and not (run_dir / TASKS_DIR).is_symlink()
    found = (
        _unknown_in(run_dir, _CLUSTER_ENTRIES, {}, "")
        if cluster
        else _unknown_in(run_dir, _RUN_ENTRIES, _RUN_PATTERNS, "")
    )
    if cluster:
        with os.scandir(run_dir / TASKS_DIR) as tasks:
            for task in tasks:
                where = f"{TASKS_DIR}/{task.name}"
                if not _TASK_FOLDER.fullmatch(task.name) or _kind(task) == _FILE:
                    found.append(where)
                elif _kind(task) == _FOLDER:
                    found += _unknown_in(Path(task.path), _RUN_ENTRIES, _RUN_PATTERNS, f"{where}/")
    return sorted(found)


def _unknown_in(
    folder: Path, names: Mapping[str, str], patterns: Mapping[re.Pattern[str], str], prefix: str
) -> list[str]:
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if _TEMPORARY.fullmatch(entry.name):
                continue
            kind = _kind(entry)
            expected = names.get(entry.name) or next(
                (wanted for pattern, wanted in patterns.items() if pattern.fullmatch(entry.name)),
                None,
            )
            if expected is None or (kind is not None and kind != expected):
                found.append(f"{prefix}{entry.name}")
            elif kind == _FOLDER and entry.name in (CHECKPOINT_DIR, TENSORBOARD_DIR):
                allowed = _CHECKPOINT_ENTRY if entry.name == CHECKPOINT_DIR else _EVENT_FILE
                with os.scandir(entry.path) as inside:
                    found += [
                        f"{prefix}{entry.name}/{item.name}"
                        for item in inside
                        if not allowed.fullmatch(item.name)
                        and not _CHECKPOINT_TEMPORARY.fullmatch(item.name)
                    ]
    return found


def not_a_run_folder(run_dir: Path) -> str | None:
    """Why ``run_dir`` is not a run folder that a new run may replace; None when it is one.

    ``--overwrite`` deletes what a run folder holds; in any other folder (a home
    folder, a thesis under git) it would delete the user's own files. An empty
    folder is a run folder, one that holds anything must have a ``status.json``
    (every run writes it as it starts) and nothing a run does not write.
    """
    unknown = unknown_entries(run_dir)
    if unknown:
        shown = ", ".join(unknown[:5]) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        )
        return f"{run_dir} is not a run folder: it holds {shown}, which no run writes"
    if folder_entries(run_dir) and not os.path.lexists(run_dir / STATUS_FILE):
        return f"{run_dir} is not a run folder: it has no {STATUS_FILE}"
    return None


def remove_path(path: Path) -> None:
    """Removes a file, a folder tree or a link (never what the link points to)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)  # follows no link inside (``rmtree.avoids_symlink_attacks``)


def empty_run_folder(run_dir: Path) -> None:
    """Removes everything a run left in ``run_dir`` (whose lock the caller holds).

    Raises RunFolderError, deleting nothing, when ``run_dir`` is not a run folder.
    """
    refusal = not_a_run_folder(run_dir)
    if refusal is not None:
        raise RunFolderError(refusal)
    for path in folder_entries(run_dir):
        remove_path(path)


# --- resuming a run folder that may come from anyone ---------------------------------------

INDEX_READ_LIMIT = 1024 * 1024
"""``checkpoints/checkpoint`` names at most ``max_to_keep`` checkpoints: a few hundred bytes."""
_INDEX_LINE = re.compile(
    r'(model_checkpoint_path|all_model_checkpoint_paths): "ckpt-\d+"'
    r"|(all_model_checkpoint_timestamps|last_preserved_timestamp): [0-9.e+-]+"
)
"""Every line TensorFlow's ``CheckpointManager`` writes into its index: checkpoints by
their plain names, relative to the index's folder, and when they were saved."""


def prepare_resume(run_dir: Path) -> None:
    """Checks a run folder before a run continues in it, and removes its stale temporaries.

    Raises RunFolderError when anything in it is a link (:func:`refuse_links`) or a
    checkpoint index names anything but its own folder's checkpoints
    (:func:`check_checkpoint_indexes`). Then the temporaries that a killed run left in
    ``run_dir`` itself are removed (:func:`remove_stale_temporaries`): the caller holds
    its lock, so whoever wrote them is gone.
    """
    refuse_links(run_dir)
    check_checkpoint_indexes(run_dir)
    remove_stale_temporaries(run_dir)


def refuse_links(run_dir: Path) -> None:
    """Raises RunFolderError naming the first symbolic link anywhere in ``run_dir``.

    A resume, a prediction and Try it read, write and delete a run folder's files by
    their names; through a link (``engine.log -> ~/.ssh/authorized_keys``,
    ``tensorboard -> /elsewhere``, ``tasks/worker-1 -> /elsewhere``) they would do it
    wherever the link points. ``run_dir`` itself may be a link: the user named it.
    """
    for folder, folders, files in os.walk(run_dir):
        folders.sort()
        for name in sorted([*folders, *files]):
            path = Path(folder) / name
            if path.is_symlink():
                raise RunFolderError(
                    f"{path} is a symbolic link: Distloop reads and writes only a run folder's "
                    "own files; replace the link with a copy of what it points to"
                )


def has_checkpoint(run_dir: Path) -> bool:
    """Whether a resume of the run continues from a checkpoint (its own, or a cluster
    task's) rather than from step 1."""
    folders = [run_dir / CHECKPOINT_DIR]
    tasks = run_dir / TASKS_DIR
    if tasks.is_dir():
        folders += [task / CHECKPOINT_DIR for task in sorted(tasks.iterdir())]
    return any((folder / CHECKPOINT_INDEX_FILE).is_file() for folder in folders)


def check_checkpoint_indexes(run_dir: Path) -> None:
    """Raises RunFolderError when a checkpoint index of the run (or of a cluster's task) names
    anything but a ``ckpt-<step>`` in its own folder.

    TensorFlow's ``CheckpointManager`` trusts its index: it restores what the index
    names and, keeping the last three, deletes the others it lists, wherever they
    are (``/elsewhere/...``, another run's checkpoints).
    """
    folders = [run_dir / CHECKPOINT_DIR]
    tasks = run_dir / TASKS_DIR
    if tasks.is_dir():
        folders += [task / CHECKPOINT_DIR for task in sorted(tasks.iterdir())]
    for folder in folders:
        index = folder / CHECKPOINT_INDEX_FILE
        if not os.path.lexists(index):
            continue
        try:
            text = read_regular_file(index, INDEX_READ_LIMIT).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "is not UTF-8 text"
            raise RunFolderError(f"cannot read the checkpoint index {index}: it {reason}") from None
        for line in text.splitlines():
            if line.strip() and not _INDEX_LINE.fullmatch(line.strip()):
                named = re.search(r'"(.*)"', line)
                what = f"names {named.group(1)!r}" if named else f"holds {line.strip()[:80]!r}"
                raise RunFolderError(
                    f"the checkpoint index {index} {what}: a run resumes only from the "
                    "ckpt-<step> checkpoints in its own checkpoints folder"
                )


def remove_stale_temporaries(run_dir: Path) -> None:
    """Removes what a killed run was writing in ``run_dir`` when it died (the caller holds
    the folder's lock, so the writer is gone): a half-saved ``.<hex>.tmp-model.keras``,
    an atomic write's ``.<name>.<hex>.tmp``, a non-chief task's ``checkpoints-tmp-<task>/``,
    and in ``checkpoints/`` a checkpoint's ``ckpt-<step>_temp/`` and the index's temporary.

    A task folder of a cluster has a lock of its own, and is cleaned by its task.
    """
    stale = [
        path
        for path in run_dir.iterdir()
        if _TEMPORARY.fullmatch(path.name) or _NON_CHIEF_CHECKPOINTS.fullmatch(path.name)
    ]
    checkpoints = run_dir / CHECKPOINT_DIR
    if checkpoints.is_dir() and not checkpoints.is_symlink():
        stale += [p for p in checkpoints.iterdir() if _CHECKPOINT_TEMPORARY.fullmatch(p.name)]
    for path in stale:
        remove_path(path)
