"""Every past run, read back from the run folders on disk (TensorFlow-free).

The history is the folders themselves, not a database: a run's summary comes
from its ``project.json``, ``status.json`` and ``metrics.csv``, so it survives
restarts, crashes and copying runs between machines. The run's name, notes and
tags live in its ``status.json`` too; the folder is never renamed, so a run that
is still writing is never moved under the engine's feet.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import csv_summary
from .fileio import read_regular_file
from .run_folder import (
    EVAL_FILE,
    LABEL_FILE,
    LOCK_FILE,
    METRICS_FILE,
    PROJECT_FILE,
    STATUS_FILE,
    STUDY_FILE,
    TRIALS_DIR,
    RunFolderBusy,
    RunFolderLock,
    default_runs_root,
    folder_stamp,
    load_json,
    update_status,
)

INTERRUPTED = "interrupted"
"""A run whose status.json still says running while no process of it is left: its
owner (the CLI, the window) was killed before it could record the end. It resumes
from its last checkpoint like a stopped one."""
LABEL_READ_LIMIT = 64 * 1024
UNREADABLE = "unreadable"
"""A folder whose ``status.json`` or ``project.json`` is refused (a link, a device, too big,
nested too deeply): listed with the reason as its error, summarized no further,
so one crafted folder never keeps the others from the list."""
SUBMITTED = "submitted"
"""A Slurm job's run none of whose tasks has started yet (the job waits, or never ran)."""
SLURM_JOBS_DIR = "slurm-jobs"


def slurm_jobs_root(runs_root: Path) -> Path:
    """Where the window puts its Slurm jobs' folders: beside the runs folder, not in it, so a
    job's folder (its script, output and run folder) is never read as a run of its own."""
    return runs_root.parent / SLURM_JOBS_DIR


FINDER_RUNS_DIR = "finder-runs"


def finder_runs_root(runs_root: Path) -> Path:
    """Where the learning-rate and batch-size finders' short runs go: beside the runs
    folder, so the Runs list, its comparisons and a resume never take one for a run of
    the project's own."""
    return runs_root.parent / FINDER_RUNS_DIR


@dataclass(frozen=True)
class SubmittedJob:
    """The Slurm job that runs a listed run, and what Slurm said of it last."""

    run_dir: Path
    """The job's run folder (``JOB_FOLDER/runs/<first job id>/``): what Resume resubmits."""
    job_id: str
    """The latest job that ran it (a resumed run's job is another than its folder's)."""
    held: bool = False
    """Slurm still has the job (pending, running, requeued): it goes on, or resumes, by itself."""
    note: str = ""
    """What Slurm said of the job, or why it could not be asked: the status's tooltip."""


@dataclass(frozen=True)
class RunSummary:
    """One row of the runs panel."""

    path: Path
    name: str
    started_at: float | None
    strategy: str | None
    num_replicas: int | None
    steps: int
    final_loss: float | None
    smoothed_loss: float | None
    """The mean loss of the last tenth of its steps (:mod:`engine.smoothed_loss`)."""
    duration_s: float | None
    status: str
    error: str | None
    notes: str = ""
    tags: tuple[str, ...] = ()
    best_validation: dict[str, float] | None = None
    """The evaluation with the lowest ``val_loss`` (the one ``model.keras`` keeps): its
    metrics by name, without the step."""
    pending: bool = False
    """The smoothed loss and validation are those of the files' part scanned so far: a
    scan (:func:`summarize` with ``scan``) is due."""
    pruned: tuple[int, str] | None = None
    """A study's trial its pruner stopped: the step it was judged at, and why."""
    study: Path | None = None
    """The study folder of a trial (its runs are in the study's ``trials/``)."""
    job: SubmittedJob | None = None
    """The Slurm job that runs it, for a submitted job's row: ``path`` is then the chief's
    task folder, which holds the run's records (:mod:`engine.cluster.slurm_runs`)."""

    def matches(self, text: str) -> bool:
        """Whether every word of ``text`` is in the name, a tag, the notes or the study's
        folder name (any case)."""
        study = self.study.name if self.study is not None else ""
        haystack = "\n".join([self.name, *self.tags, self.notes, study]).casefold()
        return all(word in haystack for word in text.casefold().split())


def is_run_folder(path: Path) -> bool:
    """A folder with a ``project.json`` (as a link too: it is then listed as unreadable)."""
    return os.path.lexists(path / PROJECT_FILE)


