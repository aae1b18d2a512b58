"""What a finished job's folder holds for MLflow, read without MLflow (TF-free, Qt-free).

One distributed job is one MLflow run: a local cluster's folder, a launch's and a Slurm
job's hold one folder per task, but the job's trace is the chief's (the top level of a
local cluster or a launch, the chief's task folder of a Slurm job), so the run gets the
chief's steps once and each task's own records (system metrics, environment) under the
task's name. Nothing here writes: the folder may belong to a run that is being logged
live, or to someone else.

MLflow's limits are kept here, where the values are made: a param's value is at most
:data:`MAX_PARAM_VALUE` characters (the whole project is an artifact too), a name only
the characters MLflow accepts.
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fileio import open_text
from ..run_folder import (
    EVAL_FILE,
    METRICS_FILE,
    MODEL_FILE,
    PROJECT_FILE,
    REPLICA_PREFIX,
    STUDY_FILE,
    TASKS_DIR,
    TRIALS_DIR,
    find_model_folder,
    load_json,
)
from ..run_history import RunSummary, summarize

MAX_PARAM_VALUE = 6000
"""MLflow refuses a param value longer than this (``MAX_PARAM_VAL_LENGTH``)."""
MAX_KEY = 250
"""MLflow's longest param, metric or tag name."""
MAX_TAG_VALUE = 8000
SYSTEM_METRICS_FILE = "system_metrics.csv"
"""A task's system metrics (CPU, memory, GPU), one row per sample, when recorded: a
``step`` column, when present, is the sample's step, a ``time`` column (Unix seconds) its
time; every other column is a metric."""
ENVIRONMENT_FILE = "environment.json"
"""What a task ran with (versions, packages, platform), written by each task as it starts."""
ENVIRONMENT_TAG_PREFIX = "distloop.environment."
MAX_ENVIRONMENT_TAGS = 60
"""The environment's scalar values become tags up to this many; the file is an artifact."""
_NOT_METRICS = frozenset({"step", "time", "timestamp", "elapsed_s"})
_KEY_REFUSED = re.compile(r"[^A-Za-z0-9_\-. /]")
"""MLflow's names are letters, digits, ``_ - . /`` and spaces."""
_MLFLOW_STATUS = {"finished": "FINISHED", "stopped": "FINISHED", "failed": "FAILED"}


class NotAJobFolder(ValueError):
    """The folder holds no run and no study: one line saying why."""


@dataclass(frozen=True)
class MetricPoint:
    """One value of one metric, as MLflow stores it."""

    key: str
    value: float
    timestamp_ms: int
    step: int


