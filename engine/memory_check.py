"""Whether a project fits the memory of the machine about to run it (TF-free).

The project's own estimate (``engine.memory_estimate``) is what any machine needs; this
module adds what only the machine that runs it can tell: the memory left to this process
(its cgroup limit included) and what loading a file source whole (``data.stream`` off)
takes, from the file itself. A run that cannot fit is refused with the numbers before it
starts, instead of meeting the OOM killer while it loads.
"""

from __future__ import annotations

import os
from pathlib import Path

from .config import DataConfig, Project
from .data_sources import source_of
from .data_sources.base import CannotCount
from .fileio import NotRegularFileError
from .memory_estimate import bytes_text, memory_estimate
from .problems import Problem


def memory_problems(
    project: Project, available_bytes: int | None = None, *, processes: int = 1
) -> list[Problem]:
    """The project as a problem when ``processes`` engines of it (a local cluster's
    tasks) cannot fit this machine's memory (or ``available_bytes``): refused with the
    estimate instead of met by the OOM killer.
    A file whose loading cannot be counted (a corrupt ``.npz`` header) is a problem too:
    its loader would fail on it as well.

    Only where the project is about to run: the same project may fit the machine
    it is meant for.
    """
    uncountable = counting_problems(project)
    if uncountable:
        return uncountable
    sources = project.data_sources()
    loaded = sum(loaded_file_bytes(source) for _, source in sources)
    available = available_memory_bytes() if available_bytes is None else available_bytes
    if available is None:
        return []
    estimate = memory_estimate(project)
    total = (estimate.total + loaded) * processes
    if total <= available:
        return []
    tasks = f" for its {processes} tasks" if processes > 1 else ""
    if loaded > estimate.total:
        streams = [where for where, _ in sources]
        return [
            Problem(
                ("data",),
                f"loading the file(s) whole needs about {bytes_text(loaded)} of memory, and "
                f"the run about {bytes_text(total)} in all{tasks}; this machine has "
                f"{bytes_text(available)} available: set {' and '.join(streams)}.stream to "
                "true to read them in batches instead",
            )
        ]
    return [
        Problem(
            estimate.loc,
            f"needs about {bytes_text(total)} of memory{tasks} ({estimate.describe()}"
            + (f", {bytes_text(loaded)} for loading data files" if loaded else "")
            + f"); this machine has {bytes_text(available)} available",
        )
    ]


def counting_problems(project: Project) -> list[Problem]:
    """The data files whose loaded size cannot be counted from them: each is damaged
    (``distloop validate`` reports them as such; its loader would fail on them too)."""
    problems = []
    for where, source in project.data_sources():
        try:
            loaded_file_bytes(source)
        except CannotCount as exc:
            problems.append(Problem((*where.split("."), "path"), str(exc)))
    return problems


def loaded_file_bytes(data: DataConfig) -> int:
    """At least what loading ``data``'s file whole holds (its source's
    :meth:`~engine.data_sources.base.DataSource.loaded_bytes`: 0 when it streams, or reads
    no file). A file that is missing or no regular file counts 0 (the data check names
    it); one that cannot be counted raises CannotCount, whatever the failure: a corrupt
    header must not end the check in a traceback."""
    try:
        return source_of(data).loaded_bytes(data)
    except (FileNotFoundError, NotRegularFileError):
        return 0
    except CannotCount:
        raise
    except Exception as exc:  # any other failure: what it says, in one line
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise CannotCount(
            f"cannot count the memory that loading {Path(data.path)} takes: {reason}"
        ) from None


def available_memory_bytes() -> int | None:
    """Memory this process may still use: the kernel's MemAvailable, or less under a
    cgroup (container) limit, since that is where the OOM killer strikes; None when
    the system does not say."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        available = None
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None
    headroom = _cgroup_headroom()
    return available if headroom is None else min(available, headroom)


def memory_cgroups() -> list[tuple[Path, Path, bool]]:
    """This process's memory cgroup folders, each with the root of its hierarchy (where a
    container sees its own limit) and whether it is cgroup v2 (else v1); empty where the
    system has none (or does not say)."""
    try:
        entries = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return []
    found = []
    for entry in entries:
        _, controllers, path = entry.split(":", 2)
        if not controllers:
            root, v2 = Path("/sys/fs/cgroup"), True
        elif "memory" in controllers.split(","):
            root, v2 = Path("/sys/fs/cgroup/memory"), False
        else:
            continue
        found.append((root / path.lstrip("/"), root, v2))
    return found


def _cgroup_headroom() -> int | None:
    """The tightest cgroup memory limit over this process, less the anonymous memory
    charged to it (page cache counts against a limit too, but the kernel reclaims it
    before it kills); None without a limit."""
    found = []
    for folder, root, v2 in memory_cgroups():
        limit, used = ("memory.max", "anon") if v2 else ("hierarchical_memory_limit", "total_rss")
        found += [_headroom(checked, limit, used) for checked in (folder, root)]
    limits = [headroom for headroom in found if headroom is not None]
    return min(limits) if limits else None


def _headroom(folder: Path, limit_name: str, used_name: str) -> int | None:
    try:
        words = (folder / "memory.stat").read_text(encoding="ascii").split()
        stat = dict(zip(words[::2], words[1::2], strict=False))
        if limit_name in stat:
            limit = stat[limit_name]
        else:
            limit = (folder / limit_name).read_text(encoding="ascii").strip()
        used = int(stat[used_name])
        limit_bytes = int(limit)
    except (OSError, KeyError, ValueError):
        return None  # no such folder, no limit ("max"), or not readable
    if not used < limit_bytes < 2**62:  # unlimited (v1 says 2**63 - 4096), or nonsense
        return None
    return limit_bytes - used
