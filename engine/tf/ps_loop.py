"""ParameterServerStrategy's custom loop, as TensorFlow's tutorial writes it (imports TF).

A parameter-server cluster is asymmetric. ``ps`` tasks hold the variables and
``worker`` tasks run steps; both only run a ``tf.distribute.Server``
(:func:`serve`). The ``chief`` is the coordinator (:func:`coordinate`): it creates
the model under ``strategy.scope()`` (the variables land on the ps tasks), builds
a dataset on every worker with ``ClusterCoordinator.create_per_worker_dataset``,
and ``schedule``s steps that whichever worker is free runs, asynchronously. Each
step's loss comes back as a ``RemoteValue``; they are fetched in the order the
steps were scheduled, so the trace is numbered like a synchronous run's and goes
through the same reporter, channel and ``metrics.csv``.

Training is asynchronous, so a parameter-server trace does not repeat bit for
bit; op determinism is therefore not enabled. Every worker reads the whole
dataset, repeated, as in the tutorial (the coordinator cannot tell a worker its
index); the run lasts exactly the project's steps (or epochs' worth of steps).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from ..channel import Channel
from ..config import Project, uneven_batch_warnings
from ..messages import RunFinished, RunStarted
from ..reporting import StepReporter
from ..run_folder import METRICS_FILE, MetricsWriter
from ..tf_config import NO_RESUME, parse_address
from .data import build_training_data, write_prediction_files
from .loop import StepRunner
from .model import build_loss, build_model, build_optimizer, set_precision
from .model_export import ModelKeeper
from .strategy import build_strategy, configure_devices

IN_FLIGHT_PER_WORKER = 4
"""Steps scheduled ahead per worker: enough to keep every worker busy while the
coordinator fetches losses, few enough that a stop request ends the run quickly."""
PROBE_INTERVAL_S = 1.0
STOP_CHECK_S = 0.1
COORDINATOR_GONE_S = 10.0
"""A server ends once the coordinator it has seen stops answering for this long."""


def train_parameter_server(
    project: Project,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
    *,
    resume: bool = False,
) -> RunFinished:
    """Runs this process's part of a parameter-server cluster, as its TF_CONFIG says."""
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("ps", "worker"):
        return serve(resolver, run_dir, channel, should_stop)
    if resume:
        raise ValueError(NO_RESUME["parameter_server"])
    workers = len(resolver.cluster_spec().as_dict().get("worker", []))
    return coordinate(project, workers, run_dir, channel, should_stop)


