"""The run folder a command writes: made, then claimed (locked, and checked to hold no
earlier run, or a run to resume), or found resumable by the command that was asked.

``run``, ``cluster`` and ``launch`` claim their folders the same way, so a refusal (not a
run folder, an earlier run without ``--overwrite``, a run another command continues)
reads the same whichever command meets it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from ..problems import ProblemsError
from ..resume_rules import Layout, ResumableRun, command_refusal, resumable_run
from ..run_folder import (
    LOCK_FILE,
    RunFolderError,
    RunFolderLock,
    empty_run_folder,
    folder_entries,
    new_run_dir,
    not_a_run_folder,
    prepare_resume,
)
from .common import EXIT_FAILED, EXIT_USAGE, _err, announce_custom_code


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="empty the --out folder first when it holds an earlier run (which is lost); "
        "a folder that holds anything a run does not write is never emptied",
    )


def _make_run_folder(out: Path | None, name: str) -> tuple[Path, bool] | None:
    """The folder ``--out`` names, else a new one under the data dir, created, and whether
    this call made it (a refused run removes it again); None when it cannot be made."""
    try:
        run_dir = out or new_run_dir(name)
        created = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _err(f"distloop: cannot create the run folder: {exc}")
        return None
    return run_dir, created


def _claim_new_run_folder(run_dir: Path, *, overwrite: bool, command: str) -> RunFolderLock | None:
    """Locks the folder a new run writes, which must hold no earlier run; None: refused.

    A second run appending to a finished run's files would leave two traces in
    one; the lock comes first, so a run that is still writing is named as such.
    A folder that is not a run folder (a home folder, a thesis) is refused before
    anything is written into it, lock file included, and ``--overwrite`` never
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
        _err(f"distloop: {why}")
        return None

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

    return _claim_run_folder(run_dir, holds_no_earlier_run)


def _claim_run_to_resume(run_dir: Path) -> RunFolderLock | None:
    """Locks the folder of a run to resume and checks that it writes nowhere else."""
    return _claim_run_folder(run_dir, lambda: prepare_resume(run_dir))


def _claim_run_folder(run_dir: Path, check: Callable[[], None]) -> RunFolderLock | None:
    """Locks ``run_dir``, then ``check``s it (a RunFolderError says why not); None: refused.

    A refused folder is left as it was: without a lock file when it had none.
    """
    had_lock_file = os.path.lexists(run_dir / LOCK_FILE)
    try:
        lock = RunFolderLock.acquire(run_dir)
    except RunFolderError as exc:
        _err(f"distloop: {exc}")
        return None
    try:
        check()
    except RunFolderError as exc:
        _err(f"distloop: {exc}")
        if not had_lock_file:
            with contextlib.suppress(OSError):
                (run_dir / LOCK_FILE).unlink()
        lock.release()
        return None
    return lock


def _resumable(run_dir: Path, layout: Layout) -> ResumableRun | int:
    """The run in ``run_dir`` when ``distloop {layout} --resume`` continues it, its custom
    code announced; else the exit code, said why (``engine.resume_rules`` decides).

    A folder another command continues is a usage error (2), as a wrong option is: the
    message names the command to use.
    """
    try:
        run = resumable_run(run_dir)
    except (RunFolderError, ProblemsError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    refusal = command_refusal(run, layout)
    if refusal is not None:
        _err(f"distloop: {refusal}")
        return EXIT_FAILED if run.layout is layout else EXIT_USAGE
    return run if announce_custom_code(run.project, None) else EXIT_FAILED
