"""What every command shares: the exit codes, the error line, loading a project, naming
an unknown example, the checks before a run starts on this machine, and announcing the
custom code a run will execute.

One module that each command module imports, so no command module imports another
for these, and an exit code or a message's form is defined once.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from ..code_text import printable
from ..config import Project
from ..examples import example_names
from ..problems import ProblemsError
from ..project_file import load_project
from ..run_checks import pre_run_problems
from ..user_code import UserCodeError, fingerprint

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


EXIT_TERMINATED = 128 + signal.SIGTERM


def _err(text: str) -> None:
    """A notice on stderr, its terminal escapes, carriage returns and bidi marks escaped
    (``code_text.printable``): much of what it quotes comes from files and hosts that
    may be anyone's, and none of it may rewrite what the terminal shows."""
    print(printable(text, lines=True), file=sys.stderr, flush=True)


def _load(path: Path) -> Project | None:
    try:
        return load_project(path).resolve_paths(path.parent)
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return None


def _no_example(name: str) -> str:
    return f"distloop: no example named {name!r}; examples: {', '.join(example_names())}"


def _may_start_here(project: Project, source: str, *, processes: int = 1) -> bool:
    """Whether the run's checks (``engine.run_checks``) let ``project`` start on this
    machine; says why not. Checked before the run folder is made and before any
    TensorFlow start, so a refused run costs seconds and leaves nothing behind."""
    problems = pre_run_problems(project, processes=processes)
    if problems:
        _err(f"distloop: {ProblemsError(problems, source)}")
    return not problems


def announce_custom_code(project: Project, project_dir: Path | None) -> bool:
    """Says which code the run will execute, before it does; False when it cannot be read.

    A project may come from anyone and its custom code runs with the user's rights.
    There is no question to answer (the command runs unattended too): the path and
    hash are on record, and a file from outside the project's folder is pointed out.
    ``project_dir`` is None for a run folder's copy, whose paths are all absolute.
    """
    if project.custom_code is None:
        return True
    try:
        code = fingerprint(project.custom_code.path, project_dir)
    except UserCodeError as exc:
        _err(f"distloop: {exc}")
        return False
    _err(f"distloop: running custom step code {code.path} (sha256 {code.sha256})")
    if code.outside_project:
        _err(
            f"distloop: warning: {code.path} is outside the project's folder "
            f"{code.project_dir}; run it only if you trust it"
        )
    return True
