"""The engine process protocol: every message between an engine and its parent.

Why a protocol: the engine runs TensorFlow in its own process (started with the
``spawn`` context) so the GUI never loads TensorFlow, a crash in TensorFlow cannot
take the window down, and the same engine runs headless on cluster nodes. The two
sides share nothing but this module.

Transport. Messages travel as plain dicts (``message.model_dump()``) over a
``multiprocessing`` queue and are parsed back with :func:`parse_message`; plain
dicts keep the wire format independent of class identity across processes. Every
message carries ``protocol`` (:data:`PROTOCOL_VERSION`); a receiver refuses a
message of another version instead of misreading it.

Engine → parent, in the order a run produces them::

    Log*            any time: engine notes and TensorFlow's own output
    Phase*          any time: what the engine does outside its steps (loading TensorFlow,
                    checking files, building the model, tracing, evaluating, saving...)
    EnvironmentReady  as the run starts, before TensorFlow loads: what software it runs (its
                    environment.json's digest, Python and packages), for a cluster's launcher
                    to name a task whose software is not the chief's
    StrategyReady   a multi-worker cluster's task, as soon as its strategy exists and before
                    its first collective: the devices its replicas run on
    RunStarted      once the model and data exist: what really runs (replicas, devices)
    StepMetrics*    batches of consecutive steps, each step's reduced loss
    EvalMetrics*    with ``evaluation`` set: validation metrics after every N steps
    Resources*      about once a second, from a sampler thread: the task's CPU, memory, disk
                    and GPU use, and how long its steps waited for input (``engine.system_metrics``)
    RunFinished     status "finished" (ran to the end) or "stopped" (asked to stop)
  | RunFailed       an exception in the engine, with its traceback
    DevicesDetected answer to a device probe (``engine.process.detect_devices``), or
                    RunFailed when the probe itself failed

A prediction process (``engine.prediction.PredictionProcess``) loads one run's model
once and answers any number of requests, one at a time::

    ModelLoaded     first: the model it runs, what an example must be, the class names
  | InputRefused    without ``input``: the model cannot be used (the process then ends)
    then, for each PredictRequest:
    Predicted*      one per example: classes best first for classifiers, else the outputs
    InputRefused*   one per input that cannot be used, naming it
    PredictionDone  the request is answered, every input of it
  | RunFailed       any time: an unexpected failure (the process then ends)

A run that ends with neither RunFinished nor RunFailed died abruptly (killed,
segfault, out of memory); :class:`engine.process.EngineProcess` then synthesizes
a RunFailed from the exit code, so consumers handle exactly one terminal message.

Parent → child, on a pipe of its own (``engine.child_process``, the one way every child
is started and read)::

    EngineJob       to an engine, once: the run it runs; the run folder lock's descriptor
                    follows it on the pipe
    PredictRequest  to a prediction process, any number, one at a time

A stop request is a ``multiprocessing.Event`` the engine checks between steps; it is not
a message because it must work while the queue is full.

Additions within protocol 1 are optional fields and new message types only
(``StepMetrics.named_losses`` and :class:`EvalMetrics`, for custom step code and
evaluation; ``RunFinished.killed`` and ``RunFailed.known``, for how a run ended;
``RunStarted.strategy_kind``, the strategy's name as the user chose it;
:class:`StrategyReady`, for comparing a cluster's devices before they hang it;
:class:`EnvironmentReady`, for comparing its tasks' software;
:class:`EngineJob`, a run as its engine receives it; :class:`Phase`, what it is doing;
:class:`Resources`, what a task uses and waits for): the
engine and its parent always come from the same installation, and a consumer that
ignores them still reads every run correctly.

``task`` names the cluster task that sent a message (``"worker:1"``), or is None
in single-process runs, so one consumer can merge the streams of a whole cluster.
:class:`engine.cluster.LocalCluster` does that merge: its stream reads like one
run's (one RunStarted and the steps of the chief, exactly one terminal message,
which names the failed task when a task failed) with every task's log lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

PROTOCOL_VERSION = 1
PRIMARY_LOSS = "loss"
"""The named loss that is the run's loss (``StepMetrics.losses``) when a step names one."""


