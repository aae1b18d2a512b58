"""Logging a run to MLflow while it trains, from the process that follows it.

A :class:`LiveLogger` listens to the run's model (``RunModel.subscribe``), as the CLI's
printer and the window's panels do, so it sees the merged stream of a whole cluster: one
run's steps, never one per worker. MLflow's calls go over the network, so they run on the
logger's own thread and the follower never waits for them: steps are sent in MLflow's
batches, at the latest every :data:`FLUSH_SECONDS`, so a crash of the follower or of the
run loses at most those seconds of what MLflow holds. When the run ends, what its folder
holds beside the steps (each task's system metrics and environment, the model, the
project) is logged from the folder and the MLflow run ends with the run's status.

A store that fails (the server went away, a write refused) is said once, in one line,
through ``on_error``, and logging stops there; the run goes on and its folder keeps all.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..messages import secondary_losses
from ..run_events import Evaluated, RunEvent, Started, StatusChanged, StepsAdded
from .records import JobRecords, MetricPoint, read_job, safe_key
from .tracking import (
    DEFAULT_EXPERIMENT,
    METRICS_PER_BATCH,
    MlflowLogError,
    experiment_id,
    log_batches,
    log_records,
    mlflow_client,
    refused,
)

FLUSH_SECONDS = 2.0
"""The longest a step waits on this side before it is sent to MLflow."""
END_WAIT_SECONDS = 60.0
"""How long the follower waits, once its run ended, for MLflow to take the next batch."""
_STARTED, _CLOSED = object(), object()


@dataclass(frozen=True)
class _Ended:
    """The run ended: MLflow's word for how (``FINISHED``, ``FAILED``), from its last message."""

    status: str


@dataclass(frozen=True)
class LiveSettings:
    """Where live logging goes: the CLI's ``--mlflow-tracking-uri``/``--mlflow-experiment``,
    the window's preferences."""

    tracking_uri: str | None = None
    experiment: str = DEFAULT_EXPERIMENT


class LiveLogger:
    """Logs the run of ``run_dir`` (the job's folder: a cluster's top level) as it trains.

    Subscribe :meth:`on_event` to the run's model before it starts, and call
    :meth:`close` when the follower is done (it waits for the last batch and the end).
    """

    def __init__(
        self, settings: LiveSettings, run_dir: Path, on_error: Callable[[str], None]
    ) -> None:
        self._settings = settings
        self._run_dir = run_dir
        self._on_error = on_error
        self._queue: queue.Queue[Any] = queue.Queue()
        self.run_id: str | None = None
        self._failed = False
        self.logged = 0
        """Metric values logged so far (steps and evaluations)."""
        self._thread = threading.Thread(target=self._work, name="mlflow-live", daemon=True)
        self._thread.start()

    def on_event(self, event: RunEvent) -> None:
        """The run model's listener: queues what MLflow gets; never waits for it."""
        if self._failed:
            return
        now = int(time.time() * 1000)
        if isinstance(event, Started):
            self._queue.put(_STARTED)
        elif isinstance(event, StepsAdded):
            named = event.named_losses
            for i, step in enumerate(event.steps):
                self._queue.put(MetricPoint("loss", event.losses[i], now, step))
                for name in secondary_losses(named):
                    self._queue.put(MetricPoint(safe_key(name), named[name][i], now, step))
        elif isinstance(event, Evaluated):
            for name, value in event.metrics.items():
                self._queue.put(MetricPoint(safe_key(name), value, now, event.step))
        elif isinstance(event, StatusChanged) and event.outcome is not None:
            failed = event.outcome.failure is not None
            self._queue.put(_Ended("FAILED" if failed else "FINISHED"))

    @property
    def failed(self) -> bool:
        """The store failed: logging stopped (and said why, once)."""
        return self._failed

    def close(self, timeout_s: float = END_WAIT_SECONDS) -> None:
        """Waits for what is queued to reach MLflow (the end too, if the run ended), as long
        as MLflow takes another batch within ``timeout_s``: a fast run may leave a backlog of
        many batches, a store that hangs is not waited for. A run whose end never came (the
        follower gave up on it) ends in MLflow as killed."""
        self._queue.put(_CLOSED)
        while True:
            before = self.logged
            self._thread.join(timeout_s)
            if not self._thread.is_alive() or self.logged == before:
                return

    # --- the logger's thread --------------------------------------------------------------

    def _work(self) -> None:
        try:
            client = mlflow_client(self._settings.tracking_uri)  # the slow import, here
            with refused(self._settings.tracking_uri):
                self._log(client)
        except MlflowLogError as exc:
            self._failed = True
            self._on_error(f"MLflow live logging stopped: {exc}")

    def _log(self, client: Any) -> None:
        if self._queue.get() is not _STARTED:
            return  # closed before the run started: nothing to log
        where = experiment_id(client, self._settings.experiment)
        job = self._job()
        run = client.create_run(where, start_time=int(time.time() * 1000), tags=job.tags())
        self.run_id = run_id = str(run.info.run_id)
        log_batches(client, run_id, params=job.params())
        batch: list[MetricPoint] = []
        deadline = time.monotonic() + FLUSH_SECONDS
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                item = None
            if isinstance(item, MetricPoint):
                batch.append(item)
            due = time.monotonic() >= deadline
            last = isinstance(item, _Ended) or item is _CLOSED
            if batch and (due or last or len(batch) >= METRICS_PER_BATCH):
                self.logged += log_batches(client, run_id, batch)
                batch = []
            if due:
                deadline = time.monotonic() + FLUSH_SECONDS
            if isinstance(item, _Ended):
                log_records(client, self._job(), where, run_id=run_id, status=item.status)
                return
            if item is _CLOSED:
                client.set_terminated(run_id, "KILLED")
                return

    def _job(self) -> JobRecords:
        job = read_job(self._run_dir)
        if not isinstance(job, JobRecords):  # a folder a run writes is no study's
            raise MlflowLogError(f"{self._run_dir} is a study's folder, not a run's")
        return job
