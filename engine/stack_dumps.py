"""Where a hung cluster is stuck: every task's Python stacks, and the task not where its
peers wait.

A multi-worker cluster that hangs does so silently: every task but one sits in the
same collective, waiting for the one that is elsewhere (its data, its custom code) or
not running at all (stopped, out of memory, swapping). Each engine process writes its
stacks (``faulthandler``, every thread) into ``stacks.txt`` in its run folder on
SIGUSR1, without stopping; :func:`diagnose` reads the dumps back and names the task
whose innermost frame differs from its peers', or that did not answer.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .fileio import open_text
from .run_folder import STACKS_FILE, read_status

DUMP_SIGNAL = signal.SIGUSR1
ANSWER_S = 3.0
"""How long a task has to write its stacks after the signal."""
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')
_held: list[TextIO] = []
"""The open dump files: faulthandler writes to their descriptors for the process's life."""


def write_stacks_on_signal(run_dir: Path) -> None:
    """From now on, SIGUSR1 appends this process's stacks to ``run_dir/stacks.txt``."""
    dump = open_text(run_dir / STACKS_FILE, "a")
    _held.append(dump)
    faulthandler.register(DUMP_SIGNAL, file=dump, all_threads=True, chain=False)


@dataclass(frozen=True)
class TaskStack:
    task: str
    where: str | None
    """The innermost frame of the thread that called into the step (``file:line in f``);
    None when the task wrote no dump in time."""
    file: str = ""
    """Where the task's whole dump is: a path here, or ``host:path`` on another machine."""


def ask_for_stacks(tasks: dict[str, tuple[int, Path]]) -> list[TaskStack]:
    """Signals every task (pid, run folder), waits for its dump, reads where each stands."""

    def signal_each() -> None:
        for pid, _ in tasks.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, DUMP_SIGNAL)

    return collect_stacks({name: folder for name, (_, folder) in tasks.items()}, signal_each)


def collect_stacks(
    folders: dict[str, Path], send: Callable[[], None], answer_s: float = ANSWER_S
) -> list[TaskStack]:
    """Where each task (its run folder) stands once ``send`` has asked them all for a dump:
    ``os.kill`` here, ``scancel --signal=USR1`` for the tasks of a Slurm job (which takes
    longer: through slurmctld and each node's slurmd, and a shared file system)."""
    sizes = {name: _size(folder / STACKS_FILE) for name, folder in folders.items()}
    send()
    deadline = time.monotonic() + answer_s
    while time.monotonic() < deadline and not all(
        _size(folder / STACKS_FILE) > sizes[name] for name, folder in folders.items()
    ):
        time.sleep(0.1)
    time.sleep(0.3)  # a dump is written in pieces: let the last one end
    return [
        TaskStack(name, _innermost(folder / STACKS_FILE, sizes[name]), str(folder / STACKS_FILE))
        for name, folder in folders.items()
    ]


def ask_task_folder(folder: Path) -> dict[str, str | None]:
    """The stacks of the engine running in ``folder`` (its status.json names its pid), as
    a JSON-ready dict: ``distloop cluster --dump-task``, run on a task's host over ssh."""
    status = read_status(folder)
    pid, task = status.get("pid"), status.get("task")
    if status.get("status") != "running" or not isinstance(pid, int):
        return {"where": None, "file": None, "error": f"no run is running in {folder}"}
    name = str(task) if task else folder.name
    (stack,) = ask_for_stacks({name: (pid, folder)})
    return {"where": stack.where, "file": str((folder / STACKS_FILE).resolve()), "error": None}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _innermost(path: Path, after: int) -> str | None:
    """The first frame of the dump's main thread (faulthandler lists the most recent first).

    The main thread is the one that runs the loop; TensorFlow's and Distloop's helper
    threads wait in the same places in every task, so they tell nothing apart.
    """
    try:
        with open_text(path, "r") as dump:
            dump.seek(after)
            text = dump.read()
    except OSError:
        return None
    if not text.strip():
        return None
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", text)
    main = next((b for b in blocks if "in _run_module_as_main" in b or "in <module>" in b), None)
    for line in (main or blocks[0]).splitlines():
        frame = _FRAME.match(line)
        if frame:
            name = Path(frame["file"]).name
            return f"{name}:{frame['line']} in {frame['function']}"
    return None


def diagnose(stacks: list[TaskStack]) -> list[str]:
    """One line per task that is not where its peers are, or did not answer; a line
    saying so when they all stand together (then the wait is elsewhere: the network)."""
    silent = [s.task for s in stacks if s.where is None]
    places = Counter(s.where for s in stacks if s.where is not None)
    lines = [
        f"{task} did not answer: it is stopped, or stuck outside Python (in TensorFlow's "
        "own code, or the kernel's)"
        for task in silent
    ]
    if len(places) > 1:
        common, _ = places.most_common(1)[0]
        lines += [
            f"{s.task} is in {s.where} while its peers wait in {common}"
            for s in stacks
            if s.where is not None and s.where != common
        ]
    elif places and not silent:
        where = next(iter(places))
        lines.append(f"every task waits in {where}: look at the network between them")
    return lines
