"""A run's folder on disk: the project as run, every step's loss, and how it ended.

Layout (one folder per run; a cluster task gets one of its own)::

    project.json   the validated project exactly as it ran
    metrics.csv    step,loss,elapsed_s[,<named loss>,...][,replica_0,...]: appended and flushed
                   as the run goes; one column per named loss of custom step code
    eval.csv       step,val_loss,val_accuracy|val_mae: one row per evaluation, when evaluating
    status.json    created / running / finished / stopped / failed, with the error when
                   failed; the run's name, notes and tags; when it started and last resumed
    engine.log     the engine's log lines and TensorFlow's output
    checkpoints/   model, optimizer and step counter (``engine.tf.checkpoint``); in a cluster,
                   the chief's (copied to the other tasks when the run resumes)
    tensorboard/   the chief's TensorBoard event files (``engine.tf.tensorboard``)
    model.keras    the trained model, when the run finished or stopped: with evaluation, the
                   weights of the lowest val_loss; model.json says which step they are
    saved_model/   the same model for TF Serving, with training.export_saved_model
    confusion.json a classifier's confusion matrix on the validation data (with evaluation)
    classes.json   the class names in label order, for data that names them (image and text
                   folders)
    vocabulary.json  a text folder's vocabulary (the training split's words, in number order)
    .distloop.lock locked while a run writes the folder (:class:`RunFolderLock`)

The engine process writes all of it, so a run keeps its record when the GUI dies;
the parent only writes ``status.json`` when it makes the folder (the run's name)
and when the engine died too abruptly to record the end. The top level of a local
cluster's run folder is the exception: the launcher writes it, from the chief's
messages and what only it sees (``engine.cluster.top_folder`` says why); each task's
engine writes its own folder under ``tasks/``.
A run folder may come from anyone ("resume my run", "try my model"), so nothing
here follows a symbolic link when it opens, replaces or deletes, and a resume
refuses a folder with a link in it (:func:`prepare_resume`): a crafted link must not
make a run read, write or delete elsewhere. The small JSON files are read with a size
cap (:func:`load_json`); what a run folder may hold is defined once
(:func:`unknown_entries`), so ``--overwrite`` replaces a run folder and nothing else.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .fileio import FileRefused, atomic_write_text, open_bytes, open_text, read_regular_file
from .messages import PRIMARY_LOSS, secondary_losses

try:
    import fcntl
except ImportError:  # Windows: run folders are neither locked nor given a reserve there
    fcntl = None  # type: ignore[assignment]

PROJECT_FILE = "project.json"
METRICS_FILE = "metrics.csv"
EVAL_FILE = "eval.csv"
STATUS_FILE = "status.json"
LOG_FILE = "engine.log"
STACKS_FILE = "stacks.txt"
"""The engine's Python stacks, appended on SIGUSR1 (``engine.stack_dumps``)."""
MESSAGES_FILE = "messages.jsonl"
"""The run's protocol messages as JSON lines (``distloop run --record-messages``): how a
follower on another machine of a shared file system reads a Slurm task's run."""
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_INDEX_FILE = "checkpoint"
"""TensorFlow's index of a checkpoint folder: which checkpoint is the latest."""
TENSORBOARD_DIR = "tensorboard"
MODEL_FILE = "model.keras"
"""The trained model a finished or stopped run leaves (``engine.tf.model_export``)."""
MODEL_RECORD_FILE = "model.json"
"""Which weights ``model.keras`` holds: the step, and its val_loss when chosen by it."""
SAVED_MODEL_DIR = "saved_model"
"""The TF Serving export of ``model.keras``, with ``training.export_saved_model``."""
CONFUSION_FILE = "confusion.json"
"""A classifier's confusion matrix on the validation data, for ``model.keras``."""
CLASSES_FILE = "classes.json"
"""The class names of the run's data, where the data has them (image folders)."""
VOCABULARY_FILE = "vocabulary.json"
"""A text-folder run's vocabulary: prediction turns texts into the numbers training used."""
TASKS_DIR = "tasks"
"""A cluster run's task folders, one run folder each (``engine.cluster``)."""
LOCK_FILE = ".distloop.lock"
LABEL_FILE = "label.txt"
"""Where earlier versions kept a name given by the user: still read, never written."""
STATUS_READ_LIMIT = 1024 * 1024
"""The largest ``status.json`` read: a run's record with long notes is a few KiB."""
RESERVE_BYTES = 32 * 1024
"""Kept in the lock file while a run lasts: on a full disk, enough to write its status."""
METRICS_COLUMNS = ("step", PRIMARY_LOSS, "elapsed_s")
REPLICA_PREFIX = "replica_"
"""metrics.csv's per-replica columns are ``replica_0``, ``replica_1``, ... (after the named
losses, which may therefore not be so named)."""
CREATED = "created"
"""The status of a folder :func:`new_run_dir` made, before any run wrote to it."""