def secondary_losses(names: Iterable[str] | None) -> list[str]:
    """The named losses that are not the primary one: each gets a column, a curve or a
    printed value of its own, while the primary one is ``losses`` and is shown once."""
    return [name for name in names or () if name != PRIMARY_LOSS]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: Literal[1] = PROTOCOL_VERSION
    task: str | None = None


class Log(_Message):
    """A line for the log panel: the engine's own notes or TensorFlow's output."""

    type: Literal["log"] = "log"
    level: Literal["debug", "info", "warning", "error"] = "info"
    source: Literal["engine", "tensorflow"] = "engine"
    text: str


class Phase(_Message):
    """The engine started ``name`` (``checking 100,000 images``), or got further in it.

    Everything a run does outside its steps is a phase (:mod:`engine.phases`): a view
    shows the latest one until the steps (or the next phase) come. ``done`` of ``total``
    is its progress where it can be counted (files checked); None where it cannot.
    """

    type: Literal["phase"] = "phase"
    name: str
    done: int | None = None
    total: int | None = None


class RunStarted(_Message):
    """What actually runs, as TensorFlow reports it once the strategy exists."""

    type: Literal["run_started"] = "run_started"
    strategy: str = Field(description="The strategy's class name, e.g. MirroredStrategy.")
    strategy_kind: str | None = Field(
        None,
        description="The project's strategy.kind (mirrored, multi_worker_mirrored...): the one "
        "name Distloop shows for a strategy; the class name is for the log.",
    )
    num_replicas: int
    devices: list[str]
    tensorflow_version: str
    run_dir: str | None = None
    first_step: int = Field(1, description="Step number of the first step this run reports.")
    total_steps: int | None = Field(None, description="Last step number, when known up front.")
    warnings: list[str] = Field(default_factory=list)
    serving: str | None = Field(
        None,
        description="Set only by the ps and worker tasks of a parameter-server cluster, which "
        "run no loop: the gRPC target they serve on until the coordinator is done. Such a task "
        "reports no steps; its RunFinished has last_step 0.",
    )


class StrategyReady(_Message):
    """A multi-worker task's strategy exists; its first collective (the broadcast of the
    model's first variables) comes next.

    Workers whose devices differ (two GPUs on one host, one on another) wait in that
    collective for ever; a launcher that compares every worker's devices here stops
    the cluster first, in one line (``engine.cluster.devices``).
    """

    type: Literal["strategy_ready"] = "strategy_ready"
    devices: list[str]


class EnvironmentReady(_Message):
    """The software a task runs, as its ``environment.json`` records it
    (``engine.run_environment``): a launcher compares each task's with the chief's."""

    type: Literal["environment_ready"] = "environment_ready"
    digest: str = Field(description="Equal on two tasks running the same software.")
    software: dict[str, str] = Field(
        description="Python and every installed package, name to version."
    )
    variables: dict[str, str] = Field(
        default_factory=dict,
        description="The recorded variables every task should share (not its devices' own).",
    )


class StepMetrics(_Message):
    """Consecutive steps, batched so reporting never slows training down.

    ``losses[i]`` is the ``strategy.reduce(SUM)`` loss of step ``steps[i]``; as a
    float32 widened to float, it converts back to float32 exactly.
    ``replica_losses[i]`` holds each local replica's share of that step's loss when
    the project asks for per-replica losses: its per-example losses summed over the
    global batch size, so the shares of all replicas sum to ``losses[i]``, and a
    replica's own mean loss is its share times ``RunStarted.num_replicas``.

    ``named_losses`` is set when custom step code returns a dict of named losses
    (``{"generator": g, "discriminator": d}``): one list per name, in the order
    the step returned them, ``named_losses[name][i]`` being step ``steps[i]``'s
    ``strategy.reduce(SUM)`` value. ``losses`` then stays the one primary loss:
    the dict's ``"loss"`` entry when it has one, else the float32 sum of the named
    losses, so every consumer of ``losses`` (plots, NaN checks, ``final_loss``)
    works unchanged. Per-replica losses are the primary loss's.
    """

    type: Literal["step_metrics"] = "step_metrics"
    steps: list[int]
    losses: list[float]
    elapsed_s: list[float] = Field(description="Wall seconds since training began, per step.")
    replica_losses: list[list[float]] | None = None
    named_losses: dict[str, list[float]] | None = None


