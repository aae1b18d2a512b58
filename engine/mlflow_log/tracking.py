"""Writing to an MLflow tracking store with MLflow's own client, in its batches.

``mlflow`` is an optional extra (``pip install 'distloop[mlflow]'``) and slow to import
(a second and more), so it is imported here, when a run is first logged, never when
``distloop`` starts. Every failure of the store (a server that does not answer, a write
it refuses, a URI it does not know) becomes one :class:`MlflowLogError` line; nothing
here writes to the run folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

from ..code_text import shortened
from ..run_folder import STUDY_FILE
from .records import JobRecords, MetricPoint, StudyRecords, read_job

INSTALL_HINT = "MLflow is not installed: pip install 'distloop[mlflow]'"
DEFAULT_EXPERIMENT = "Distloop"
METRICS_PER_BATCH = 1000
"""MLflow's most metrics in one ``log_batch`` (``MAX_METRICS_PER_BATCH``)."""
PARAMS_PER_BATCH = 100
"""MLflow's most params, and most tags, in one ``log_batch`` (``MAX_PARAMS_TAGS_PER_BATCH``)."""
HTTP_RETRIES = "2"
"""A tracking server that does not answer is said in seconds, not after MLflow's default
seven retries with backoff (minutes); ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` set by the user
wins."""


class MlflowLogError(Exception):
    """Logging failed: one line for the user (the run folder was not touched)."""


def mlflow_client(tracking_uri: str | None) -> Any:
    """MLflow's client for ``tracking_uri`` (MLflow's own default, ``MLFLOW_TRACKING_URI``,
    when None); MlflowLogError when MLflow is not installed."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", HTTP_RETRIES)
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise MlflowLogError(INSTALL_HINT) from None
    for name in ("mlflow", "alembic"):  # a new store's schema steps, said at INFO on stderr
        logging.getLogger(name).setLevel(logging.WARNING)
    with refused(tracking_uri):
        return MlflowClient(tracking_uri=tracking_uri)


@contextlib.contextmanager
def refused(tracking_uri: str | None) -> Iterator[None]:
    """Turns whatever the store raises into one MlflowLogError line naming it.

    MLflow raises its own exception for what the server says, ``requests``' for what the
    network does, and OSError or SQLAlchemy's for a local store: the line is the first
    of the message, whichever it is.
    """
    try:
        yield
    except MlflowLogError:
        raise
    except Exception as exc:
        where = f"MLflow at {tracking_uri}" if tracking_uri else "MLflow"
        text = str(getattr(exc, "message", "") or exc).strip()
        unreachable = _NO_CONNECTION.search(text) or _UNREACHED.search(text)
        if unreachable is not None:
            line = f"the tracking server does not answer ({unreachable.group(0).strip()})"
        else:
            line = next(iter(text.splitlines()), "") or type(exc).__name__
        raise MlflowLogError(f"{where}: {shortened(line, 300)}") from None


_NO_CONNECTION = re.compile(r"\[Errno -?\d+\][^'\"()\\]*")
"""Why ``requests`` could not reach a server, inside MLflow's long line."""
_UNREACHED = re.compile(r"Read timed out|Max retries exceeded")


def experiment_id(client: Any, name: str) -> str:
    """The experiment named ``name``, made when there is none."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    return str(client.create_experiment(name))


def log_batches(
    client: Any,
    run_id: str,
    points: Iterable[MetricPoint] = (),
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> int:
    """Logs everything in MLflow's largest batches; returns the metric values logged.

    ``points`` is read as it goes, a batch at a time: a run of millions of steps is never
    held whole.
    """
    from mlflow.entities import Metric, Param, RunTag

    for chunk in _chunks(sorted((params or {}).items()), PARAMS_PER_BATCH):
        client.log_batch(run_id, params=[Param(key, value) for key, value in chunk])
    for chunk in _chunks(sorted((tags or {}).items()), PARAMS_PER_BATCH):
        client.log_batch(run_id, tags=[RunTag(key, value) for key, value in chunk])
    count = 0
    for chunk in _chunks(points, METRICS_PER_BATCH):
        client.log_batch(
            run_id, metrics=[Metric(p.key, p.value, p.timestamp_ms, p.step) for p in chunk]
        )
        count += len(chunk)
    return count


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def log_records(
    client: Any,
    job: JobRecords,
    experiment: str,
    *,
    parent_run_id: str | None = None,
    run_id: str | None = None,
    status: str | None = None,
) -> tuple[str, int]:
    """Logs one job as one run (a new one, or ``run_id``'s, which live logging began, with
    the ``status`` its last message said); returns its id and the metric values logged."""
    if run_id is None:
        tags = {"mlflow.parentRunId": parent_run_id} if parent_run_id else None
        run = client.create_run(experiment, start_time=job.started_ms or None, tags=tags)
        run_id = str(run.info.run_id)
        log_batches(client, run_id, params=job.params())
        points = _joined(job.step_points(), job.evaluation_points(), job.system_points())
    else:  # the steps and evaluations went as the run trained
        points = job.system_points()
    count = log_batches(client, run_id, points, tags=job.tags())
    for path, where in job.artifacts():
        client.log_artifact(run_id, str(path), where or None)
    client.set_terminated(run_id, status or job.status(), end_time=job.ended_ms())
    return run_id, count


def _joined(*parts: Iterable[MetricPoint]) -> Iterator[MetricPoint]:
    for part in parts:
        yield from part


def log_folder(
    folder: Path, tracking_uri: str | None, experiment: str = DEFAULT_EXPERIMENT
) -> list[tuple[str, str, int]]:
    """Logs a finished job's folder (a study's: a parent run and a child per trial); returns
    (run name, run id, metric values logged) for each run made. Raises MlflowLogError, or
    :class:`~engine.mlflow_log.records.NotAJobFolder` before anything is logged."""
    job = read_job(folder)
    client = mlflow_client(tracking_uri)
    with refused(tracking_uri):
        where = experiment_id(client, experiment)
        if isinstance(job, JobRecords):
            run_id, count = log_records(client, job, where)
            return [(job.summary.name, run_id, count)]
        return _log_study(client, job, where)


def _log_study(client: Any, study: StudyRecords, experiment: str) -> list[tuple[str, str, int]]:
    """The study as a parent run (its settings and search space as params, each trial's
    final loss as a metric by trial number) with one child run per trial."""
    parent = client.create_run(experiment, tags={"mlflow.runName": study.name()})
    parent_id = str(parent.info.run_id)
    log_batches(
        client, parent_id, params=study.params(), tags={"distloop.study": str(study.folder)}
    )
    logged = [(study.name(), parent_id, 0)]
    finals: list[MetricPoint] = []
    now_ms = int(time.time() * 1000)
    for number, trial in study.trials:
        run_id, count = log_records(client, trial, experiment, parent_run_id=parent_id)
        client.set_tag(run_id, "distloop.trial", str(number))
        logged.append((trial.summary.name, run_id, count))
        if trial.summary.final_loss is not None:
            finals.append(MetricPoint("trial_final_loss", trial.summary.final_loss, now_ms, number))
    log_batches(client, parent_id, finals)
    client.log_artifact(parent_id, str(study.folder / STUDY_FILE))
    client.set_terminated(parent_id, "FINISHED")
    return logged