@dataclass(frozen=True)
class JobRecords:
    """One job's folder as one MLflow run: where each of its records is."""

    folder: Path
    """The folder the user named (the job's)."""
    trace: Path
    """The folder with the job's ``project.json``, ``metrics.csv`` and ``eval.csv``."""
    summary: RunSummary
    tasks: dict[str, Path]
    """Each task's own folder by its name (``worker-1``); a single run's is named ``""``."""

    @property
    def started_ms(self) -> int:
        return _ms(self.summary.started_at)

    def project(self) -> dict[str, Any]:
        data = load_json(self.trace / PROJECT_FILE)
        return data if isinstance(data, dict) else {}

    def params(self) -> dict[str, str]:
        return flat_params(self.project())

    def status(self) -> str:
        """MLflow's word for how the run ended (a stopped run ended as asked)."""
        return _MLFLOW_STATUS.get(self.summary.status, "KILLED")

    def ended_ms(self) -> int | None:
        started, duration = self.summary.started_at, self.summary.duration_s
        if started is None or duration is None:
            return None
        return _ms(started + duration)

    def tags(self) -> dict[str, str]:
        """The run's name, notes and tags as the runs list shows them, where it came from,
        and the chief's environment's scalar values."""
        summary = self.summary
        found = {
            "mlflow.runName": summary.name,
            "distloop.run_folder": str(self.folder),
            "distloop.status": summary.status,
        }
        if summary.strategy:
            found["distloop.strategy"] = summary.strategy
        if summary.num_replicas is not None:
            found["distloop.replicas"] = str(summary.num_replicas)
        if summary.notes:
            found["mlflow.note.content"] = summary.notes
        if summary.error:
            found["distloop.error"] = summary.error
        for tag in summary.tags:
            found[f"distloop.tag.{safe_key(tag)}"] = "true"
        environment = self.trace / ENVIRONMENT_FILE
        if not environment.is_file():
            chief = next(iter(self.tasks.values()), self.trace)
            environment = chief / ENVIRONMENT_FILE
        found.update(environment_tags(environment))
        return {safe_key(key): value[:MAX_TAG_VALUE] for key, value in found.items()}

    def step_points(self) -> Iterator[MetricPoint]:
        """Every step's loss and named losses from ``metrics.csv``, read as a stream (a run
        of 10^7 steps is a file of gigabytes), timed by the run's own clock."""
        started = self.summary.started_at or 0.0
        for row in _csv_rows(self.trace / METRICS_FILE):
            step = _int(row.get("step"))
            if step is None:
                continue
            elapsed = _float(row.get("elapsed_s"))
            when = _ms(started + (elapsed if elapsed is not None else 0.0))
            for key, text in row.items():
                if key in _NOT_METRICS or key.startswith(REPLICA_PREFIX):
                    continue  # per-replica shares stay in the folder
                value = _float(text)
                if value is not None:
                    yield MetricPoint(safe_key(key), value, when, step)

    def evaluation_points(self) -> Iterator[MetricPoint]:
        """Every evaluation's metrics (``val_loss``, ``val_accuracy``, ...) at its step."""
        when = self.ended_ms() or self.started_ms
        for row in _csv_rows(self.trace / EVAL_FILE):
            step = _int(row.get("step"))
            if step is None:
                continue
            for key, text in row.items():
                value = _float(text)
                if key != "step" and value is not None:
                    yield MetricPoint(safe_key(key), value, when, step)

    def system_points(self) -> Iterator[MetricPoint]:
        """Each task's system metrics, named ``system/<task>/<metric>``."""
        for task, folder in self.tasks.items():
            for index, row in enumerate(_csv_rows(folder / SYSTEM_METRICS_FILE)):
                step = _int(row.get("step"))
                seconds = _float(row.get("time") or row.get("timestamp"))
                when = _ms(seconds) if seconds is not None else self.started_ms
                for key, text in row.items():
                    value = _float(text)
                    if key not in _NOT_METRICS and value is not None:
                        name = safe_key("/".join(filter(None, ("system", task, key))))
                        yield MetricPoint(name, value, when, index if step is None else step)

    def artifacts(self) -> list[tuple[Path, str]]:
        """(file, folder in the run's artifacts) for the model, the project and each task's
        environment."""
        found = [(self.trace / PROJECT_FILE, "")]
        model = find_model_folder(self.trace) or find_model_folder(self.folder)
        if model is not None:
            found.append((model / MODEL_FILE, ""))
        for task, folder in self.tasks.items():
            where = "/".join(filter(None, ("environment", task)))
            found.append((folder / ENVIRONMENT_FILE, where))
        # Never a link: a crafted ``model.keras -> ~/.ssh/id_rsa`` would upload that file.
        return [(path, where) for path, where in found if path.is_file() and not path.is_symlink()]


@dataclass(frozen=True)
class StudyRecords:
    """A study folder: one parent run, one child run per trial's run folder."""

    folder: Path
    trials: list[tuple[int, JobRecords]]

    def params(self) -> dict[str, str]:
        data = load_json(self.folder / STUDY_FILE, 16 * 2**20)
        if not isinstance(data, dict):
            return {}
        return flat_params({"settings": data.get("settings"), "space": data.get("space")})

    def name(self) -> str:
        return f"study {self.folder.name}"