class EvalMetrics(_Message):
    """Validation metrics of the model after step ``step``, over the whole validation data.

    ``metrics`` holds ``val_loss`` (the project's loss, averaged over the validation
    examples, without regularization) and ``val_accuracy`` for crossentropy losses
    or ``val_mae`` for regression losses. Every value is a global sum over all
    replicas (``strategy.reduce(SUM)``) divided by the global count, so it does not
    depend on how many replicas evaluated. Sent after the StepMetrics of ``step``.
    """

    type: Literal["eval_metrics"] = "eval_metrics"
    step: int
    metrics: dict[str, float]
    examples: int = Field(description="Validation examples evaluated.")


class RunFinished(_Message):
    """The run ended normally: it ran to the end, or stopped because it was asked to."""

    type: Literal["run_finished"] = "run_finished"
    status: Literal["finished", "stopped"]
    last_step: int
    final_loss: float | None
    elapsed_s: float
    killed: bool = Field(
        False,
        description="Set by the parent when it killed the engine on request (a second Ctrl-C, "
        "Stop before the first step, a stop that took too long): the run stopped without a "
        "new checkpoint, and resumes from its last one.",
    )


class Stopping(_Message):
    """The engine honoured a stop: it left its loop after ``last_step``, and saves what
    ``saving`` names (``the checkpoint``, ``the model``) before its RunFinished.

    Until this comes a stop waits for the step under way; after it, for the saves,
    which take seconds for a large model: a window that killed the engine then called a
    stop that was saving a kill.
    """

    type: Literal["stopping"] = "stopping"
    last_step: int
    saving: list[str] = Field(default_factory=list)


class RunFailed(_Message):
    """The run cannot go on. ``traceback`` is empty when the process died abruptly."""

    type: Literal["run_failed"] = "run_failed"
    error_type: str
    message: str
    traceback: str = ""
    last_step: int | None = Field(
        None,
        description="The last step reported before the failure (a non-finite loss: its own "
        "step); None when it failed before its first step.",
    )
    exit_code: int | None = None
    known: bool = Field(
        False,
        description="A failure the message alone explains (bad data, a NaN loss, an error in "
        "custom code...): show the message; the traceback is for the log only. "
        "``engine.child_main.KNOWN_FAILURES`` decides.",
    )


class GpuUse(BaseModel):
    """One NVIDIA GPU as NVML saw it at a sample: busy share and memory in use."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    utilization_percent: float
    memory_used_bytes: int
    memory_total_bytes: int


class Resources(_Message):
    """What one task used and waited for over the last ``interval_s`` seconds.

    Sent by a sampler thread beside the training loop (``engine.system_metrics``), never
    by the loop itself, so sampling costs the steps nothing they wait for. ``step`` is the
    last step the loop had run when the sample was taken (None before the first), the
    axis the window draws these on beside the loss. ``held_s`` is how long the process
    could not run although it wanted to (stopped, starved of CPU by a quota or a busy
    machine): a task held up holds up every peer waiting for it in a collective.
    ``steps``, ``step_s`` and ``input_wait_s`` add up the executions that ended in the
    interval: how many steps, their seconds, and of those the seconds spent waiting
    for the input pipeline's next element (None when the run cannot time it). ``gpus`` is
    None where NVML or a GPU is missing, so a consumer shows no GPU columns, not zeros.
    """

    type: Literal["resources"] = "resources"
    time: float = Field(description="Unix time of the sample.")
    interval_s: float
    step: int | None = None
    cpu_percent: float = Field(description="Of one core: 200 is two cores busy.")
    rss_bytes: int
    read_bytes: int | None = Field(None, description="Read by the process so far, if known.")
    write_bytes: int | None = Field(None, description="Written by the process so far, if known.")
    held_s: float = 0.0
    steps: int = 0
    step_s: float = 0.0
    input_wait_s: float | None = Field(
        0.0,
        description="None where it could not be timed: fused steps under op determinism.",
    )
    gpus: list[GpuUse] | None = None

    @property
    def input_wait_share(self) -> float | None:
        """The share of the steps' time spent waiting for input; None without steps or time."""
        if self.input_wait_s is None or not self.steps or self.step_s <= 0:
            return None
        return self.input_wait_s / self.step_s


class DeviceInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    device_type: str


class DevicesDetected(_Message):
    """The physical devices TensorFlow sees on this machine."""

    type: Literal["devices_detected"] = "devices_detected"
    devices: list[DeviceInfo]
    tensorflow_version: str


class ModelLoaded(_Message):
    """The saved model a prediction process loaded, and what it takes."""

    type: Literal["model_loaded"] = "model_loaded"
    path: str
    input_shape: list[int]
    csv_columns: list[str] | None = Field(
        None, description="The training CSV's feature columns, which a CSV input must name."
    )
    classifier: bool
    classes: list[str] | None = Field(None, description="Class names in label order.")


class ClassScore(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    probability: float


class EngineJob(_Message):
    """Parent → engine process: the one run it runs, first thing (a cold engine) or once a
    run takes it (a warm one, TensorFlow already loaded). ``task`` is the cluster task it
    runs as."""

    type: Literal["engine_job"] = "engine_job"
    project_json: str
    run_dir: str | None = None
    tf_config_env: str | None = Field(
        None, description="The TF_CONFIG the run sees (None: none, whatever the environment)."
    )
    resume: bool = False
    lock_follows: bool = Field(
        False, description="The run folder lock's descriptor comes next on the same pipe."
    )


class Predicted(_Message):
    """One example's prediction."""

    type: Literal["predicted"] = "predicted"
    input: str = Field(
        description="Where the example came from: ``rows.csv:3``, ``x.npy[4]``, ``cat.png``."
    )
    classes: list[ClassScore] | None = Field(None, description="A classifier's, best first.")
    values: list[float] | None = Field(None, description="Anything else's raw outputs.")

    @property
    def top(self) -> ClassScore | None:
        return self.classes[0] if self.classes else None


class InputRefused(_Message):
    """An input that cannot be predicted, in one line; without ``input``, the model itself."""

    type: Literal["input_refused"] = "input_refused"
    input: str | None = None
    error: str


class PredictRequest(_Message):
    """The parent's request to a prediction process: predict these files and pasted rows."""

    type: Literal["predict_request"] = "predict_request"
    inputs: list[str] = Field(
        default_factory=list, description="Files: CSV, .npy arrays, images, texts."
    )
    rows: list[str] = Field(
        default_factory=list, description="Pasted CSV rows (or texts, for a text model)."
    )


class PredictionDone(_Message):
    """A request's last answer: each of its rows and inputs got its Predicted or InputRefused."""

    type: Literal["prediction_done"] = "prediction_done"


Message = Annotated[
    Log
    | Phase
    | RunStarted
    | StrategyReady
    | EnvironmentReady
    | StepMetrics
    | EvalMetrics
    | Resources
    | RunFinished
    | Stopping
    | RunFailed
    | DevicesDetected
    | EngineJob
    | ModelLoaded
    | Predicted
    | InputRefused
    | PredictRequest
    | PredictionDone,
    Field(discriminator="type"),
]
TERMINAL_TYPES = (RunFinished, RunFailed)

_adapter: TypeAdapter[Any] = TypeAdapter(Message)


class ProtocolError(ValueError):
    """A message from an engine of another version, or one that is not a message."""


def parse_message(raw: dict[str, Any]) -> Message:
    """Parses a received dict; refuses other protocol versions with a clear reason."""
    version = raw.get("protocol") if isinstance(raw, dict) else None
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"engine speaks protocol {version!r}, this Distloop speaks {PROTOCOL_VERSION}"
        )
    return _adapter.validate_python(raw)