def summarize(run_dir: Path, *, scan: bool = True, name: str = "") -> RunSummary:
    """The run's summary; tolerates missing or half-written files (a crashed run).

    ``name`` is the run's name unless the user gave it one (a Slurm job's chief is named
    after the job, not after its task folder).

    Never raises: a folder whose records cannot be read is summarized as
    :data:`UNREADABLE`, naming why. Without ``scan`` it reads no file whole: the last
    step from the end of ``metrics.csv``, the smoothed loss and validation from the last
    scan of the files (``pending`` when they grew since). The window's thread
    summarizes so; a worker thread then scans (``engine.csv_summary``).
    """
    try:
        status = _read_record(run_dir / STATUS_FILE)
        project = _read_record(run_dir / PROJECT_FILE)
    except OSError as exc:
        return _unreadable(run_dir, exc)
    name = _text(status.get("name")) or _label(run_dir) or name or _derived_name(run_dir, project)
    read = csv_summary.scan if scan else csv_summary.peek
    metrics = _csv_summary(read, run_dir / METRICS_FILE, "loss")
    evaluations = _csv_summary(read, run_dir / EVAL_FILE, "val_loss")
    last = metrics.last if metrics else None
    steps, final, elapsed = 0, None, None
    # A crafted metrics.csv (no loss column, a step of inf) summarizes as no steps.
    if last and "loss" in last and math.isfinite(last.get("step", math.nan)):
        steps, final, elapsed = int(last["step"]), last["loss"], last.get("elapsed_s")
    validation = (
        {name: value for name, value in evaluations.best.items() if name != "step"}
        if evaluations and evaluations.best
        else None
    )
    pending = any(part is not None and not part.complete for part in (metrics, evaluations))
    started = _number(status.get("started_at"))
    updated = _number(status.get("updated_at"))
    # The run's one duration is its training clock (metrics.csv's elapsed_s, continued by a
    # resume, and what the engine reports at the end); wall time only for a run with no step.
    duration = elapsed
    if duration is None and started is not None and updated is not None:
        duration = updated - started
    replicas = status.get("num_replicas")
    tags = status.get("tags")
    planned = project.get("strategy")
    error = status.get("error")
    pruned_at, why = status.get("pruned_at"), status.get("pruned_reason")
    return RunSummary(
        path=run_dir,
        name=name,
        started_at=started,
        strategy=_text(status.get("strategy"))
        or (_text(planned.get("kind")) if isinstance(planned, dict) else "")
        or None,
        num_replicas=replicas if isinstance(replicas, int) else None,
        steps=steps,
        final_loss=final,
        smoothed_loss=metrics.smoothed if metrics else None,
        duration_s=duration,
        status=INTERRUPTED if _abandoned(status) else str(status.get("status", "unknown")),
        error=error if isinstance(error, str) else None,
        notes=_text(status.get("notes")),
        tags=tuple(tag for tag in tags if isinstance(tag, str)) if isinstance(tags, list) else (),
        best_validation=validation,
        pending=pending,
        pruned=(
            (pruned_at, _text(why))
            if isinstance(pruned_at, int) and not isinstance(pruned_at, bool)
            else None
        ),
        study=_study_of(run_dir),
    )


def _study_of(run_dir: Path) -> Path | None:
    """The study folder whose trial ``run_dir`` is (``STUDY/trials/trial-NNNN``), if any."""
    study = run_dir.parent.parent
    if run_dir.parent.name == TRIALS_DIR and (study / STUDY_FILE).is_file():
        return study
    return None


def _unreadable(run_dir: Path, exc: OSError) -> RunSummary:
    reason = f"{Path(exc.filename).name} {exc.strerror}" if exc.filename else str(exc)
    return RunSummary(
        path=run_dir,
        name=run_dir.name,
        started_at=None,
        strategy=None,
        num_replicas=None,
        steps=0,
        final_loss=None,
        smoothed_loss=None,
        duration_s=None,
        status=UNREADABLE,
        error=f"cannot read this run folder: {reason}",
    )


def _csv_summary(
    read: Callable[[Path, str], csv_summary.CsvSummary], path: Path, key: str
) -> csv_summary.CsvSummary | None:
    """The file's summary; None when it is missing or cannot be read."""
    try:
        return read(path, key)
    except OSError:
        return None


