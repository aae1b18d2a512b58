"""The memory a run needs at least, from the project alone: loading refuses a project
that fits no machine (``engine.project_file``), and ``engine.memory_check`` compares it
with this machine. Above ``engine.config`` and the data sources: each source says what
it holds."""

from __future__ import annotations

from dataclasses import dataclass

from .config import (
    AdagradConfig,
    AdamConfig,
    DataConfig,
    Project,
    RMSpropConfig,
    SGDConfig,
    StrategyConfig,
)
from .data_sources import source_of
from .data_sources.base import FLOAT32

MAX_PROJECT_BYTES = 2**50
"""A project whose estimate passes this fits no machine: refused by validation anywhere."""


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of host memory a run needs at least, from the project alone (no TensorFlow).

    A lower bound of what matters, not an account of everything: TensorFlow's own
    few hundred MiB and file sources (.npz, CSV, whose size only reading tells) are
    left out; ``engine.memory_check`` adds the files on the machine that runs them.
    """

    parameters: int
    """Weights, their gradients and the optimizer's slots, once per replica on the CPU."""
    inputs: int
    """Data generated or held in memory: synthetic arrays, caches, shuffle buffers."""
    activations: int
    """One global batch through every layer, forward and back."""

    @property
    def total(self) -> int:
        return self.parameters + self.inputs + self.activations

    @property
    def loc(self) -> tuple[str, ...]:
        """The section to change: the model, or the data when the data weighs more."""
        if self.inputs > self.parameters + self.activations:
            return ("data",)
        return ("model", "layers")

    def describe(self) -> str:
        return (
            f"{bytes_text(self.parameters)} for parameters, gradients and optimizer state, "
            f"{bytes_text(self.inputs)} for input data, "
            f"{bytes_text(self.activations)} for activations"
        )


def memory_estimate(project: Project) -> MemoryEstimate:
    """What a run of ``project`` holds in this machine's memory, float32 throughout."""
    model = project.model
    copies = 2 + _optimizer_slots(project.optimizer)  # weights, gradients, slots
    # A .keras file's layers are known only once loaded: its parameters count as none here.
    parameters = (model.parameter_count() or 0) * FLOAT32 * copies
    parameters *= _host_replicas(project.strategy)
    widths = model.shapes().activation_sizes()
    activations = project.data.global_batch_size * sum(widths) * FLOAT32 * 2
    inputs = _data_bytes(project.data, project)
    if project.evaluation is not None and project.evaluation.source is not None:
        inputs += _data_bytes(project.evaluation.source, project)
    return MemoryEstimate(parameters=parameters, inputs=inputs, activations=activations)


def _optimizer_slots(optimizer: SGDConfig | AdamConfig | RMSpropConfig | AdagradConfig) -> int:
    """Variables the optimizer keeps per weight (Keras 3's optimizers)."""
    if isinstance(optimizer, SGDConfig):
        return 1 if optimizer.momentum else 0
    if isinstance(optimizer, AdamConfig):
        return 3 if optimizer.amsgrad else 2
    if isinstance(optimizer, RMSpropConfig):
        return 1 + (1 if optimizer.momentum else 0) + (1 if optimizer.centered else 0)
    return 1


def _host_replicas(strategy: StrategyConfig) -> int:
    """Copies of the variables in host memory: one per CPU replica a mirrored strategy makes."""
    if strategy.kind != "mirrored":
        return 1
    if strategy.devices:
        return max(1, sum("CPU" in device.upper() for device in strategy.devices))
    return strategy.cpu_replicas


def _data_bytes(data: DataConfig, project: Project) -> int:
    model, loss = project.model, project.loss
    labels = 1 if loss.kind == "sparse_categorical_crossentropy" else model.output_units or 1
    example = (model.input_size + labels) * FLOAT32
    count = data.example_count()
    held = source_of(data).held_bytes(data, project, example)
    if held is None:
        return 0  # a file's size is known only when it is read, on the machine that runs it
    cached = count * example if data.cache and count is not None else 0
    shuffled = min(data.shuffle_buffer, count or data.shuffle_buffer) * example
    return held + cached + shuffled


def bytes_text(count: int) -> str:
    """A byte count as people read it: ``1.5 GiB``, ``0.25 MiB``."""
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count / 2**20:.2f} MiB"
