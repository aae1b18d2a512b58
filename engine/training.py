"""One training run inside the engine process: the guide's program, configured (imports TF).

Order matters and follows the guide: devices and seeds first, then the strategy,
then model and optimizer inside ``strategy.scope()``, then the distributed
dataset, then the loop. TF_CONFIG is already in the environment (the process
entry point sets it before TensorFlow is imported).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from engine.channel import Channel
from engine.config import Project, uneven_batch_warnings
from engine.messages import RunFinished, RunStarted
from engine.reporting import StepReporter
from engine.run_folder import METRICS_FILE, MetricsWriter
from engine.tf_data import build_dataset
from engine.tf_loop import (
    batches_for_epochs,
    batches_for_steps,
    make_distributed_train_step,
    run_loop,
)
from engine.tf_model import build_loss, build_model, build_optimizer
from engine.tf_strategy import build_strategy, configure_devices, strategy_devices


def train(
    project: Project,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
) -> RunFinished:
    began = time.perf_counter()
    configure_devices(project.strategy)
    tf.keras.utils.set_random_seed(project.training.seed)
    tf.config.experimental.enable_op_determinism()

    strategy = build_strategy(project.strategy)
    replicas = strategy.num_replicas_in_sync
    warnings = uneven_batch_warnings(project, replicas)
    for note in warnings:
        channel.log(note, level="warning")
    channel.send(
        RunStarted(
            strategy=type(strategy).__name__,
            num_replicas=replicas,
            devices=strategy_devices(strategy),
            tensorflow_version=tf.__version__,
            run_dir=str(run_dir) if run_dir else None,
            total_steps=project.total_steps(),
            warnings=warnings,
        )
    )

    with strategy.scope():
        model = build_model(project.model, project.training.seed)
        optimizer = build_optimizer(project.optimizer, model.trainable_variables)
    loss_object = build_loss(project.loss)

    dataset = build_dataset(project)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)
    per_replica = project.training.per_replica_losses
    step_fn = make_distributed_train_step(
        strategy,
        model,
        optimizer,
        loss_object,
        project.data.global_batch_size,
        dist_dataset.element_spec,
        per_replica,
    )
    if project.training.steps is not None:
        batches = batches_for_steps(dist_dataset, project.training.steps)
    else:
        batches = batches_for_epochs(dist_dataset, project.training.epochs or 1)

    local_replicas = len(strategy.extended.worker_devices) if per_replica else None
    metrics = MetricsWriter(run_dir / METRICS_FILE, local_replicas) if run_dir else None
    reporter = StepReporter(channel, metrics, stop_on_nan=project.training.stop_on_nan)
    try:
        stopped = run_loop(step_fn, batches, reporter, should_stop)
    finally:
        if metrics is not None:
            metrics.close()
    return RunFinished(
        status="stopped" if stopped else "finished",
        last_step=reporter.last_step or 0,
        final_loss=reporter.last_loss,
        elapsed_s=time.perf_counter() - began,
    )
