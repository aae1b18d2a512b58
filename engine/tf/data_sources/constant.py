"""The guide's data: ``from_tensors((features, labels)).repeat(examples)``."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ...config import ConstantData, Project
from .base import Examples, TFDataSource


class ConstantTFSource(TFDataSource[ConstantData]):
    def examples(self, data: ConstantData, project: Project, where: str) -> Examples:
        model, loss = project.model, project.loss
        features = np.asarray(data.features, np.float32).reshape(model.input_shape)
        label_type = np.int32 if loss.kind == "sparse_categorical_crossentropy" else np.float32
        labels = np.asarray(data.labels, label_type)
        dataset = tf.data.Dataset.from_tensors((features, labels)).repeat(data.examples)
        return Examples(dataset, data.examples)


SOURCE = ConstantTFSource()
