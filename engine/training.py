"""One training run inside the engine process: the guide's program, configured (imports TF).

Order matters and follows the guide: devices and seeds first, then the strategy,
then model and optimizer inside ``strategy.scope()``, then the distributed
dataset, then the loop. TF_CONFIG is already in the environment (the process
entry point sets it before TensorFlow is imported).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import tensorflow as tf

from engine.channel import Channel
from engine.config import Project, uneven_batch_warnings
from engine.messages import RunFinished, RunStarted
from engine.reporting import StepReporter
from engine.run_folder import METRICS_FILE, MetricsWriter, truncate_metrics
from engine.tf_checkpoint import RunCheckpoints
from engine.tf_data import build_training_data
from engine.tf_loop import LoopPlan, StepRunner, run_loop
from engine.tf_model import build_loss, build_model, build_optimizer
from engine.tf_ps_loop import train_parameter_server
from engine.tf_strategy import build_strategy, configure_devices, is_chief, strategy_devices
from engine.tf_tensorboard import TensorBoardWriter


def train(
    project: Project,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
    *,
    resume: bool = False,
) -> RunFinished:
    """Runs the project; with ``resume``, continues from the run folder's last checkpoint."""
    if project.strategy.kind == "parameter_server":
        return train_parameter_server(project, run_dir, channel, should_stop, resume=resume)
    began = time.perf_counter()
    training = project.training
    configure_devices(project.strategy)
    tf.keras.utils.set_random_seed(training.seed)
    tf.config.experimental.enable_op_determinism()

    strategy = build_strategy(project.strategy)
    chief = is_chief(strategy)
    with strategy.scope():
        model = build_model(project.model, training.seed)
        optimizer = build_optimizer(project.optimizer, model.trainable_variables)
    loss_object = build_loss(project.loss)

    checkpoints = None
    done_steps = 0
    if run_dir is not None:
        checkpoints = RunCheckpoints(
            run_dir,
            model,
            optimizer,
            every=training.checkpoint_every,
            is_chief=chief,
            task=channel.task,
        )
        if resume:
            done_steps = checkpoints.restore_latest()
            channel.log(
                f"resuming after step {done_steps} from the last checkpoint"
                if done_steps
                else "no checkpoint yet: starting the run from its first step"
            )

    data = build_training_data(project, skip_steps=done_steps)
    dist_dataset = strategy.experimental_distribute_dataset(data.dataset)
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
            first_step=done_steps + 1,
            total_steps=data.total_steps,
            warnings=warnings,
        )
    )
    runner = StepRunner(
        strategy,
        model,
        optimizer,
        loss_object,
        project.data.global_batch_size,
        per_replica_losses=training.per_replica_losses,
        jit_compile=training.jit_compile,
    )

    with ExitStack() as cleanup:
        metrics = tensorboard = None
        elapsed_offset = 0.0
        if run_dir is not None and chief:
            elapsed_offset = truncate_metrics(run_dir, done_steps) if resume else 0.0
            local = len(strategy.extended.worker_devices) if training.per_replica_losses else None
            metrics = MetricsWriter(run_dir / METRICS_FILE, local)
            cleanup.callback(metrics.close)
            tensorboard = TensorBoardWriter(run_dir)
            cleanup.callback(tensorboard.close)
        reporter = StepReporter(
            channel, metrics, stop_on_nan=training.stop_on_nan, also=tensorboard
        )
        reporter.start_at(elapsed_offset)
        plan = LoopPlan(
            first_step=done_steps + 1,
            last_step=data.total_steps,
            steps_per_execution=training.steps_per_execution,
            epoch_form=training.epochs is not None,
            elapsed_offset_s=elapsed_offset,
        )
        stopped = run_loop(
            runner,
            dist_dataset,
            plan,
            reporter,
            should_stop,
            after_steps=checkpoints.after_steps if checkpoints else lambda step: None,
            steps_until_pause=checkpoints.steps_until_pause if checkpoints else lambda s: 1 << 30,
        )
        last_step = reporter.last_step or done_steps
        channel.log(f"the step function was traced {runner.traces()} time(s)", level="debug")
        if checkpoints is not None and last_step > done_steps:
            checkpoints.save(last_step)
    return RunFinished(
        status="stopped" if stopped else "finished",
        last_step=last_step,
        final_loss=reporter.last_loss,
        elapsed_s=time.perf_counter() - began,
    )
