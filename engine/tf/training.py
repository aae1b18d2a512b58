"""One training run inside the engine process: the guide's program, configured (imports TF).

:func:`train` puts three parts together: :func:`~engine.tf.prepare.prepare` builds
strategy, models, optimizers, loss and data in the guide's order; a step runner
(``engine.tf.step_runners``) is the guide's distributed step; ``engine.loop`` runs
the steps and calls its hooks (``engine.loop_hooks``): reporting, checkpoints,
evaluation, stop requests and the model kept. A parameter-server run goes to its
coordinator (``engine.tf.parameter_server``), which shares the first and last.

A project with ``custom_code`` runs the same program with the user's builders and
step in place of the built-in ones (``engine.user_code``); one with
``evaluation`` evaluates under the same strategy every N steps (``engine.tf.evaluation``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import tensorflow as tf

from .. import phases
from ..batch_finder import refuse_larger_than_data
from ..channel import Channel
from ..config import Project
from ..loop import LoopHook, LoopPlan, run_loop
from ..loop_hooks import (
    Checkpointing,
    Evaluation,
    KeepModel,
    Reporting,
    StopNotice,
    StopRequest,
    StopTogether,
)
from ..lr_finder import BATCH_SIZE, RateSweep, finder_folder, finder_of, read_range
from ..messages import RunFinished
from ..reporting import StepReporter
from ..run_folder import (
    EVAL_FILE,
    METRICS_FILE,
    EvalWriter,
    MetricsWriter,
    truncate_eval,
    truncate_metrics,
)
from ..system_metrics import StepClock, sampling
from ..user_code import UserCode, UserCodeError
from .data import changed_file_error
from .evaluation import Evaluator
from .input_pipeline import ReplicaInput, distribute_input
from .model_export import ModelKeeper
from .parameter_server import train_parameter_server
from .preemption import PreemptionWatch
from .prepare import Prepared, announce, prepare
from .step_runners import ReplicaStepRunner, StepRunner
from .strategy import replica_devices
from .tensorboard import TensorBoardWriter
from .user_code import StepContext, replica_step


def train(
    project: Project,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
    *,
    resume: bool = False,
) -> RunFinished:
    """Runs the project; with ``resume``, continues from the run folder's last checkpoint.

    The task's resources are sampled from here to its end (``engine.system_metrics``).
    """
    with sampling(channel, run_dir) as clock:
        if project.strategy.kind == "parameter_server":
            return train_parameter_server(project, run_dir, channel, should_stop, resume=resume)
        return _train(project, run_dir, channel, should_stop, clock, resume=resume)


def _train(
    project: Project,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
    clock: StepClock | None,
    *,
    resume: bool,
) -> RunFinished:
    training = project.training
    prepared = prepare(project, run_dir, channel, resume=resume)
    strategy, done_steps = prepared.strategy, prepared.done_steps
    replica_input = distribute_input(strategy, prepared.data.dataset, training.input_distribution)
    channel.log(
        f"input distribution: {replica_input.method} "
        f"(training.input_distribution is {training.input_distribution})",
        level="debug",
    )
    announce(prepared, project, run_dir, channel)
    if run_dir is not None and finder_of(finder_folder(run_dir)) == BATCH_SIZE:  # a batch trial
        refuse_larger_than_data(project.data.global_batch_size, prepared.data.examples)
    runner = _step_runner(prepared, project, replica_input, channel)
    # Traces the step now: a custom step's losses name the metrics.csv columns, and one
    # that returns the wrong thing fails here, before the first step.
    phases.begin("tracing the step")
    runner.bind_input(replica_input.element_spec)
    loss_names = runner.loss_names(replica_input.element_spec) if prepared.code else None
    evaluator = (
        Evaluator(
            strategy,
            _evaluated_model(prepared.code, prepared.models),
            prepared.loss_object,
            project,
        )
        if project.evaluation is not None
        else None
    )

    with ExitStack() as cleanup:
        reporting = _reporting(prepared, project, run_dir, channel, evaluator, loss_names, cleanup)
        hooks = _hooks(prepared, project, run_dir, channel, should_stop, reporting, evaluator)
        if clock is not None:
            hooks.insert(0, clock)
        plan = LoopPlan(
            first_step=done_steps + 1,
            last_step=prepared.data.total_steps,
            steps_per_execution=training.steps_per_execution,
            epoch_form=training.epochs is not None,
            elapsed_offset_s=reporting.elapsed_s,  # a resume's clock goes on from its rows
        )
        phases.begin("first step")  # its input pipeline fills, then the step runs once
        try:
            end = run_loop(runner, replica_input.dataset, plan, hooks)
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as exc:
            changed = changed_file_error(project, exc)  # an image changed since the check
            if changed is None:
                raise
            raise changed from exc
        channel.log(f"the step function was traced {runner.traces()} time(s)", level="debug")
    return RunFinished(
        status="stopped" if end.stopped else "finished",
        last_step=end.last_step,
        final_loss=reporting.last_loss,
        # The run's one duration: its training clock, which metrics.csv and a resume continue.
        elapsed_s=reporting.elapsed_s,
    )


def _reporting(
    prepared: Prepared,
    project: Project,
    run_dir: Path | None,
    channel: Channel,
    evaluator: Evaluator | None,
    loss_names: list[str] | None,
    cleanup: ExitStack,
) -> Reporting:
    """The run's record: the channel on every task; metrics.csv, eval.csv and TensorBoard on
    the chief, cut back to the checkpoint's step on a resume, closed by ``cleanup``."""
    training, done_steps = project.training, prepared.done_steps
    metrics = tensorboard = eval_writer = None
    elapsed_offset = 0.0
    if run_dir is not None and prepared.chief:
        elapsed_offset = truncate_metrics(run_dir, done_steps) if prepared.resumed else 0.0
        local = len(replica_devices(prepared.strategy)) if training.per_replica_losses else None
        metrics = MetricsWriter(run_dir / METRICS_FILE, local, named=loss_names or ())
        cleanup.callback(metrics.close)
        tensorboard = TensorBoardWriter(run_dir)
        cleanup.callback(tensorboard.close)
        if evaluator is not None:
            if prepared.resumed:
                truncate_eval(run_dir, done_steps)
            eval_writer = EvalWriter(run_dir / EVAL_FILE, evaluator.names)
            cleanup.callback(eval_writer.close)
    reporter = StepReporter(channel, metrics, stop_on_nan=training.stop_on_nan, also=tensorboard)
    reporter.start_at(elapsed_offset)
    return Reporting(
        reporter,
        channel,
        eval_writer=eval_writer,
        scalars=tensorboard,
        eval_examples=evaluator.examples if evaluator is not None else None,
    )


