"""Whether a project fits the memory of the machine about to run it (TF-free).

The project's own estimate (``config.memory_estimate``) is what any machine needs; this
module adds what only the machine that runs it can tell: the memory left to this process
(its cgroup limit included) and what loading a file source whole (``data.stream`` off)
takes, from the file itself. A run that cannot fit is refused with the numbers before it
starts, instead of meeting the OOM killer while it loads.
"""

from __future__ import annotations

import ast
import math
import os
import zipfile
from pathlib import Path

from .config import (
    CsvData,
    DataConfig,
    NumpyData,
    Project,
    bytes_text,
    memory_estimate,
)
from .fileio import NotRegularFileError, open_regular
from .problems import Problem

_FLOAT32 = 4
_SAMPLE_BYTES = 1 << 20
"""How much of a CSV file's start is read to count its cells per byte."""


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


class CannotCount(ValueError):
    """The memory a file takes loaded cannot be counted from it; the message says why."""


def loaded_file_bytes(data: DataConfig) -> int:
    """At least what loading ``data``'s file whole holds (0 when it streams, or for other
    sources): an .npz's two arrays as stored plus their float32 copy; a CSV's float32 table
    twice (read in blocks, then joined; ``engine.synthetic``), its cells counted from the
    file's first MiB. A file that is missing or no regular file counts 0 (the data check
    names it); one that cannot be counted raises CannotCount, whatever the failure: a
    corrupt header must not end the check in a traceback."""
    if not isinstance(data, NumpyData | CsvData) or data.stream:
        return 0
    path = Path(data.path)
    try:
        if isinstance(data, NumpyData):
            return _npz_bytes(path, (data.features_key, data.labels_key))
        return 2 * _FLOAT32 * _csv_cells(path)
    except (FileNotFoundError, NotRegularFileError):
        return 0
    except CannotCount:
        raise
    except Exception as exc:  # any other failure: what it says, in one line
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise CannotCount(f"cannot count the memory that loading {path} takes: {reason}") from None


def _npz_bytes(path: Path, keys: tuple[str, str]) -> int:
    total = 0
    with open_regular(path) as handle, zipfile.ZipFile(handle) as archive:
        names = archive.namelist()
        for key in keys:
            if f"{key}.npy" not in names:
                raise CannotCount(f"{path} has no array named {key!r}")
            member = archive.getinfo(f"{key}.npy")
            with archive.open(member) as stored:
                shape = _npy_shape(stored.read(_MAX_HEADER_BYTES), f"{path}: array {key!r}")
            total += member.file_size + min(math.prod(shape), _MAX_ELEMENTS) * _FLOAT32
    return total


_NPY_MAGIC = b"\x93NUMPY"
_MAX_ELEMENTS = 2**60
"""Counted elements stop here: past any memory, and inside what a float holds."""
_MAX_HEADER_BYTES = 10_000 + 16
"""numpy's own limit on an .npy header (``max_header_size``), with the magic and length."""


def _npy_shape(start: bytes, what: str) -> tuple[int, ...]:
    """The array's shape from the start of an .npy file (its header is a Python dict)."""
    if not start.startswith(_NPY_MAGIC) or len(start) < 10:
        raise CannotCount(f"{what} is not an .npy array")
    size_bytes = 2 if start[6] == 1 else 4
    length = int.from_bytes(start[8 : 8 + size_bytes], "little")
    header = start[8 + size_bytes : 8 + size_bytes + length]
    if len(header) < length:
        raise CannotCount(f"{what}: its header is cut short or longer than numpy reads")
    try:
        fields = ast.literal_eval(header.decode("latin1"))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise CannotCount(f"{what}: its header is not a Python dict") from None
    if not isinstance(fields, dict):
        raise CannotCount(f"{what}: its header is {type(fields).__name__}, not a dict")
    shape = fields.get("shape")
    sizes = shape if isinstance(shape, tuple) else ()
    if not isinstance(shape, tuple) or not all(
        isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in sizes
    ):
        raise CannotCount(f"{what}: its header's shape is {shape!r:.60}, not a tuple of sizes")
    return shape


def _csv_cells(path: Path) -> int:
    """Cells in the file (less the header's), from the cells per byte of its whole lines
    in the first MiB."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        sample = handle.read(_SAMPLE_BYTES)
    lines = sample.split(b"\n")
    if len(sample) == size:  # the whole file: count it
        body = [line for line in lines[1:] if line.strip()]
        return sum(line.count(b",") + 1 for line in body)
    whole = [line for line in lines[1:-1] if line.strip()]  # the last may be cut
    if not whole:
        return 0
    per_byte = sum(line.count(b",") + 1 for line in whole) / sum(len(line) + 1 for line in whole)
    return int(per_byte * (size - len(lines[0]) - 1))


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
