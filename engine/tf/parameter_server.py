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
import itertools
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from ..channel import Channel
from ..config import Project
from ..loop import LoopHook, LoopPlan, run_loop
from ..loop_hooks import KeepModel, Reporting, StopRequest
from ..messages import RunFinished, RunStarted
from ..reporting import StepReporter
from ..run_folder import METRICS_FILE, MetricsWriter
from ..tf_config import NO_RESUME, parse_address
from .data import build_training_data
from .model_export import ModelKeeper
from .prepare import announce, prepare
from .step_runners import StepRunner

IN_FLIGHT_PER_WORKER = 4
"""Steps scheduled ahead per worker (:class:`ScheduledSteps`)."""
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
    return coordinate(project, run_dir, channel, should_stop)


def coordinate(
    project: Project,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
) -> RunFinished:
    """The chief's run: the loop of every run, its steps scheduled on the workers."""
    began = time.perf_counter()
    prepared = prepare(project, run_dir, channel, resume=False)
    strategy = prepared.strategy
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    def dataset_fn(_input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        # Built on each worker; repeated so that no worker runs dry while others still
        # have scheduled steps (the coordinator decides how many steps run).
        return build_training_data(project).dataset.repeat()

    @tf.function
    def per_worker_dataset_fn() -> Any:
        return strategy.distribute_datasets_from_function(dataset_fn)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    step = StepRunner(
        strategy,
        prepared.models["model"],
        prepared.optimizers["model"],
        prepared.loss_object,
        project.data.global_batch_size,
        per_replica_losses=False,
        to_replicas=lambda inputs: inputs,  # each worker's dataset is already its replica's
        jit_compile=project.training.jit_compile,
    )
    total_steps = prepared.data.total_steps
    workers = len(prepared.started.devices)  # one device per worker task
    runner = ScheduledSteps(
        coordinator, step, in_flight=IN_FLIGHT_PER_WORKER * workers, steps=total_steps
    )
    announce(prepared, project, run_dir, channel)

    metrics = MetricsWriter(run_dir / METRICS_FILE, None) if run_dir else None
    reporter = StepReporter(channel, metrics, stop_on_nan=project.training.stop_on_nan)
    hooks: list[LoopHook] = [Reporting(reporter, channel)]
    if run_dir is not None:
        # The coordinator reads the variables from the ps tasks: it alone saves the model.
        keeper = ModelKeeper(
            run_dir, prepared.models, project, channel, chief=True, resumed_at=None
        )
        hooks.append(KeepModel(keeper))
    hooks.append(StopRequest(should_stop))
    try:
        # Every step takes its input from the workers' own iterators, so the loop's
        # element is the same per-worker iterator each time.
        end = run_loop(
            runner,
            itertools.repeat(per_worker_iterator),
            LoopPlan(first_step=1, last_step=total_steps),
            hooks,
        )
    finally:
        if metrics is not None:
            metrics.close()
    return RunFinished(
        status="stopped" if end.stopped else "finished",
        last_step=end.last_step,
        final_loss=reporter.last_loss,
        elapsed_s=time.perf_counter() - began,
    )


class ScheduledSteps:
    """The coordinator's step runner: each step ``schedule``d on whichever worker is free.

    Up to ``in_flight`` steps run ahead of the one the loop asks for: enough to keep
    every worker busy while the coordinator fetches losses, few enough that a stop
    ends the run quickly. Losses are fetched in the order the steps were scheduled,
    so the trace is numbered like a synchronous run's. The steps still under way
    when the loop stops are fetched too (:meth:`finish`): they changed the model.
    """

    def __init__(
        self,
        coordinator: tf.distribute.coordinator.ClusterCoordinator,
        step: StepRunner,
        *,
        in_flight: int,
        steps: int,
    ) -> None:
        """``steps``: how many the run trains; none is scheduled beyond them."""

        @tf.function
        def scheduled_step(iterator: Any) -> tf.Tensor:
            loss, _ = step.run_one(next(iterator))
            return loss

        self._coordinator = coordinator
        self._scheduled_step = scheduled_step
        self._window = in_flight
        self._unscheduled = steps
        self._in_flight: deque[Any] = deque()

    def run_one(self, per_worker_iterator: Any) -> tuple[Any, None]:
        """The next step's loss, fetched, once steps ahead are scheduled up to the window."""
        while self._unscheduled and len(self._in_flight) < self._window:
            remote = self._coordinator.schedule(self._scheduled_step, args=(per_worker_iterator,))
            self._in_flight.append(remote)
            self._unscheduled -= 1
        return self._in_flight.popleft().fetch(), None

    def run_many(self, per_worker_iterator: Any, count: int) -> tuple[Any, None]:
        """``count`` steps' losses, one after another: each step is its own function call."""
        losses = [self.run_one(per_worker_iterator)[0] for _ in range(count)]
        return np.asarray(losses, dtype=np.float32), None

    def input_wait(self) -> None:
        """Unknown: the workers fetch their elements, where the coordinator cannot time it."""
        return None

    def finish(self) -> Iterator[tuple[Any, None]]:
        """The losses of the steps scheduled before the loop stopped, in order."""
        self._unscheduled = 0
        while self._in_flight:
            yield self._in_flight.popleft().fetch(), None


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
