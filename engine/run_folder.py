"""A run's folder on disk: the project as run, every step's loss, and how it ended.

Layout (one folder per run; a cluster task gets one of its own)::

    project.json   the validated project exactly as it ran
    metrics.csv    step,loss,elapsed_s[,<named loss>,...][,replica_0,...]: appended and flushed
                   as the run goes; one column per named loss of custom step code
    eval.csv       step,val_loss,val_accuracy|val_mae: one row per evaluation, when evaluating
    status.json    running / finished / stopped / failed, with the error when failed
    engine.log     the engine's log lines and TensorFlow's output
    checkpoints/   model, optimizer and step counter (``engine.tf_checkpoint``); in a cluster,
                   the chief's (copied to the other tasks when the run resumes)

The engine process writes all of it, so a run keeps its record when the GUI dies;
the parent only writes ``status.json`` when the engine died too abruptly to do so.
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from engine.fileio import atomic_write_text

PROJECT_FILE = "project.json"
METRICS_FILE = "metrics.csv"
EVAL_FILE = "eval.csv"
STATUS_FILE = "status.json"
LOG_FILE = "engine.log"
CHECKPOINT_DIR = "checkpoints"
METRICS_COLUMNS = ("step", "loss", "elapsed_s")


def format_loss(value: float) -> str:
    """The shortest text that reads back as the same float32: full precision, no noise."""
    return str(np.float32(value))


def default_runs_root() -> Path:
    """Where runs go when the user names no folder: the per-user data directory."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("distloop", appauthor=False)) / "runs"


def new_run_dir(project_name: str, root: Path | None = None) -> Path:
    """A fresh, uniquely named folder: ``20261202-130512-seed-the-guide-s-custom-loop``."""
    root = root or default_runs_root()
    slug = re.sub(r"[^a-z0-9]+", "-", project_name.lower()).strip("-")[:40] or "run"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        candidate = root / (f"{stamp}-{slug}" if n == 0 else f"{stamp}-{slug}-{n}")
        try:
            candidate.mkdir(parents=True)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"no free run folder name under {root}")


class RunFolderError(OSError):
    """The run folder cannot be written (full disk, no permission): the run must stop."""


class MetricsWriter:
    """Appends step rows to ``metrics.csv`` and flushes each batch to disk.

    ``named`` are the named losses of custom step code, one column each after
    ``elapsed_s`` (a loss named ``loss`` is the ``loss`` column itself).
    """

    def __init__(self, path: Path, replicas: int | None, named: Sequence[str] = ()) -> None:
        self._path = path
        self._named = [name for name in named if name != "loss"]
        fresh = not path.exists() or path.stat().st_size == 0
        self._file: TextIO = path.open("a", encoding="utf-8", newline="")
        self._csv = csv.writer(self._file, lineterminator="\n")
        if fresh:
            extra = [*self._named, *(f"replica_{i}" for i in range(replicas or 0))]
            try:
                self._csv.writerow([*METRICS_COLUMNS, *extra])
                self._file.flush()
            except OSError as exc:
                raise RunFolderError(f"cannot write {path}: {exc.strerror or exc}") from exc

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
            raise RunFolderError(
                f"cannot write {self._path}: {exc.strerror or exc}; the steps before "
                f"step {steps[0]} are recorded"
            ) from exc

    def close(self) -> None:
        # Closing flushes: on a full disk that fails again, and the write already said so.
        with contextlib.suppress(OSError):
            self._file.close()


class EvalWriter:
    """Writes ``eval.csv``: one row per evaluation, flushed at once (evaluations are rare)."""

    def __init__(self, path: Path, metric_names: Sequence[str]) -> None:
        self._path = path
        self._names = list(metric_names)
        fresh = not path.exists() or path.stat().st_size == 0
        self._file: TextIO = path.open("a", encoding="utf-8", newline="")
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
            raise RunFolderError(f"cannot write {self._path}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


def truncate_eval(run_dir: str | Path, last_step: int) -> None:
    """Keeps the evaluations up to ``last_step``: a resume redoes the later ones."""
    path = Path(run_dir) / EVAL_FILE
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = lines[:1]
    for line in lines[1:]:
        step = line.split(",", 1)[0]
        if not step.isdigit() or int(step) > last_step:
            break
        kept.append(line)
    atomic_write_text(path, "".join(f"{line}\n" for line in kept))


def read_metrics(run_dir: str | Path) -> dict[str, list[float]]:
    """The metrics of a run as columns; tolerates a last line cut short by a crash."""
    return _read_columns(Path(run_dir) / METRICS_FILE)


def read_eval(run_dir: str | Path) -> dict[str, list[float]]:
    """The evaluations of a run as columns (``step`` and one per metric)."""
    return _read_columns(Path(run_dir) / EVAL_FILE)


def _read_columns(path: Path) -> dict[str, list[float]]:
    columns: dict[str, list[float]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
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
    return columns


def truncate_metrics(run_dir: str | Path, last_step: int) -> float:
    """Keeps the rows up to ``last_step`` (a resume redoes the rest); returns their end time.

    Rows after the checkpoint were trained by a model state the resumed run does
    not have, so they are dropped and recomputed; the file stays one clean trace.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return 0.0
    lines = path.read_text(encoding="utf-8").splitlines()
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
    atomic_write_text(
        path, "".join(f"{line}\n" for line in kept) if len(kept) > 1 or last_step else ""
    )
    return elapsed


def write_status(run_dir: str | Path, status: str, **details: Any) -> None:
    """Records how the run stands; atomic, so a reader never sees half a status.

    Earlier details are kept (the start time, the strategy and replicas the engine
    reported), so the run history can summarize any run from this one file; an
    error is kept only while the run stays failed (a resumed run clears it).
    """
    path = Path(run_dir) / STATUS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict):
        record = {}
    if status != "failed":
        record.pop("error", None)
        record.pop("error_type", None)
    record.update(status=status, updated_at=time.time(), **details)
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")


def read_status(run_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / STATUS_FILE).read_text(encoding="utf-8"))


def tail_log(run_dir: str | Path, lines: int = 20) -> list[str]:
    """The last lines of the engine log, for error reports after a crash."""
    path = Path(run_dir) / LOG_FILE
    if not path.exists():
        return []
    return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