def _derived_name(run_dir: Path, project: dict) -> str:
    """The name of a run whose folder was made before runs had names of their own.

    The project's name and when the run started (``seed 12-03 14:05``) tell the
    runs of one project apart; a folder of another kind (``--out``) by the project's
    name, or its own.
    """
    project_name = _text(project.get("name"))
    stamp = folder_stamp(run_dir)
    if stamp is None:
        return project_name or run_dir.name
    return f"{project_name or 'run'} {stamp:%m-%d %H:%M}"


def _abandoned(status: dict) -> bool:
    """Says running, but the engine and its owner (every task of a cluster) are gone.

    Only a run started on this machine can be judged; elsewhere, and where no
    process was recorded, it may well still run.
    """
    if status.get("status") != "running" or status.get("host", socket.gethostname()) != (
        socket.gethostname()
    ):
        return False
    tasks = status.get("tasks")
    pids = [status.get("pid"), status.get("owner_pid")]
    if isinstance(tasks, dict):
        pids += [task.get("pid") for task in tasks.values() if isinstance(task, dict)]
    recorded = [pid for pid in pids if isinstance(pid, int) and pid > 0]
    return bool(recorded) and not any(_alive(pid) for pid in recorded)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists; where that cannot be asked safely, assume it does."""
    if os.name != "posix":  # os.kill(pid, 0) would end the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # a crafted status.json's pid of 2**70 too
        return False
    except OSError:  # it exists, under another user
        return True
    return True


def list_runs(root: Path | None = None, *, scan: bool = True) -> list[RunSummary]:
    """Every run folder under ``root`` (the user's runs folder by default), newest first.

    ``scan`` as for :func:`summarize`.
    """
    root = root or default_runs_root()
    if not root.is_dir():
        return []
    return newest_first([summarize(path, scan=scan) for path in _run_folders(root)])


def newest_first(runs: list[RunSummary]) -> list[RunSummary]:
    """Runs of several sources (run folders, Slurm jobs) in the one order a list shows."""
    return sorted(runs, key=lambda run: (run.started_at or 0.0, run.path.name), reverse=True)


def _run_folders(root: Path) -> Iterator[Path]:
    """The run folders in ``root``, and the trials of each study folder there."""
    for path in root.iterdir():
        if not path.is_dir():
            continue
        if is_run_folder(path):
            yield path
        elif (path / STUDY_FILE).is_file() and (path / TRIALS_DIR).is_dir():
            trials = path / TRIALS_DIR
            yield from (t for t in trials.iterdir() if t.is_dir() and is_run_folder(t))


def rename_run(run_dir: Path, name: str) -> None:
    """Gives the run another name; a run always has one, so an empty name is a ValueError."""
    if not name.strip():
        raise ValueError("a run needs a name")
    update_status(run_dir, name=name.strip())
    (run_dir / LABEL_FILE).unlink(missing_ok=True)


def set_notes(run_dir: Path, notes: str) -> None:
    update_status(run_dir, notes=notes.strip())


def set_tags(run_dir: Path, tags: str | list[str]) -> None:
    """Tags as a list or as text separated by commas; empty and repeated ones are dropped."""
    words = tags.split(",") if isinstance(tags, str) else tags
    update_status(run_dir, tags=list(dict.fromkeys(tag.strip() for tag in words if tag.strip())))


def delete_run(run_dir: Path) -> None:
    """Removes the run folder, refusing anything that is not one (a safety net).

    A run still writing the folder holds its lock: the folder is then kept, and
    RunFolderBusy names the process. Deleted under it, the run went on training
    and wrote a partial folder of its own again, missing from the runs list.
    """
    if not is_run_folder(run_dir):
        raise ValueError(f"{run_dir} is not a run folder; nothing was deleted")
    if (run_dir / LOCK_FILE).is_symlink():  # a crafted one: no run holds a link
        (run_dir / LOCK_FILE).unlink()
    try:
        lock = RunFolderLock.acquire(run_dir)
    except RunFolderBusy as exc:
        by = f" (process {exc.holder})" if exc.holder else ""
        raise RunFolderBusy(
            f"{run_dir} is still being written by its run{by}: stop the run first; nothing "
            "was deleted"
        ) from None
    try:
        shutil.rmtree(run_dir)
    finally:
        lock.release()


def _label(run_dir: Path) -> str | None:
    try:
        return read_regular_file(run_dir / LABEL_FILE, LABEL_READ_LIMIT).decode().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _read_record(path: Path) -> dict:
    """A run's JSON record; {} when it is missing, half written or not an object (a run
    that crashed). Raises OSError when it is refused (:func:`engine.run_folder.load_json`)."""
    try:
        data = load_json(path)
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
