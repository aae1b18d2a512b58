"""One training run inside the engine process: the guide's program, configured (imports TF).

Order matters and follows the guide: devices and seeds first, then the strategy,
then model and optimizer inside ``strategy.scope()``, then the distributed
dataset, then the loop. TF_CONFIG is already in the environment (the process
entry point sets it before the run; TensorFlow reads it only when a strategy is made).

A project with ``custom_code`` runs the same program with the user's builders and
step in place of the built-in ones (``engine.user_code``); one with
``evaluation`` evaluates under the same strategy every N steps (``engine.tf.evaluation``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import tensorflow as tf

from ..channel import Channel
from ..config import Project, uneven_batch_warnings
from ..messages import RunFinished, RunStarted, StrategyReady
from ..reporting import StepReporter
from ..run_folder import (
    EVAL_FILE,
    METRICS_FILE,
    EvalWriter,
    MetricsWriter,
    truncate_eval,
    truncate_metrics,
    write_status,
)
from ..user_code import UserCode, UserCodeError, load_user_code
from .checkpoint import RunCheckpoints
from .data import (
    build_training_data,
    changed_file_error,
    custom_training_data,
    write_prediction_files,
)
from .evaluation import EvalReporter, Evaluator
from .input_pipeline import distribute_input
from .loop import LoopPlan, ReplicaStepRunner, StepRunner, run_loop
from .model import build_loss, build_model, build_optimizer, set_precision
from .model_export import ModelKeeper
from .preemption import AlignedStop, ClusterStop
from .ps_loop import train_parameter_server
from .strategy import (
    build_strategy,
    configure_devices,
    in_cluster,
    is_chief,
    replica_devices,
    strategy_devices,
)
from .tensorboard import TensorBoardWriter
from .user_code import (
    StepContext,
    build_dataset,
    build_models,
    build_optimizers,
    replica_step,
)


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
    training = project.training
    configure_devices(project.strategy, memory_growth=training.gpu_memory_growth)
    set_precision(training.mixed_precision)
    tf.keras.utils.set_random_seed(training.seed)
    if training.deterministic:
        tf.config.experimental.enable_op_determinism()

    # Loaded before the strategy exists, so a broken file fails the run at once.
    code = load_user_code(project.custom_code.path) if project.custom_code else None
    strategy = build_strategy(project.strategy)
    if project.strategy.kind == "multi_worker_mirrored" and in_cluster(strategy):
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
    if run_dir is not None:
        # One model and optimizer are checkpointed as the built-in run does; several by name.
        single = list(models) == ["model"] and list(optimizers) == ["model"]
        checkpoints = RunCheckpoints(
            run_dir,
            models["model"] if single else models,
            optimizers["model"] if single else optimizers,
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

    if code is not None and code.build_dataset is not None:
        if project.evaluation is not None and project.evaluation.split is not None:
            raise UserCodeError(
                f"{code.where('build_dataset')} builds its own data, so evaluation.split "
                "cannot hold examples out of it; give evaluation.source instead"
            )
        batches = build_dataset(code, project)
        data = custom_training_data(batches, project, skip_steps=done_steps)
    else:
        data = build_training_data(project, skip_steps=done_steps)
    replica_input = distribute_input(strategy, data.dataset, training.input_distribution)
    channel.log(
        f"input distribution: {replica_input.method} "
        f"(training.input_distribution is {training.input_distribution})",
        level="debug",
    )
    replicas = strategy.num_replicas_in_sync
    warnings = data.warnings + uneven_batch_warnings(project, replicas)
    for note in warnings:
        channel.log(note, level="warning")
    started = RunStarted(
        strategy=type(strategy).__name__,
        strategy_kind=project.strategy.kind,
        num_replicas=replicas,
        devices=strategy_devices(strategy),
        tensorflow_version=tf.__version__,
        run_dir=str(run_dir) if run_dir else None,
        first_step=done_steps + 1,
        total_steps=data.total_steps,
        warnings=warnings,
    )
    channel.send(started)
    if run_dir is not None and chief:
        write_prediction_files(run_dir, project, data)
    if run_dir is not None:
        write_status(
            run_dir,
            "running",
            # The runs table names a strategy as the user chose it; the class is kept beside.
            strategy=project.strategy.kind,
            strategy_class=started.strategy,
            **started.model_dump(include={"num_replicas", "devices", "total_steps"}),
            tensorflow_version=tf.__version__,
        )
    runner: ReplicaStepRunner
    if code is None:
        runner = StepRunner(
            strategy,
            model,
            optimizer,
            loss_object,
            project.data.global_batch_size,
            per_replica_losses=training.per_replica_losses,
            to_replicas=replica_input.to_replicas,
            jit_compile=training.jit_compile,
        )
    else:
        context = StepContext(
            models=models,
            optimizers=optimizers,
            loss_object=loss_object,
            global_batch_size=project.data.global_batch_size,
            num_replicas=replicas,
            strategy=strategy,
            project=project,
        )
        runner = ReplicaStepRunner(
            strategy,
            replica_step(code, context),
            per_replica_losses=training.per_replica_losses,
            to_replicas=replica_input.to_replicas,
        )
        if training.jit_compile:
            channel.log(
                "training.jit_compile applies to the built-in step only; compile parts of a "
                "custom train_step with tf.function(jit_compile=True)",
                level="warning",
            )
    # Traces the step now: a custom step's losses name the metrics.csv columns, and one
    # that returns the wrong thing fails here, before the first step.
    runner.bind_input(replica_input.element_spec)
    loss_names = runner.loss_names(replica_input.element_spec) if code else None
    evaluator = (
        Evaluator(strategy, _evaluated_model(code, models), loss_object, project)
        if project.evaluation is not None
        else None
    )

    keeper = (
        ModelKeeper(
            run_dir,
            models,
            project,
            channel,
            chief=chief,
            resumed_at=done_steps if resume else None,
        )
        if run_dir is not None
        else None
    )

    with ExitStack() as cleanup:
        metrics = tensorboard = eval_writer = None
        elapsed_offset = 0.0
        if run_dir is not None and chief:
            elapsed_offset = truncate_metrics(run_dir, done_steps) if resume else 0.0
            local = len(replica_devices(strategy)) if training.per_replica_losses else None
            metrics = MetricsWriter(run_dir / METRICS_FILE, local, named=loss_names or ())
            cleanup.callback(metrics.close)
            tensorboard = TensorBoardWriter(run_dir)
            cleanup.callback(tensorboard.close)
            if evaluator is not None:
                if resume:
                    truncate_eval(run_dir, done_steps)
                eval_writer = EvalWriter(run_dir / EVAL_FILE, evaluator.names)
                cleanup.callback(eval_writer.close)
        reporter = StepReporter(
            channel, metrics, stop_on_nan=training.stop_on_nan, also=tensorboard
        )
        reporter.start_at(elapsed_offset)
        if checkpoints is not None:
            checkpoints.before_save = _record_steps(reporter, tensorboard)
        evaluation = (
            EvalReporter(
                evaluator,
                channel,
                reporter.flush,
                eval_writer,
                also=(
                    keeper.watching(tensorboard.evaluation if tensorboard else None)
                    if keeper is not None
                    else None
                ),
            )
            if evaluator is not None
            else None
        )

        # A multi-worker run stops after a step all its tasks agree on, not where one of
        # them was asked to: each step is a collective, a lone stop would hang the rest.
        aligned = (
            ClusterStop(strategy, checkpoints, should_stop, done_steps, data.total_steps)
            if checkpoints is not None and project.strategy.kind == "multi_worker_mirrored"
            else None
        )

        def after_steps(step: int) -> None:
            if checkpoints is not None:
                checkpoints.after_steps(step)
            if evaluation is not None:
                evaluation.after_steps(step)
            if aligned is not None:  # last: a stop comes after this step's evaluation
                aligned.after_steps(step)

        def steps_until_pause(step: int) -> int:
            return min(
                checkpoints.steps_until_pause(step) if checkpoints else 1 << 30,
                evaluator.steps_until_pause(step) if evaluator else 1 << 30,
            )

        plan = LoopPlan(
            first_step=done_steps + 1,
            last_step=data.total_steps,
            steps_per_execution=training.steps_per_execution,
            epoch_form=training.epochs is not None,
            elapsed_offset_s=elapsed_offset,
        )
        try:
            stopped = run_loop(
                runner,
                replica_input.dataset,
                plan,
                reporter,
                should_stop if aligned is None else aligned.loop_should_stop,
                after_steps=after_steps,
                steps_until_pause=steps_until_pause,
            )
        except AlignedStop:
            stopped = True
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as exc:
            changed = changed_file_error(project, exc)  # an image changed since the check
            if changed is None:
                raise
            raise changed from exc
        last_step = reporter.last_step or done_steps
        channel.log(f"the step function was traced {runner.traces()} time(s)", level="debug")
        if checkpoints is not None and last_step > done_steps:
            checkpoints.save(last_step)
        if keeper is not None and last_step > 0:
            keeper.save(last_step)
    return RunFinished(
        status="stopped" if stopped else "finished",
        last_step=last_step,
        final_loss=reporter.last_loss,
        # The run's one duration: its training clock, which metrics.csv and a resume continue.
        elapsed_s=reporter.elapsed_s,
    )


def _record_steps(
    reporter: StepReporter, tensorboard: TensorBoardWriter | None
) -> Callable[[], None]:
    """Puts every reported step in metrics.csv and TensorBoard, for a checkpoint to follow.

    A resume trains from the checkpoint's step on and keeps the rows up to it, so a
    checkpoint on disk before its steps' rows (a kill in between) would lose them.
    """

    def record() -> None:
        reporter.flush()
        if tensorboard is not None:
            tensorboard.sync()

    return record


def _evaluated_model(code: UserCode | None, models: dict[str, tf.keras.Model]) -> tf.keras.Model:
    """Evaluation runs the project's loss on the model named ``model``."""
    if "model" not in models:
        assert code is not None  # the built-in run has exactly that model
        raise UserCodeError(
            f"{code.where('build_models')} returned {', '.join(models)}; evaluation runs the "
            "project's loss on the model named 'model', so name the evaluated model 'model' "
            "or set evaluation to null"
        )
    return models["model"]
