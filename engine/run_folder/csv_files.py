"""``metrics.csv`` and ``eval.csv``: every step's loss and every evaluation, written and read.

They are the only files a run appends to while it trains (flushed each batch, so a
crash loses nothing written), the ones a resume cuts back to its checkpoint, and the
ones every view reads: their columns and number format are defined once, here.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

import numpy as np

from ..fileio import FileRefused, open_text
from ..messages import PRIMARY_LOSS, secondary_losses
from .folder_io import RunFolderError, folder_deleted_error, folder_write_error, rewrite_file
from .layout import EVAL_FILE, METRICS_FILE

METRICS_COLUMNS = ("step", PRIMARY_LOSS, "elapsed_s")
REPLICA_PREFIX = "replica_"
"""metrics.csv's per-replica columns are ``replica_0``, ``replica_1``, ... (after the named
losses, which may therefore not be so named)."""


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


def _open_to_append(path: Path) -> TextIO:
    """A run folder's CSV file, opened to append rows, never through a link."""
    try:
        return open_text(path, "a", newline="")
    except OSError as exc:
        raise folder_write_error(path.parent, exc, path.name) from None


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
    rewrite_file(path, "".join(f"{line}\n" for line in kept))


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
    rewrite_file(path, "".join(f"{line}\n" for line in kept) if len(kept) > 1 or last_step else "")
    return elapsed
