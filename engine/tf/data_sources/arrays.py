"""Sources whose examples are numpy arrays in memory (synthetic data, a loaded .npz or CSV
file): ``Dataset.from_tensor_slices``, and an evaluation split that splits the arrays."""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import tensorflow as tf

from ...config import Project
from .base import D, Examples, TFDataSource, held_out_of

Arrays = tuple[np.ndarray, np.ndarray]


class ArraySource(TFDataSource[D]):
    @abstractmethod
    def arrays(self, data: D, project: Project, where: str) -> Arrays:
        """The features and labels, checked (``where`` names the field in messages)."""

    def examples(self, data: D, project: Project, where: str) -> Examples:
        x, y = self.arrays(data, project, where)
        return Examples(tf.data.Dataset.from_tensor_slices((x, y)), len(x))

    def split_examples(self, data: D, project: Project) -> tuple[Examples, Examples]:
        x, y = self.arrays(data, project, "data")
        held = held_out_of(len(x), project)
        training, evaluated = (x[~held], y[~held]), (x[held], y[held])
        return (
            Examples(tf.data.Dataset.from_tensor_slices(training), len(training[0])),
            Examples(tf.data.Dataset.from_tensor_slices(evaluated), len(evaluated[0])),
        )


def model_classes(project: Project) -> int | None:
    """The model's output count, which bounds class numbers; None under custom code, which
    may build models of its own (the project's model then says nothing about classes)."""
    return project.model.output_units if project.custom_code is None else None
