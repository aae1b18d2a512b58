"""Whether a project fits the memory of the machine about to run it (TF-free).

The project's own estimate (``config.memory_estimate``) is what any machine needs; this
module adds what only the machine that runs it can tell: the memory left to this process
(its cgroup limit included) and what loading a file source whole (``data.stream`` off)
takes, from the file itself. A run that cannot fit is refused with the numbers before it
starts, instead of meeting the OOM killer while it loads.
"""

from __future__ import annotations

import ast
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
from .problems import Problem

_FLOAT32 = 4
_SAMPLE_BYTES = 1 << 20
"""How much of a CSV file's start is read to count its cells per byte."""


def memory_problems(project: Project, available_bytes: int | None = None) -> list[Problem]:
    """The project as a problem when it cannot fit this machine's memory (or
    ``available_bytes``): refused with the estimate instead of met by the OOM killer.

    Only where the project is about to run: the same project may fit the machine
    it is meant for.
    """
    available = available_memory_bytes() if available_bytes is None else available_bytes
    if available is None:
        return []
    estimate = memory_estimate(project)
    sources = project.data_sources()
    loaded = sum(loaded_file_bytes(source) for _, source in sources)
    total = estimate.total + loaded
    if total <= available:
        return []
    if loaded > estimate.total:
        streams = [where for where, _ in sources]
        return [
            Problem(
                ("data",),
                f"loading the file(s) whole needs about {bytes_text(loaded)} of memory, and "
                f"the run about {bytes_text(total)} in all; this machine has "
                f"{bytes_text(available)} available: set {' and '.join(streams)}.stream to "
                "true to read them in batches instead",
            )
        ]
    return [
        Problem(
            estimate.loc,
            f"needs about {bytes_text(total)} of memory ({estimate.describe()}"
            + (f", {bytes_text(loaded)} for loading data files" if loaded else "")
            + f"); this machine has {bytes_text(available)} available",
        )
    ]


def loaded_file_bytes(data: DataConfig) -> int:
    """At least what loading ``data``'s file whole holds (0 when it streams, or for other
    sources): an .npz's two arrays as stored plus their float32 copy; a CSV's float32 table
    twice (read in blocks, then joined; ``engine.synthetic``), its cells counted from the
    file's first MiB. A file that cannot be read counts 0: its loader names the problem."""
    try:
        if isinstance(data, NumpyData) and not data.stream:
            return _npz_bytes(Path(data.path), (data.features_key, data.labels_key))
        if isinstance(data, CsvData) and not data.stream:
            return 2 * _FLOAT32 * _csv_cells(Path(data.path))
    except (OSError, ValueError, SyntaxError, KeyError, zipfile.BadZipFile):
        return 0
    return 0


def _npz_bytes(path: Path, keys: tuple[str, str]) -> int:
    total = 0
    with zipfile.ZipFile(path) as archive:
        for key in keys:
            member = archive.getinfo(f"{key}.npy")
            with archive.open(member) as handle:
                shape = _npy_shape(handle.read(4096))
            elements = 1
            for size in shape:
                elements *= int(size)
            total += member.file_size + elements * _FLOAT32
    return total


def _npy_shape(start: bytes) -> tuple[int, ...]:
    """The array's shape from the start of an .npy file (its header is a Python dict)."""
    if not start.startswith(b"\x93NUMPY"):
        raise ValueError("not an .npy array")
    size_bytes = 2 if start[6] == 1 else 4
    length = int.from_bytes(start[8 : 8 + size_bytes], "little")
    header = start[8 + size_bytes : 8 + size_bytes + length].decode("latin1")
    shape = ast.literal_eval(header)["shape"]
    return tuple(int(size) for size in shape)


def _csv_cells(path: Path) -> int:
    """Cells in the file (less the header's), from the cells per byte of its whole lines
    in the first MiB."""
    size = path.stat().st_size
    with path.open("rb") as handle:
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