def replica_column(index: int) -> str:
    return f"{REPLICA_PREFIX}{index}"


def loss_columns(header: Iterable[str]) -> tuple[list[str], list[str]]:
    """A ``metrics.csv`` header's named-loss columns and its replica columns (by replica)."""
    extra = [name for name in header if name not in METRICS_COLUMNS]
    replicas = [name for name in extra if name.startswith(REPLICA_PREFIX)]
    named = [name for name in extra if not name.startswith(REPLICA_PREFIX)]
    return named, sorted(replicas, key=lambda name: int(name.removeprefix(REPLICA_PREFIX) or 0))


def format_loss(value: float) -> str:
    """The shortest text that reads back as the same float32: full precision, no noise."""
    return str(np.float32(value))


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
        _rewrite(folder / STATUS_FILE, json.dumps(record, indent=2) + "\n")
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


class RunFolderError(OSError):
    """The run folder cannot be written (full disk, no permission): the run must stop.

    Its message stands on its own, as the one line a user reads.
    """


class RunFolderBusy(RunFolderError):
    """Another run writes this folder now: two writers would interleave their steps."""

    holder: int | None = None
    """The process that holds the folder's lock, when it said so."""


def folder_write_error(run_dir: str | Path, exc: BaseException, what: str) -> RunFolderError:
    """The error to stop a run with when writing ``what`` into ``run_dir`` failed.

    A full disk names the folder and its free space, the two things a user needs
    to act on; other failures name ``what`` and the system's reason.
    """
    reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0] or type(exc).__name__
    missing = getattr(exc, "errno", None) == errno.ENOENT or "No such file or directory" in str(exc)
    if missing and not os.path.lexists(Path(run_dir) / METRICS_FILE):
        # The folder went while the run wrote it (rm -rf, a file manager): whichever write
        # meets that first, it is said the same way.
        return folder_deleted_error(run_dir, METRICS_FILE)
    if getattr(exc, "errno", None) == errno.ENOSPC or "No space left on device" in str(exc):
        try:
            free = f"{shutil.disk_usage(run_dir).free:,} bytes free"
        except OSError:
            free = "free space unknown"
        return RunFolderError(
            f"no space left on device in {run_dir} ({free}): cannot write {what}; free some "
            "space, then resume the run"
        )
    return RunFolderError(f"cannot write {what} in {run_dir}: {reason}")


def folder_deleted_error(run_dir: str | Path, gone: str) -> RunFolderError:
    """Going on would write a partial folder again at the next save, one no list shows."""
    return RunFolderError(
        f"the run folder {run_dir} was deleted while the run wrote it ({gone} is gone): "
        "the run stops"
    )


