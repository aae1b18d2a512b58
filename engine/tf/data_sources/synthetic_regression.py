"""Seeded random regression examples (``engine.synthetic``), in memory."""

from __future__ import annotations

from ...config import Project, SyntheticRegression
from ...synthetic import make_regression
from .arrays import Arrays, ArraySource


class SyntheticRegressionTFSource(ArraySource[SyntheticRegression]):
    def arrays(self, data: SyntheticRegression, project: Project, where: str) -> Arrays:
        model = project.model
        return make_regression(
            data.examples, model.input_shape, model.output_units, data.noise, data.seed
        )


SOURCE = SyntheticRegressionTFSource()
