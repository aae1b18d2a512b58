"""Seeded random classification examples (``engine.synthetic``), in memory."""

from __future__ import annotations

from ...config import Project, SyntheticClassification
from ...synthetic import make_classification
from .arrays import Arrays, ArraySource


class SyntheticClassificationTFSource(ArraySource[SyntheticClassification]):
    def arrays(self, data: SyntheticClassification, project: Project, where: str) -> Arrays:
        model, loss = project.model, project.loss
        return make_classification(
            data.examples, model.input_shape, data.num_classes, data.noise, data.seed, loss.kind
        )


SOURCE = SyntheticClassificationTFSource()