def read_job(folder: Path) -> JobRecords | StudyRecords:
    """The job or study in ``folder``; :class:`NotAJobFolder` says why there is none."""
    # Slurm's jobs bring the cluster exports (and YAML): a tenth of a second that every
    # ``distloop`` start would pay, since the command line imports this package.
    from ..cluster.slurm_runs import is_job_run, summarize_job

    if not folder.is_dir():
        raise NotAJobFolder(f"{folder}: no such folder")
    if (folder / STUDY_FILE).is_file():
        return _read_study(folder)
    if is_job_run(folder):  # a Slurm job's run: the chief's task folder holds its trace
        summary = summarize_job(folder, scan=False)
        return _checked(JobRecords(folder, summary.path, summary, _task_folders(folder)))
    if not (folder / PROJECT_FILE).is_file():
        raise NotAJobFolder(f"{folder}: not a run folder (it has no {PROJECT_FILE})")
    summary = summarize(folder, scan=False)
    tasks = _task_folders(folder) or {"": folder}
    return _checked(JobRecords(folder, folder, summary, tasks))


def _checked(job: JobRecords) -> JobRecords:
    """``job``, once its project reads (a crafted or half-copied one is one line here, not
    a store's failure later)."""
    try:
        job.project()
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise NotAJobFolder(f"{job.trace / PROJECT_FILE}: cannot be read ({why})") from None
    return job


def _read_study(folder: Path) -> StudyRecords:
    trials: list[tuple[int, JobRecords]] = []
    trials_dir = folder / TRIALS_DIR
    for trial_dir in sorted(trials_dir.glob("trial-*")) if trials_dir.is_dir() else []:
        number = _int(trial_dir.name.removeprefix("trial-"))
        if number is not None and (trial_dir / PROJECT_FILE).is_file():
            summary = summarize(trial_dir, scan=False)
            trial = JobRecords(trial_dir, trial_dir, summary, {"": trial_dir})
            trials.append((number, _checked(trial)))
    return StudyRecords(folder, trials)


def _task_folders(folder: Path) -> dict[str, Path]:
    tasks = folder / TASKS_DIR
    if not tasks.is_dir() or tasks.is_symlink():
        return {}
    return {
        task.name: task
        for task in sorted(tasks.iterdir())
        if task.is_dir() and not task.is_symlink()
    }


def flat_params(data: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A project's settings as MLflow params: nested sections by dotted names
    (``training.optimizer.learning_rate``), lists and scalars as JSON text cut to MLflow's
    longest value (the project file itself is an artifact, whole)."""
    found: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            found.update(flat_params(value, f"{name}."))
            continue
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        found[safe_key(name)] = text[:MAX_PARAM_VALUE]
    return found


def environment_tags(path: Path) -> dict[str, str]:
    """The scalar values of a task's ``environment.json`` as tags (``python``,
    ``tensorflow``, ``versions.numpy``...), the first :data:`MAX_ENVIRONMENT_TAGS`: enough to
    search runs by version; the package list and the rest stay in the artifact."""
    try:
        data = load_json(path, 16 * 2**20)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    found: dict[str, str] = {}
    for key, value in _scalars(data, ""):
        if len(found) >= MAX_ENVIRONMENT_TAGS:
            break
        found[f"{ENVIRONMENT_TAG_PREFIX}{key}"] = value
    return found


def _scalars(data: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    for key, value in data.items():
        if isinstance(value, Mapping):
            yield from _scalars(value, f"{prefix}{key}.")
        elif isinstance(value, str | int | float | bool):
            yield f"{prefix}{key}", str(value)


def safe_key(name: str) -> str:
    """``name`` in the characters and length MLflow accepts for a name."""
    return _KEY_REFUSED.sub("_", name)[:MAX_KEY] or "_"


def _csv_rows(path: Path) -> Iterator[dict[str, str]]:
    """The rows of a run's CSV file by column, streamed; none when there is no such file.
    A last row cut short by a crash, or any other malformed row, is skipped."""
    try:
        handle = open_text(path, "r", newline="")
    except OSError:
        return
    with handle:
        reader = csv.reader(handle)
        with contextlib.suppress(csv.Error):
            header = next(reader, None) or []
            for row in reader:
                if len(row) == len(header):
                    yield dict(zip(header, row, strict=True))


def _int(text: str | None) -> int | None:
    if text is None or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def _float(text: str | None) -> float | None:
    """A number of the file (NaN and inf too: a diverged step is logged as it was)."""
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value


def _ms(seconds: float | None) -> int:
    return int((seconds or 0.0) * 1000)
