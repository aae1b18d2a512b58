"""The ``training``, ``custom_code`` and ``evaluation`` sections: how long and how the run
trains, the user's step code, and the validation data evaluated along the way."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..problems import Problem, raise_problems
from ._strict import MAX_SEED, MAX_STEPS, _Strict
from .data import DataConfig

InputDistribution = Literal["auto", "split_on_host", "distributed_dataset"]


MixedPrecision = Literal["none", "mixed_float16", "mixed_bfloat16"]


class TrainingConfig(_Strict):
    """How long to train: ``epochs`` passes over the data, or exactly ``steps`` steps."""

    epochs: int | None = Field(None, ge=1, le=1_000_000)
    steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    seed: int = Field(0, ge=0, le=MAX_SEED)
    per_replica_losses: bool = Field(
        False, description="Also report each replica's loss (experimental_local_results)."
    )
    stop_on_nan: bool = Field(True, description="Stop when the loss becomes NaN or infinite.")
    steps_per_execution: int = Field(
        1,
        ge=1,
        le=100_000,
        description="Run this many steps inside one tf.function call (fewer Python round "
        "trips); every step's loss is still reported.",
    )
    checkpoint_every: int | None = Field(
        None,
        ge=1,
        le=MAX_STEPS,
        description="Save a checkpoint every this many steps; one is also saved on Stop and "
        "at the end of the run.",
    )
    jit_compile: bool = Field(False, description="Compile the training step with XLA.")
    deterministic: bool = Field(
        True,
        description="Deterministic ops (enable_op_determinism), so a run with the same seed "
        "repeats exactly; off, TensorFlow may pick faster kernels and runs can differ in the "
        "last bits. Parameter-server runs are never bit-exact.",
    )
    input_distribution: InputDistribution = Field(
        "auto",
        description="How each global batch reaches the replicas: split_on_host (one host "
        "pipeline, sliced in the step; fastest on CPUs), distributed_dataset (the guide's "
        "experimental_distribute_dataset, prefetching to GPUs and TPUs), or auto (split_on_host "
        "when every replica is a CPU).",
    )
    export_saved_model: bool = Field(
        False,
        description="Also export the trained model as a SavedModel (saved_model/ in the run "
        "folder) for TF Serving; model.keras is always saved.",
    )

    mixed_precision: MixedPrecision = Field(
        "none",
        description="Compute in 16-bit floats, keep weights in float32: mixed_float16 (GPUs; "
        "the loss is scaled so small gradients survive) or mixed_bfloat16 (TPUs, recent CPUs "
        "and GPUs; no scaling needed).",
    )
    gpu_memory_growth: bool = Field(
        True,
        description="GPUs take memory as the run needs it, so several processes can share "
        "one; off, TensorFlow takes nearly all of each GPU's memory at start.",
    )

    @model_validator(mode="after")
    def _check(self) -> TrainingConfig:
        if (self.epochs is None) == (self.steps is None):
            raise_problems(
                "TrainingConfig", [Problem(("steps",), "give exactly one of epochs or steps")]
            )
        return self


# --- custom step code and evaluation ----------------------------------------------------


class CustomCode(_Strict):
    """A user Python file with the run's step (and optionally models and data).

    Only the engine process loads it, and only to run: opening or validating a
    project never executes it. ``engine.user_code`` documents what it may define.
    """

    path: str = Field(
        min_length=1,
        description="The .py file; a relative path is relative to the project file.",
    )


class EvaluationConfig(_Strict):
    """Validation data, evaluated under the strategy every ``every`` steps.

    ``split`` holds out a fraction of the training examples (which changes which
    examples train); ``source`` is separate data, shaped like ``data``, that
    leaves training exactly as it is without evaluation.
    """

    every: int = Field(100, ge=1, le=MAX_STEPS, description="Evaluate after every N steps.")
    split: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Hold out this fraction of the training examples (array-based sources).",
    )
    source: DataConfig | None = Field(
        None, description="Separate validation data; its global_batch_size batches evaluation."
    )

    @model_validator(mode="after")
    def _check(self) -> EvaluationConfig:
        if (self.split is None) == (self.source is None):
            raise_problems(
                "EvaluationConfig", [Problem(("split",), "give exactly one of split or source")]
            )
        return self


def split_counts(examples: int, split: float) -> tuple[int, int]:
    """(training, held-out) examples of an evaluation split: at least one held out."""
    held_out = max(1, round(examples * split))
    return examples - held_out, held_out
