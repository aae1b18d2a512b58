"""What a run builds before its loop, in the guide's order (imports TensorFlow).

Order matters and follows the guide: devices and seeds first, then the strategy,
then model and optimizer inside ``strategy.scope()``, then the data. TF_CONFIG is
already in the environment (the process entry point sets it before the run;
TensorFlow reads it only when a strategy is made). Both loops start here: the
guide's (``engine.tf.training``) and a parameter-server coordinator's
(``engine.tf.parameter_server``), so a setting means the same in both, and what a
parameter-server run does not apply is said once, in the run's first message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tensorflow as tf

from .. import phases
from ..channel import Channel
from ..config import Project, uneven_batch_warnings
from ..messages import RunStarted, StrategyReady
from ..run_folder import write_status
from ..user_code import UserCode, UserCodeError, load_user_code
from .checkpoint import RunCheckpoints
from .data import (
    TrainingData,
    build_training_data,
    custom_training_data,
    write_prediction_files,
)
from .model import build_loss, build_model, build_optimizer, set_precision
from .strategy import (
    build_strategy,
    configure_devices,
    in_cluster,
    is_chief,
    strategy_devices,
)
from .user_code import build_dataset, build_models, build_optimizers


@dataclass(frozen=True)
class Prepared:
    """A run's strategy, models, optimizers, loss and data, and the message that says so."""

    strategy: tf.distribute.Strategy
    chief: bool
    """The task that keeps checkpoints and writes the run's records."""
    code: UserCode | None
    models: dict[str, tf.keras.Model]
    """By name: ``{"model": ...}`` for the built-in run, custom code's own names else."""
    optimizers: dict[str, tf.keras.optimizers.Optimizer]
    loss_object: tf.keras.losses.Loss
    checkpoints: RunCheckpoints | None
    resumed: bool
    """The run continues a run folder's run (from its checkpoint, if it has one)."""
    done_steps: int
    """Steps a resumed run restored from its checkpoint (0 for a new run)."""
    data: TrainingData
    started: RunStarted
    """The run's first message; :func:`announce` sends it."""


def prepare(project: Project, run_dir: Path | None, channel: Channel, *, resume: bool) -> Prepared:
    """Builds everything the loop needs but the step; with ``resume``, restores the checkpoint."""
    training = project.training
    parameter_server = project.strategy.kind == "parameter_server"
    configure_devices(project.strategy, memory_growth=training.gpu_memory_growth)
    set_precision(training.mixed_precision)
    tf.keras.utils.set_random_seed(training.seed)
    # Parameter-server training is asynchronous: its trace cannot repeat bit for bit.
    if training.deterministic and not parameter_server:
        tf.config.experimental.enable_op_determinism()

    phases.begin("building the model")
    # Loaded before the strategy exists, so a broken file fails the run at once.
    code = load_user_code(project.custom_code.path) if project.custom_code else None
    strategy = build_strategy(project.strategy)
    if project.strategy.kind == "multi_worker_mirrored" and in_cluster(strategy):
        # Before the first collective: the launcher compares every worker's devices.
        channel.send(StrategyReady(devices=strategy_devices(strategy)))
    chief = is_chief(strategy)
    with strategy.scope():
        if code is None:
            model = build_model(project.model, training.seed)
            optimizer = build_optimizer(
                project.optimizer,
                model.trainable_variables,
                loss_scale=training.mixed_precision == "mixed_float16",
            )
            models, optimizers = {"model": model}, {"model": optimizer}
        else:
            models = build_models(code, project)
            optimizers = build_optimizers(code, project, models)
    loss_object = build_loss(project.loss)

    checkpoints = None
    done_steps = 0
    if run_dir is not None and not parameter_server:
        # One model and optimizer are checkpointed as the built-in run does; several by name.
        single = list(models) == ["model"] and list(optimizers) == ["model"]
        checkpoints = RunCheckpoints(
            run_dir,
            models["model"] if single else models,
            optimizers["model"] if single else optimizers,
            is_chief=chief,
            task=channel.task,
        )
        if resume:
            phases.begin("restoring the last checkpoint")
            done_steps = checkpoints.restore_latest()
            channel.log(
                f"resuming after step {done_steps} from the last checkpoint"
                if done_steps
                else "no checkpoint yet: starting the run from its first step"
            )

    phases.begin("preparing the data")
    if code is not None and code.build_dataset is not None:
        if project.evaluation is not None and project.evaluation.split is not None:
            raise UserCodeError(
                f"{code.where('build_dataset')} builds its own data, so evaluation.split "
                "cannot hold examples out of it; give evaluation.source instead"
            )
        data = custom_training_data(build_dataset(code, project), project, skip_steps=done_steps)
    else:
        data = build_training_data(project, skip_steps=done_steps)

    if parameter_server:
        # The strategy keeps its resolver to itself: TF_CONFIG names the workers.
        cluster = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec()
        workers = len(cluster.as_dict().get("worker", []))
        devices = [f"/job:worker/replica:0/task:{i}" for i in range(workers)]
        # Each worker's dataset is its one replica's: a batch is never split.
        warnings = data.warnings + uneven_batch_warnings(project, 1) + _ignored_settings(project)
    else:
        devices = strategy_devices(strategy)
        warnings = data.warnings + uneven_batch_warnings(project, strategy.num_replicas_in_sync)
    started = RunStarted(
        strategy=type(strategy).__name__,
        strategy_kind=project.strategy.kind,
        num_replicas=strategy.num_replicas_in_sync,
        devices=devices,
        tensorflow_version=tf.__version__,
        run_dir=str(run_dir) if run_dir else None,
        first_step=done_steps + 1,
        total_steps=data.total_steps,
        warnings=warnings,
    )
    return Prepared(
        strategy=strategy,
        chief=chief,
        code=code,
        models=models,
        optimizers=optimizers,
        loss_object=loss_object,
        checkpoints=checkpoints,
        resumed=resume,
        done_steps=done_steps,
        data=data,
        started=started,
    )


def announce(prepared: Prepared, project: Project, run_dir: Path | None, channel: Channel) -> None:
    """Says what runs (its warnings, then its first message) and records it in the run folder.

    The chief also writes what prediction reads to take inputs and name outputs as
    training did (class names, a text model's vocabulary).
    """
    started = prepared.started
    for note in started.warnings:
        channel.log(note, level="warning")
    channel.send(started)
    if run_dir is None:
        return
    if prepared.chief:
        write_prediction_files(run_dir, project, prepared.data)
    write_status(
        run_dir,
        "running",
        # The runs table names a strategy as the user chose it; the class is kept beside.
        strategy=project.strategy.kind,
        strategy_class=started.strategy,
        **started.model_dump(include={"num_replicas", "devices", "total_steps"}),
        tensorflow_version=tf.__version__,
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
