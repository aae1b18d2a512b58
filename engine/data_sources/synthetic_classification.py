"""Seeded random inputs labelled by a random linear teacher (``engine.synthetic``)."""

from __future__ import annotations

from ..config import Project, SyntheticClassification
from ..problems import Problem
from ..synthetic import generated_bytes, make_classification
from .base import DataSource, ScriptData
from .script_lines import array_dataset_lines, source_lines


class SyntheticClassificationSource(DataSource[SyntheticClassification]):
    real_valued = True
    preview = "generated"

    def shape_problems(
        self, data: SyntheticClassification, project: Project, loc: tuple[str, ...]
    ) -> list[Problem]:
        model, loss = project.model, project.loss
        if not loss.is_classification:
            return [
                Problem(
                    ("loss", "kind"),
                    f"{loss.kind} is a regression loss; classification data "
                    "needs a crossentropy loss",
                )
            ]
        problems = []
        if loss.kind == "binary_crossentropy":
            if data.num_classes != 2:
                problems.append(
                    Problem((*loc, "num_classes"), "binary_crossentropy needs num_classes 2")
                )
            if model.output_units not in (1, None):
                problems.append(
                    Problem(
                        ("model", "layers"),
                        "binary_crossentropy needs a last dense layer of "
                        f"1 unit, not {model.output_units}",
                    )
                )
        elif model.output_units not in (data.num_classes, None):
            problems.append(
                Problem(
                    ("model", "layers"),
                    f"{loss.kind} needs a last dense layer of "
                    f"{data.num_classes} units (num_classes), not {model.output_units}",
                )
            )
        return problems

    def held_bytes(
        self, data: SyntheticClassification, project: Project, example_bytes: int
    ) -> int:
        return generated_bytes(data.examples, data.noise, example_bytes)

    def script(self, data: SyntheticClassification, project: Project) -> ScriptData:
        model, loss = project.model, project.loss
        made = [
            *source_lines(make_classification),
            f"x, y = make_classification({data.examples}, {list(model.input_shape)!r}, "
            f"{data.num_classes}, {data.noise!r}, {data.seed}, {loss.kind!r})",
        ]
        return ScriptData(array_dataset_lines(project, made))


SOURCE = SyntheticClassificationSource()