def _step_runner(
    prepared: Prepared, project: Project, replica_input: ReplicaInput, channel: Channel
) -> ReplicaStepRunner:
    """The guide's step for the built-in model, else custom code's step, run the same way."""
    training = project.training
    strategy = prepared.strategy
    if prepared.code is None:
        return StepRunner(
            strategy,
            prepared.models["model"],
            prepared.optimizers["model"],
            prepared.loss_object,
            project.data.global_batch_size,
            per_replica_losses=training.per_replica_losses,
            to_replicas=replica_input.to_replicas,
            jit_compile=training.jit_compile,
            time_input=not training.deterministic,
        )
    context = StepContext(
        models=prepared.models,
        optimizers=prepared.optimizers,
        loss_object=prepared.loss_object,
        global_batch_size=project.data.global_batch_size,
        num_replicas=strategy.num_replicas_in_sync,
        strategy=strategy,
        project=project,
    )
    if training.jit_compile:
        channel.log(
            "training.jit_compile applies to the built-in step only; compile parts of a "
            "custom train_step with tf.function(jit_compile=True)",
            level="warning",
        )
    return ReplicaStepRunner(
        strategy,
        replica_step(prepared.code, context),
        per_replica_losses=training.per_replica_losses,
        to_replicas=replica_input.to_replicas,
        time_input=not training.deterministic,
    )


def _hooks(
    prepared: Prepared,
    project: Project,
    run_dir: Path | None,
    channel: Channel,
    should_stop: Callable[[], bool],
    reporting: Reporting,
    evaluator: Evaluator | None,
) -> list[LoopHook]:
    """The loop's hooks, in the order their jobs run after a step.

    Reporting first (a checkpoint or an evaluation follows the steps it covers),
    then the checkpoint, the evaluation (the model keeper sees it before the run's
    record does), and the stop last: a cluster's agreed stop comes after the step's
    evaluation.
    """
    saving = ["the checkpoint"] if prepared.checkpoints is not None else []
    saving += ["the model"] if run_dir is not None else []
    hooks: list[LoopHook] = [reporting, StopNotice(channel, saving)]
    rates = read_range(finder_folder(run_dir)) if run_dir is not None else None
    if rates is not None:  # a learning-rate finder run: its rate rises step by step
        hooks.append(RateSweep(rates, functools.partial(_set_rate, prepared.optimizers)))
    stop: LoopHook = StopRequest(should_stop)
    if prepared.checkpoints is not None:
        checkpointing = Checkpointing(
            prepared.checkpoints, project.training.checkpoint_every, reporting.record_durably
        )
        hooks.append(checkpointing)
        # A multi-worker run stops after a step all its tasks agree on, not where one of
        # them was asked to: each step is a collective, a lone stop would hang the rest.
        if project.strategy.kind == "multi_worker_mirrored":
            watch = functools.partial(
                PreemptionWatch,
                prepared.strategy,
                prepared.checkpoints.directory,
                should_stop,
            )
            stop = StopTogether(watch, checkpointing, prepared.data.total_steps)
    keeping = None
    if run_dir is not None:
        # A resumed run keeps an earlier part's best model unless it finds a better one.
        resumed_at = prepared.done_steps if prepared.resumed else None
        keeper = ModelKeeper(
            run_dir, prepared.models, project, channel, chief=prepared.chief, resumed_at=resumed_at
        )
        keeping = KeepModel(keeper)
    if evaluator is not None:
        listeners = [reporting] if keeping is None else [keeping, reporting]
        hooks.append(Evaluation(evaluator, reporting.flush, listeners))
    if keeping is not None:
        hooks.append(keeping)
    return [*hooks, stop]


def _set_rate(optimizers: dict[str, tf.keras.optimizers.Optimizer], rate: float) -> None:
    """Every optimizer's rate, between steps: the step reads the rate variable each time
    (a mixed-precision run's loss-scale optimizer passes it to the one it wraps)."""
    for optimizer in optimizers.values():
        optimizer.learning_rate = rate


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