def coordinate(
    project: Project,
    workers: int,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
) -> RunFinished:
    """The chief's loop: schedule steps on the workers, fetch and report their losses."""
    began = time.perf_counter()
    training = project.training
    configure_devices(project.strategy, memory_growth=training.gpu_memory_growth)
    set_precision(training.mixed_precision)
    tf.keras.utils.set_random_seed(training.seed)

    strategy = build_strategy(project.strategy)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = build_model(project.model, training.seed)
        optimizer = build_optimizer(
            project.optimizer,
            model.trainable_variables,
            loss_scale=training.mixed_precision == "mixed_float16",
        )
    loss_object = build_loss(project.loss)

    data = build_training_data(project)
    total_steps = data.total_steps

    def dataset_fn(_input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        # Built on each worker; repeated so that no worker runs dry while others still
        # have scheduled steps (the coordinator decides how many steps run).
        return build_training_data(project).dataset.repeat()

    @tf.function
    def per_worker_dataset_fn() -> Any:
        return strategy.distribute_datasets_from_function(dataset_fn)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    runner = StepRunner(
        strategy,
        model,
        optimizer,
        loss_object,
        project.data.global_batch_size,
        per_replica_losses=False,
        to_replicas=lambda inputs: inputs,  # each worker's dataset is already its replica's
        jit_compile=training.jit_compile,
    )

    @tf.function
    def scheduled_step(iterator: Any) -> tf.Tensor:
        loss, _ = runner.run_one(next(iterator))
        return loss

    warnings = data.warnings + uneven_batch_warnings(project, 1) + _ignored_settings(project)
    for note in warnings:
        channel.log(note, level="warning")
    channel.send(
        RunStarted(
            strategy=type(strategy).__name__,
            strategy_kind=project.strategy.kind,
            num_replicas=strategy.num_replicas_in_sync,
            devices=[f"/job:worker/replica:0/task:{i}" for i in range(workers)],
            tensorflow_version=tf.__version__,
            run_dir=str(run_dir) if run_dir else None,
            total_steps=total_steps,
            warnings=warnings,
        )
    )

    if run_dir is not None:
        write_prediction_files(run_dir, project, data)
    metrics = MetricsWriter(run_dir / METRICS_FILE, None) if run_dir else None
    reporter = StepReporter(channel, metrics, stop_on_nan=training.stop_on_nan)
    in_flight: deque[tuple[int, Any]] = deque()
    next_step, stopped = 1, False
    start = time.perf_counter()
    try:
        while True:
            if next_step <= total_steps and not stopped and should_stop():
                stopped = True
            while (
                not stopped
                and next_step <= total_steps
                and len(in_flight) < IN_FLIGHT_PER_WORKER * workers
            ):
                remote = coordinator.schedule(scheduled_step, args=(per_worker_iterator,))
                in_flight.append((next_step, remote))
                next_step += 1
            if not in_flight:
                break
            step, remote = in_flight.popleft()
            reporter.record(step, remote.fetch(), None, time.perf_counter() - start)
    finally:
        reporter.flush()
        if metrics is not None:
            metrics.close()
    if run_dir is not None and reporter.last_step:
        # The coordinator reads the variables from the ps tasks: it alone saves the model.
        ModelKeeper(run_dir, {"model": model}, project, channel, chief=True, resumed_at=None).save(
            reporter.last_step
        )
    return RunFinished(
        status="stopped" if stopped else "finished",
        last_step=reporter.last_step or 0,
        final_loss=reporter.last_loss,
        elapsed_s=time.perf_counter() - began,
    )


def _ignored_settings(project: Project) -> list[str]:
    """Settings of synchronous loops that a parameter-server run does not apply."""
    training = project.training
    notes = []
    if training.per_replica_losses:
        notes.append(
            "training.per_replica_losses is ignored: each parameter-server step runs on "
            "one worker, so its loss is the only one"
        )
    if training.steps_per_execution > 1:
        notes.append(
            "training.steps_per_execution is ignored: the coordinator schedules one step "
            "per function call"
        )
    if training.checkpoint_every is not None:
        notes.append(
            "training.checkpoint_every is ignored: parameter_server runs keep no checkpoint"
        )
    if training.input_distribution != "auto":
        notes.append(
            "training.input_distribution is ignored: each parameter-server worker reads "
            "its own dataset (distribute_datasets_from_function)"
        )
    return notes


def serve(
    resolver: tf.distribute.cluster_resolver.ClusterResolver,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
) -> RunFinished:
    """A ps or worker task: serve the coordinator until it is done, or until told to stop."""
    began = time.perf_counter()
    cluster = resolver.cluster_spec()
    server = tf.distribute.Server(
        cluster,
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    chief = cluster.task_address("chief", 0)
    channel.send(
        RunStarted(
            strategy="ParameterServerStrategy",
            strategy_kind="parameter_server",
            num_replicas=0,
            devices=[device.name for device in tf.config.list_logical_devices()],
            tensorflow_version=tf.__version__,
            run_dir=str(run_dir) if run_dir else None,
            total_steps=None,
            serving=server.target,
        )
    )
    channel.log(
        f"{resolver.task_type}:{resolver.task_id} serves {server.target} for the coordinator "
        f"chief:0 at {chief}; it ends when the coordinator is gone"
    )
    watch = CoordinatorWatch(chief)
    status = "stopped"
    next_probe = time.monotonic() + PROBE_INTERVAL_S
    while not should_stop():
        time.sleep(STOP_CHECK_S)
        if time.monotonic() < next_probe:
            continue
        next_probe = time.monotonic() + PROBE_INTERVAL_S
        if watch.gone():
            channel.log(f"the coordinator chief:0 at {chief} is gone; this server ends")
            status = "finished"
            break
    return RunFinished(
        status=status, last_step=0, final_loss=None, elapsed_s=time.perf_counter() - began
    )


class CoordinatorWatch:
    """Tells when the coordinator is done: it answered once, then stopped answering.

    ``tf.distribute.Server.join`` never returns, yet the servers of a cluster
    started by hand (``distloop run --task ps:0``) should end with the run. The
    coordinator listens on its TF_CONFIG address while it trains, so a plain TCP
    connect says whether it is still there. A coordinator not seen yet may still be
    starting, so the watch waits for it indefinitely.
    """

    def __init__(self, address: str, gone_after_s: float = COORDINATOR_GONE_S) -> None:
        self._host, self._port = parse_address(address)
        self._gone_after_s = gone_after_s
        self._last_seen: float | None = None

    def gone(self) -> bool:
        now = time.monotonic()
        if self._answers():
            self._last_seen = now
            return False
        return self._last_seen is not None and now - self._last_seen >= self._gone_after_s

    def _answers(self) -> bool:
        with contextlib.suppress(OSError):
            socket.create_connection((self._host, self._port), timeout=PROBE_INTERVAL_S).close()
            return True
        return False
