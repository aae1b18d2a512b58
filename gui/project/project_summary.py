"""The project at a glance: what will run, said in one line per section."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QLabel

from ...engine.config import DenseLayer, Project
from ...engine.model_shapes import BACKBONES
from .auto_form import wrapping_form

ROWS = ("Strategy", "Model", "Optimizer", "Loss", "Data", "Training")


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _model_line(project: Project, dense: int) -> str:
    model = project.model
    if model.kind == "keras_file":
        return f"input {model.input_shape}, the .keras file {Path(model.path or '').name}"
    layers = f"{_plural(len(model.layers), 'layer')} ({dense} dense)"
    if model.backbone is not None:
        layers = f"{BACKBONES[model.backbone].title} + {layers}"
    parameters = _plural(model.parameter_count() or 0, "parameter")
    return f"input {model.input_shape}, {layers}, {parameters}"


def describe(project: Project) -> dict[str, str]:
    """One line per section of a valid project, in the words of the project file."""
    strategy = project.strategy
    replicas = strategy.replica_count_hint()
    dense = sum(isinstance(layer, DenseLayer) for layer in project.model.layers)
    examples = project.data.example_count()
    per_epoch = project.steps_per_epoch()
    total = project.total_steps()
    data = f"{project.data.source}, batches of {project.data.global_batch_size:,}"
    if examples is not None:
        data = f"{data}, {_plural(examples, 'example')}"
    if per_epoch is not None:
        data = f"{data} ({_plural(per_epoch, 'step')} per epoch)"
    training = project.training
    length = (
        _plural(training.steps, "step")
        if training.steps is not None
        else _plural(training.epochs or 0, "epoch")
    )
    if training.steps is None and total is not None:
        length = f"{length} = {_plural(total, 'step')}"
    loss = project.loss.kind + (" (from logits)" if project.loss.from_logits else "")
    return {
        "Strategy": f"{strategy.kind}, "
        + (_plural(replicas, "replica") if replicas else "replicas: what TensorFlow finds"),
        "Model": _model_line(project, dense),
        "Optimizer": f"{project.optimizer.kind}, learning rate {project.optimizer.learning_rate:g}",
        "Loss": loss,
        "Data": data,
        "Training": f"{length}, seed {training.seed}",
    }


class ProjectSummary(QGroupBox):
    """Follows the validation: the summary of a valid project, or why there is none."""

    def __init__(self) -> None:
        super().__init__("Summary")
        self.values = {row: QLabel() for row in ROWS}
        layout = wrapping_form(self)
        for row, label in self.values.items():
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            layout.addRow(f"{row}:", label)

    def show_project(self, project: Project | None) -> None:
        lines = describe(project) if project is not None else {}
        for row, label in self.values.items():
            label.setText(lines.get(row, "— (see the problems below)"))
