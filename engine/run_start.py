"""One way to open a run: a request in, an opened run or a refusal out (TF-free).

The command line's flows all open their runs here: ``distloop run``, ``cluster`` and
``launch``, each new or ``--resume``d, a requeued Slurm task, a cluster started again
after a task died, and the finders' trials. So the run folder is made and claimed by one
set of rules whichever command meets it: the claim is the folder's lock, taken before
anything is written; a new run's folder holds no earlier run (``overwrite`` empties one)
and is no folder of the user's own; a resumed run writes nowhere but its folder; and a
start that is refused leaves the folder as it found it, without a lock file it did not
have. A refusal is :class:`RunRefused`, one line, which the command line prints; which
run resumes as what is :mod:`engine.resume_rules`' to say, and :func:`resumable` asks it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Project
from .engine_handle import EngineHandle
from .problems import ProblemsError
from .resume_rules import Layout as ResumeLayout
from .resume_rules import ResumableRun, command_refusal, resumable_run
from .run_folder import (
    LOCK_FILE,
    RunFolderError,
    RunFolderLock,
    empty_run_folder,
    folder_entries,
    new_run_dir,
    not_a_run_folder,
    prepare_resume,
)
from .run_handle import Layout, open_run

if TYPE_CHECKING:
    from .cluster.placement import Placement


class RunRefused(Exception):
    """Why a run was not opened, in one line. ``usage``: the request itself was wrong
    (a folder another command continues), which the command line answers with exit 2."""

    def __init__(self, why: str, *, usage: bool = False) -> None:
        super().__init__(why)
        self.usage = usage


@dataclass(frozen=True)
class RunRequest:
    """A run to open: the project, where it writes, and how it runs."""

    project: Project
    folder: Path | None = None
    """The run folder; None: a new one under the user's runs (a new run only)."""
    resume: bool = False
    """Continue the run in ``folder`` from its last checkpoint."""
    overwrite: bool = False
    """A new run's folder that holds an earlier run is emptied first (else refused)."""
    command: str = "run"
    """The command that continues a run: named when a new run's folder holds one."""
    layout: Layout = "single"
    """As :func:`engine.run_handle.open_run` takes it; ``single`` names missing peers."""
    workers: int | None = None
    """A local cluster's worker count (None: the project's)."""
    placement: Placement | None = None
    """Where a cluster's tasks run when not here (the hosts over SSH)."""


@dataclass(frozen=True)
class OpenedRun:
    """A run opened in its claimed folder: its handle (not started yet) holds the lock."""

    handle: EngineHandle
    folder: Path


def open_requested(request: RunRequest) -> OpenedRun:
    """Makes (a new run) and claims the run's folder, then opens its handle; raises
    :class:`RunRefused`, having left the folder as it was, when it cannot."""
    if request.resume:
        if request.folder is None:
            raise ValueError("a resumed run names its folder")
        folder, created = request.folder, False
        had_lock_file = os.path.lexists(folder / LOCK_FILE)
        lock = claim_to_resume(folder)
    else:
        folder, created = _made(request.folder, request.project.name)
        had_lock_file = os.path.lexists(folder / LOCK_FILE)
        lock = claim_new(folder, overwrite=request.overwrite, command=request.command)
    try:
        handle = open_run(
            request.project,
            folder,
            resume=request.resume,
            layout=request.layout,
            workers=request.workers,
            folder_lock=lock,
            name_missing_peers=request.layout == "single",
            placement=request.placement,
        )
    except ProblemsError as exc:  # a cluster this machine cannot lay out
        lock.release()
        if created:  # it holds nothing but the lock file
            shutil.rmtree(folder, ignore_errors=True)
        elif not had_lock_file:
            with contextlib.suppress(OSError):
                (folder / LOCK_FILE).unlink()
        raise RunRefused(str(exc)) from None
    return OpenedRun(handle, folder)


def resumable(run_dir: Path, layout: ResumeLayout) -> ResumableRun:
    """The run in ``run_dir`` when the command for ``layout`` continues it; else refused
    (``engine.resume_rules`` decides). A folder another command continues is a usage
    error: the refusal names the command to use."""
    try:
        run = resumable_run(run_dir)
    except (RunFolderError, ProblemsError) as exc:
        raise RunRefused(str(exc)) from None
    refusal = command_refusal(run, layout)
    if refusal is not None:
        raise RunRefused(refusal, usage=run.layout is not layout)
    return run


def _made(folder: Path | None, name: str) -> tuple[Path, bool]:
    """``folder``, else a new one under the user's runs, created, and whether this call
    made it (a refused run removes it again)."""
    try:
        run_dir = folder or new_run_dir(name)
        created = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunRefused(f"cannot create the run folder: {exc}") from None
    return run_dir, created


def claim_new(run_dir: Path, *, overwrite: bool, command: str) -> RunFolderLock:
    """Locks the folder a new run writes, which must hold no earlier run.

    A second run appending to a finished run's files would leave two traces in
    one; the lock comes first, so a run that is still writing is named as such.
    A folder that is not a run folder (a home folder, a thesis) is refused before
    anything is written into it, lock file included, and ``overwrite`` never
    empties it (:func:`engine.run_folder.not_a_run_folder`). One with a lock file is
    a run's, and may be one being set up by a run that holds it: that run is named.
    """

    def refusal() -> str | None:
        try:
            why = not_a_run_folder(run_dir)
        except OSError as exc:
            why = f"cannot read the folder {run_dir}: {exc.strerror or exc}"
        return None if why is None else f"{why}; choose an empty or a new folder for --out"

    if not os.path.lexists(run_dir / LOCK_FILE) and (why := refusal()) is not None:
        raise RunRefused(why)

    def holds_no_earlier_run() -> None:
        if (why := refusal()) is not None:
            raise RunFolderError(why)
        try:
            if not folder_entries(run_dir):
                return
            if not overwrite:
                raise RunFolderError(
                    f"the run folder {run_dir} is not empty: continue its run with "
                    f"distloop {command} --resume {run_dir}, or replace it with --overwrite"
                )
            empty_run_folder(run_dir)
        except RunFolderError:
            raise
        except OSError as exc:
            raise RunFolderError(
                f"cannot empty the run folder {run_dir}: {exc.strerror or exc}"
            ) from exc

    return _claim(run_dir, holds_no_earlier_run)


def claim_to_resume(run_dir: Path) -> RunFolderLock:
    """Locks the folder of a run to resume and checks that it writes nowhere else."""
    return _claim(run_dir, lambda: prepare_resume(run_dir))


def _claim(run_dir: Path, check: Callable[[], None]) -> RunFolderLock:
    """Locks ``run_dir``, then ``check``s it (a RunFolderError says why not).

    A refused folder is left as it was: without a lock file when it had none.
    """
    had_lock_file = os.path.lexists(run_dir / LOCK_FILE)
    try:
        lock = RunFolderLock.acquire(run_dir)
    except RunFolderError as exc:
        raise RunRefused(str(exc)) from None
    try:
        check()
    except RunFolderError as exc:
        if not had_lock_file:
            with contextlib.suppress(OSError):
                (run_dir / LOCK_FILE).unlink()
        lock.release()
        raise RunRefused(str(exc)) from None
    return lock
