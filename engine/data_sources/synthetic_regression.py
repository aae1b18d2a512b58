"""Seeded random inputs with targets from a random linear map plus noise
(``engine.synthetic``)."""

from __future__ import annotations

from ..config import Project, SyntheticRegression
from ..problems import Problem
from ..synthetic import generated_bytes, make_regression
from .base import DataSource, ScriptData
from .script_lines import array_dataset_lines, source_lines


class SyntheticRegressionSource(DataSource[SyntheticRegression]):
    real_valued = True
    preview = "generated"

    def shape_problems(
        self, data: SyntheticRegression, project: Project, loc: tuple[str, ...]
    ) -> list[Problem]:
        model, loss = project.model, project.loss
        if loss.kind in ("categorical_crossentropy", "sparse_categorical_crossentropy"):
            return [
                Problem(
                    ("loss", "kind"),
                    f"{loss.kind} needs class labels; regression data has real-valued targets",
                )
            ]
        if model.output_units is None:
            return [
                Problem(
                    (*loc, "source"),
                    "synthetic regression targets are as wide as the model's output, which a "
                    ".keras file tells only when loaded; use numpy or csv data with it",
                )
            ]
        return []

    def held_bytes(self, data: SyntheticRegression, project: Project, example_bytes: int) -> int:
        return generated_bytes(data.examples, data.noise, example_bytes)

    def script(self, data: SyntheticRegression, project: Project) -> ScriptData:
        model = project.model
        made = [
            *source_lines(make_regression),
            f"x, y = make_regression({data.examples}, {list(model.input_shape)!r}, "
            f"{model.output_units}, {data.noise!r}, {data.seed})",
        ]
        return ScriptData(array_dataset_lines(project, made))


SOURCE = SyntheticRegressionSource()