class RunFolderLock:
    """An exclusive lock on a run folder, held for as long as a run writes there.

    The parent takes it before it writes anything and hands it to the engine
    process (its descriptor, sent after the job: ``engine.child_process``), which then
    holds the same open lock file: the lock lasts until both
    have let go, so an engine that outlives its parent for a moment still holds
    it. It is ``flock`` on ``.distloop.lock`` (the file stays; the lock goes with
    the processes, even when they are killed), which holds the pid of the taker
    and keeps :data:`RESERVE_BYTES` of the disk: a run that fails on a full disk
    gives them back (:meth:`free_reserve`) to record that it failed.
    """

    def __init__(self, folder: Path, fd: int) -> None:
        self.folder = folder
        self._fd = fd

    @classmethod
    def acquire(cls, folder: Path) -> RunFolderLock:
        """Locks ``folder`` (which must exist) or raises RunFolderBusy naming who holds it."""
        path = folder / LOCK_FILE
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as exc:
            raise RunFolderError(
                f"cannot lock the run folder {folder}: {exc.strerror or exc} ({path})"
            ) from None
        if fcntl is None:
            return cls(folder, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).split(b"\n")[0].decode("ascii", "replace")
            os.close(fd)
            by = f" (process {holder})" if holder.isdigit() else ""
            busy = RunFolderBusy(
                f"the run folder {folder} is in use by another run{by}: wait for it to end, "
                "or choose another folder"
            )
            busy.holder = int(holder) if holder.isdigit() else None
            raise busy from None
        # The holder's pid is only for the message above, and the reserve only helps a
        # full disk end well: neither may stop a run from starting.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            owner = f"{os.getpid()}\n".encode()
            os.pwrite(fd, owner + bytes(RESERVE_BYTES), 0)
        return cls(folder, fd)

    @staticmethod
    def held(folder: Path) -> bool:
        """Whether a process holds ``folder``'s lock now (this one too, through another
        acquire); asks without taking it or writing to the lock file."""
        if fcntl is None:
            return False
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(folder / LOCK_FILE, flags)
        except OSError:  # no lock file: never locked; a link: no run's
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # and with it the shared lock just taken
        return False

    def handle(self) -> int | None:
        """The locked descriptor, to hand to a running engine; None where nothing is locked."""
        return self._fd if self._fd >= 0 and fcntl is not None else None

    def free_reserve(self) -> None:
        """Gives the reserved space back to the disk, for a failing run's last records."""
        if self._fd >= 0 and fcntl is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, os.pread(self._fd, 32, 0).find(b"\n") + 1)

    def release(self) -> None:
        """Lets go of this process's hold (the engine's own copy lasts until it exits).

        The reserve goes too: a run folder keeps no 32 KiB of zeros once its run ended.
        """
        if self._fd >= 0:
            self.free_reserve()
            os.close(self._fd)
            self._fd = -1


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
    STATUS_FILE: _FILE,
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
"""``worker-1``: ``engine.cluster.plan.task_dir_name``."""
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


def _open_to_append(path: Path) -> TextIO:
    """A run folder's CSV file, opened to append rows, never through a link."""
    try:
        return open_text(path, "a", newline="")
    except OSError as exc:
        raise folder_write_error(path.parent, exc, path.name) from None


def log_line(level: str, source: str, text: str) -> str:
    """One record of ``engine.log``: every line of ``text`` after the record's prefix.

    A record's text holds what users and data wrote (a data path, an error naming a
    file, a traceback): a line break in it starts a line with the prefix again, so
    no line of the log ever begins with text from outside, whatever the log is (a
    log appended to a crafted ``authorized_keys`` once gave its reader a key).
    """
    prefix = f"{time.strftime('%H:%M:%S')} {level[0].upper()} [{source}] "
    return "".join(f"{prefix}{line}\n" for line in text.splitlines() or [""])


def open_log(run_dir: Path) -> TextIO:
    """``engine.log``, opened to append records (:func:`log_line`), never through a link."""
    return open_text(run_dir / LOG_FILE, "a")


