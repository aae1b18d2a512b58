"""The guide's data: one example, ``from_tensors((features, labels)).repeat(examples)``."""

from __future__ import annotations

from ..config import ConstantData, Project
from ..problems import Problem
from .base import DataSource, ScriptData


class ConstantSource(DataSource[ConstantData]):
    splits = False  # one example repeated: a split would hold out the example itself
    real_valued = True
    preview = "generated"

    def form_start(self) -> dict[str, object]:
        return {"features": [1.0], "labels": [1.0]}

    def shape_problems(
        self, data: ConstantData, project: Project, loc: tuple[str, ...]
    ) -> list[Problem]:
        model, loss = project.model, project.loss
        problems = []
        if len(data.features) != model.input_size:
            problems.append(
                Problem(
                    (*loc, "features"),
                    f"has {len(data.features)} value(s) but the model's input_shape "
                    f"{model.input_shape} takes {model.input_size}",
                )
            )
        expected = 1 if loss.kind == "sparse_categorical_crossentropy" else model.output_units
        if expected is not None and len(data.labels) != expected:
            problems.append(
                Problem(
                    (*loc, "labels"),
                    f"has {len(data.labels)} value(s) but the model predicts {expected} "
                    f"per example with {loss.kind}",
                )
            )
        return problems

    def held_bytes(self, data: ConstantData, project: Project, example_bytes: int) -> int:
        return example_bytes  # from_tensors keeps one example and repeats it

    def script(self, data: ConstantData, project: Project) -> ScriptData:
        model, loss = project.model, project.loss
        label_type = "np.int32" if loss.kind == "sparse_categorical_crossentropy" else "np.float32"
        return ScriptData(
            [
                f"features = np.asarray({data.features!r}, np.float32).reshape("
                f"{list(model.input_shape)!r})",
                f"labels = np.asarray({data.labels!r}, {label_type})",
                f"dataset = tf.data.Dataset.from_tensors((features, labels))"
                f".repeat({data.examples})",
            ]
        )


SOURCE = ConstantSource()