class MetricsWriter:
    """Appends step rows to ``metrics.csv`` and flushes each batch to disk.

    ``named`` are the named losses of custom step code, one column each after
    ``elapsed_s`` (a loss named ``loss`` is the ``loss`` column itself).
    """

    def __init__(self, path: Path, replicas: int | None, named: Sequence[str] = ()) -> None:
        self._path = path
        self._named = secondary_losses(named)
        self._file: TextIO = _open_to_append(path)
        fresh = os.fstat(self._file.fileno()).st_size == 0
        self._csv = csv.writer(self._file, lineterminator="\n")
        if fresh:
            extra = [*self._named, *(replica_column(i) for i in range(replicas or 0))]
            try:
                self._csv.writerow([*METRICS_COLUMNS, *extra])
                self._file.flush()
            except OSError as exc:
                raise folder_write_error(path.parent, exc, path.name) from None

    def write(
        self,
        steps: Sequence[int],
        losses: Sequence[float],
        elapsed_s: Sequence[float],
        replica_losses: Sequence[Sequence[float]] | None = None,
        named_losses: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        try:
            for i, step in enumerate(steps):
                row = [step, format_loss(losses[i]), f"{elapsed_s[i]:.6f}"]
                if named_losses is not None:
                    row += [format_loss(named_losses[name][i]) for name in self._named]
                if replica_losses is not None:
                    row += [format_loss(v) for v in replica_losses[i]]
                self._csv.writerow(row)
            self._file.flush()
        except OSError as exc:
            raise folder_write_error(
                self._path.parent,
                exc,
                f"{self._path.name} (the steps before step {steps[0]} are recorded)",
            ) from None
        if os.fstat(self._file.fileno()).st_nlink == 0:  # deleted under the run
            raise folder_deleted_error(self._path.parent, self._path.name)

    def close(self) -> None:
        # Closing flushes: on a full disk that fails again, and the write already said so.
        with contextlib.suppress(OSError):
            self._file.close()


class EvalWriter:
    """Writes ``eval.csv``: one row per evaluation, flushed at once (evaluations are rare)."""

    def __init__(self, path: Path, metric_names: Sequence[str]) -> None:
        self._path = path
        self._names = list(metric_names)
        self._file: TextIO = _open_to_append(path)
        fresh = os.fstat(self._file.fileno()).st_size == 0
        self._csv = csv.writer(self._file, lineterminator="\n")
        if fresh:
            self._write_row(["step", *self._names])

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        self._write_row([step, *(format_loss(metrics[name]) for name in self._names)])

    def _write_row(self, row: list[object]) -> None:
        try:
            self._csv.writerow(row)
            self._file.flush()
        except OSError as exc:
            raise folder_write_error(self._path.parent, exc, self._path.name) from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


def truncate_eval(run_dir: str | Path, last_step: int) -> None:
    """Keeps the evaluations up to ``last_step``: a resume redoes the later ones."""
    path = Path(run_dir) / EVAL_FILE
    if not os.path.lexists(path):
        return
    lines = _read_lines(path)
    kept = lines[:1]
    for line in lines[1:]:
        step = line.split(",", 1)[0]
        if not (step.isascii() and step.isdigit()) or int(step) > last_step:
            break
        kept.append(line)
    _rewrite(path, "".join(f"{line}\n" for line in kept))


def read_metrics(run_dir: str | Path) -> dict[str, list[float]]:
    """The metrics of a run as columns; tolerates a last line cut short by a crash."""
    return _read_columns(Path(run_dir) / METRICS_FILE)


def read_eval(run_dir: str | Path) -> dict[str, list[float]]:
    """The evaluations of a run as columns (``step`` and one per metric)."""
    return _read_columns(Path(run_dir) / EVAL_FILE)


def _read_lines(path: Path) -> list[str]:
    """A run folder's CSV file's lines (never through a link); a failure stops the run."""
    try:
        with open_text(path, "r") as handle:
            return handle.read().splitlines()
    except OSError as exc:
        raise RunFolderError(f"cannot read {path.name} in {path.parent}: {exc.strerror}") from None


def _read_columns(path: Path) -> dict[str, list[float]]:
    """The file's columns; raises OSError for one that is not CSV a run writes (a field of
    megabytes: the csv module's own error, which readers of run folders do not expect)."""
    columns: dict[str, list[float]] = {}
    with open_text(path, "r", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None) or []
            for name in header:
                columns[name] = []
            for row in reader:
                if len(row) != len(header):
                    continue
                try:
                    values = [float(v) for v in row]
                except ValueError:
                    continue
                for name, value in zip(header, values, strict=True):
                    columns[name].append(value)
        except csv.Error as exc:
            raise FileRefused(errno.EINVAL, f"is not a run's CSV file ({exc})", str(path)) from None
    return columns


def truncate_metrics(run_dir: str | Path, last_step: int) -> float:
    """Keeps the rows up to ``last_step`` (a resume redoes the rest); returns their end time.

    Rows after the checkpoint were trained by a model state the resumed run does
    not have, so they are dropped and recomputed; the file stays one clean trace.
    """
    path = Path(run_dir) / METRICS_FILE
    if not os.path.lexists(path):
        return 0.0
    lines = _read_lines(path)
    kept, elapsed = lines[:1], 0.0
    for line in lines[1:]:
        fields = line.split(",")
        try:
            step = int(fields[0])
            row_elapsed = float(fields[2])
        except (IndexError, ValueError):
            break
        if step > last_step:
            break
        kept.append(line)
        elapsed = row_elapsed
    _rewrite(path, "".join(f"{line}\n" for line in kept) if len(kept) > 1 or last_step else "")
    return elapsed


def _rewrite(path: Path, text: str) -> None:
    """Replaces a file of the run folder (never through a link); a failure stops the run."""
    try:
        atomic_write_text(path, text, follow_symlinks=False)
    except OSError as exc:
        raise folder_write_error(path.parent, exc, path.name) from None


def write_classes(run_dir: str | Path, classes: Sequence[str]) -> None:
    """``classes.json``: prediction (``distloop predict``, Try it) names the model's outputs
    by it, in label order; every strategy's chief writes it."""
    _rewrite(Path(run_dir) / CLASSES_FILE, json.dumps(list(classes)) + "\n")


def write_vocabulary(run_dir: str | Path, vocabulary: Sequence[str]) -> None:
    """``vocabulary.json``: the words a text model was trained on, in number order (0 pads,
    1 is an unknown word). Prediction reads it instead of learning the vocabulary again from
    the data folder, which may have changed (a file added) and would then number the words
    differently from training, silently."""
    _rewrite(Path(run_dir) / VOCABULARY_FILE, json.dumps([str(word) for word in vocabulary]) + "\n")


JSON_READ_LIMIT = 64 * 1024 * 1024
"""The largest run-folder JSON file read (a vocabulary of a million words fits): a shared
run folder is untrusted, and a crafted file must not take the reader's memory."""


def load_json(path: Path, limit: int = STATUS_READ_LIMIT) -> Any:
    """The value of a run folder's JSON file of at most ``limit`` bytes.

    Raises OSError when it cannot be read (missing; a link, a FIFO or a device, or
    too big: :func:`engine.fileio.read_regular_file`; nested deeper than Python's
    recursion limit, which a crafted ``status.json`` is to end the runs list or a
    prediction with a RecursionError), ValueError when it is not JSON (half written).
    """
    data = read_regular_file(path, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise FileRefused(errno.EINVAL, "nests too deeply", str(path)) from None


def _read_json(path: Path) -> Any:
    """A run-folder JSON file's value, or None when it is missing, too big, or not JSON."""
    try:
        return load_json(path, JSON_READ_LIMIT)
    except (OSError, ValueError):
        return None


def find_model_folder(run_dir: Path) -> Path | None:
    """The folder holding the run's ``model.keras``: the run's own, or its chief task's.

    A local cluster's top-level folder records the run; its chief's task folder
    (``tasks/worker-0``, ``tasks/chief-0``) holds what the chief saved.
    """
    if (run_dir / MODEL_FILE).is_file():
        return run_dir
    for name in ("chief-0", "worker-0"):
        if (run_dir / TASKS_DIR / name / MODEL_FILE).is_file():
            return run_dir / TASKS_DIR / name
    return None


def saved_model_folder(run_dir: Path) -> Path:
    """:func:`find_model_folder` for a prediction: the folder, or a RunFolderError saying
    why there is none (no such folder, a link in it, no ``model.keras`` yet)."""
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir}: no such run folder")
    refuse_links(run_dir)  # the model, classes.json and vocabulary.json: the folder's own
    folder = find_model_folder(run_dir)
    if folder is not None:
        return folder
    others = sorted(path.name for path in run_dir.glob("model-*.keras"))
    named = f" (it has {', '.join(others)}: custom code's models by name)" if others else ""
    raise RunFolderError(
        f"{run_dir}: no {MODEL_FILE} in this run folder{named}; a run saves it when it "
        "finishes or is stopped"
    )


def has_model(run_dir: Path) -> bool:
    """Whether the run left a ``model.keras`` to predict with (cheap: a few ``stat`` calls)."""
    return find_model_folder(run_dir) is not None


def class_names(folders: Sequence[Path], count: int) -> list[str]:
    """The data's class names from ``classes.json`` when it has ``count`` of them, else numbers.

    ``classes.json`` is a list of names, or an object whose ``classes`` is one.
    """
    for folder in folders:
        names = _read_json(folder / CLASSES_FILE)
        if isinstance(names, dict):
            names = names.get("classes")
        if (
            isinstance(names, list)
            and len(names) == count
            and all(isinstance(name, str) for name in names)
        ):
            return names
    return [str(index) for index in range(count)]


def saved_vocabulary(folders: Sequence[Path]) -> list[str] | None:
    """The text vocabulary the run trained with (``vocabulary.json``); None for a run that
    kept none (not a text model, or saved before runs kept it)."""
    for folder in folders:
        words = _read_json(folder / VOCABULARY_FILE)
        if isinstance(words, list) and all(isinstance(word, str) for word in words):
            return words
    return None


def read_confusion(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``confusion.json`` (classes, matrix), or None when it has none that reads."""
    folder = find_model_folder(run_dir)
    report = _read_json(folder / CONFUSION_FILE) if folder is not None else None
    matrix = report.get("matrix") if isinstance(report, dict) else None
    classes = report.get("classes") if isinstance(report, dict) else None
    if not (
        isinstance(matrix, list)
        and isinstance(classes, list)
        and len(matrix) == len(classes)
        and all(isinstance(row, list) and len(row) == len(classes) for row in matrix)
        and all(isinstance(count, int) for row in matrix for count in row)
    ):
        return None
    return report


def read_model_record(run_dir: Path) -> dict[str, Any] | None:
    """``model.json``: which step the saved weights are, and how they were chosen."""
    folder = find_model_folder(run_dir)
    record = _read_json(folder / MODEL_RECORD_FILE) if folder is not None else None
    return record if isinstance(record, dict) else None


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
    _rewrite(Path(run_dir) / STATUS_FILE, json.dumps(record, indent=2) + "\n")


def update_status(run_dir: str | Path, **details: Any) -> None:
    """Sets details of ``status.json`` (a name, notes, tags) and leaves how the run stands.

    Atomic like :func:`write_status`, and without its ``updated_at``: editing a
    run's notes does not make it longer.
    """
    record = _read_record(run_dir)
    record.update(details)
    _rewrite(Path(run_dir) / STATUS_FILE, json.dumps(record, indent=2) + "\n")


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


TAIL_BYTES = 64 * 1024
"""How much of the end of ``engine.log`` :func:`tail_log` reads: plenty for its last lines."""


def tail_log(run_dir: str | Path, lines: int = 20) -> list[str]:
    """The last lines of the engine log, for error reports after a crash."""
    try:
        with open_bytes(Path(run_dir) / LOG_FILE) as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_BYTES))
            return handle.read().decode("utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []
