"""Builds and runs what a custom code file defines (imports TensorFlow).

``engine.user_code`` documents the contract and loads the file; here its builders
are called (inside ``strategy.scope()`` where the contract says so), their
results checked, and its ``train_step`` wrapped into the per-replica step that
:class:`engine.tf.step_runners.ReplicaStepRunner` runs exactly like the built-in one.
Every failure of user code becomes a :class:`UserCodeError` naming the file,
the function and, when the traceback tells, the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from ..config import Project
from ..messages import PRIMARY_LOSS
from ..run_folder import METRICS_COLUMNS, REPLICA_PREFIX
from ..user_code import UserCode, UserCodeError, location_in
from .model import build_model, build_optimizer

LOSS_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
RESERVED_NAMES = tuple(column for column in METRICS_COLUMNS if column != PRIMARY_LOSS)
"""metrics.csv's own columns, which no named loss may take (``loss`` is the primary one)."""


@dataclass(frozen=True)
class StepContext:
    """What ``train_step(step, inputs)`` gets as ``step``: the run's objects and helpers."""

    models: dict[str, tf.keras.Model]
    optimizers: dict[str, tf.keras.optimizers.Optimizer]
    loss_object: tf.keras.losses.Loss
    """The project's per-example loss (``reduction=None``)."""
    global_batch_size: int
    num_replicas: int
    strategy: tf.distribute.Strategy
    project: Project

    def average_loss(self, per_example_loss: tf.Tensor) -> tf.Tensor:
        """``tf.nn.compute_average_loss`` over the *global* batch, as the built-in step does.

        The global batch size is passed explicitly: with a batch that does not
        divide evenly over the replicas, the default would weight them wrongly.
        """
        return tf.nn.compute_average_loss(
            per_example_loss, global_batch_size=self.global_batch_size
        )

    def regularization_loss(self, model: tf.keras.Model) -> tf.Tensor:
        """The model's regularization losses scaled by ``1/num_replicas`` (0 without any)."""
        if not model.losses:
            return tf.constant(0.0)
        return tf.nn.scale_regularization_loss(tf.add_n(model.losses))


def guide_train_step(step: StepContext, inputs: Any) -> tf.Tensor:
    """The built-in step as custom code: the guide's ``train_step`` for ``models["model"]``."""
    features, labels = inputs
    model, optimizer = step.models["model"], step.optimizers["model"]
    with tf.GradientTape() as tape:
        predictions = model(features, training=True)
        loss = step.average_loss(step.loss_object(labels, predictions))
        if model.losses:
            loss += step.regularization_loss(model)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    return loss


def call_user(code: UserCode, name: str, function: Callable[..., Any], *args: Any) -> Any:
    """Calls one of the file's functions; its exceptions become UserCodeErrors."""
    try:
        return function(*args)
    except UserCodeError:
        raise
    except Exception as exc:
        raise UserCodeError(
            f"{location_in(code.path, exc)}: {name} raised {type(exc).__name__}: {exc}"
        ) from exc


def build_models(code: UserCode, project: Project) -> dict[str, tf.keras.Model]:
    """The run's models; call inside ``strategy.scope()``."""
    if code.build_models is None:
        return {"model": build_model(project.model, project.training.seed)}
    models = call_user(code, "build_models", code.build_models, project)
    _check_dict(code, "build_models", models, tf.keras.Model, "a Keras model")
    return models


def build_optimizers(
    code: UserCode, project: Project, models: dict[str, tf.keras.Model]
) -> dict[str, tf.keras.optimizers.Optimizer]:
    """The run's optimizers, built for their models' variables; call inside the scope."""
    if code.build_optimizers is None:
        return {
            name: build_optimizer(project.optimizer, model.trainable_variables)
            for name, model in models.items()
        }
    optimizers = call_user(code, "build_optimizers", code.build_optimizers, models, project)
    _check_dict(
        code, "build_optimizers", optimizers, tf.keras.optimizers.Optimizer, "a Keras optimizer"
    )
    for name, optimizer in optimizers.items():
        if name not in models:
            raise UserCodeError(
                f"{code.where('build_optimizers')}: optimizer {name!r} names no model "
                f"(models: {', '.join(models)}); each optimizer's key names the model it trains"
            )
        # Keras 3 fails when optimizer variables are first made inside the replicated step.
        if not optimizer.built:
            optimizer.build(models[name].trainable_variables)
    return optimizers


def build_dataset(code: UserCode, project: Project) -> tf.data.Dataset:
    """The custom dataset of global batches (only when the file defines build_dataset)."""
    assert code.build_dataset is not None
    dataset = call_user(code, "build_dataset", code.build_dataset, project)
    if not isinstance(dataset, tf.data.Dataset):
        raise UserCodeError(
            f"{code.where('build_dataset')} must return a tf.data.Dataset, "
            f"not {type(dataset).__name__}"
        )
    return dataset


def replica_step(code: UserCode, context: StepContext) -> Callable[[Any], Any]:
    """The per-replica step: the user's ``train_step`` with its result checked at trace time."""
    where = code.where("train_step")

    def step(inputs: Any) -> Any:
        result = call_user(code, "train_step", code.train_step, context, inputs)
        if isinstance(result, dict):
            if not result:
                raise UserCodeError(f"{where} returned an empty dict; name at least one loss")
            return {name: _scalar_loss(where, value, name) for name, value in result.items()}
        return _scalar_loss(where, result, None)

    return step


def _scalar_loss(where: str, value: Any, name: Any) -> tf.Tensor:
    what = "its loss" if name is None else f"loss {name!r}"
    if name is not None and (
        not isinstance(name, str)
        or not LOSS_NAME.fullmatch(name)
        or name in RESERVED_NAMES
        or name.startswith(REPLICA_PREFIX)
    ):
        raise UserCodeError(
            f"{where} returned a loss named {name!r}; names are letters, digits and "
            f"underscores, starting with a letter, and not {', '.join(RESERVED_NAMES)} "
            f"or {REPLICA_PREFIX}*"
        )
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError):
        raise UserCodeError(
            f"{where} must return a scalar loss tensor or a dict of them; {what} is "
            f"{type(value).__name__}"
        ) from None
    if not tensor.dtype.is_floating:
        raise UserCodeError(f"{where}: {what} has dtype {tensor.dtype.name}; losses are floats")
    if tensor.shape.rank != 0:
        raise UserCodeError(
            f"{where}: {what} has shape {tensor.shape}, not a scalar; reduce per-example "
            "losses with step.average_loss(...)"
        )
    return tf.cast(tensor, tf.float32)


def _check_dict(code: UserCode, name: str, value: Any, kind: type, what: str) -> None:
    where = code.where(name)
    if not isinstance(value, dict) or not value:
        raise UserCodeError(
            f"{where} must return a non-empty dict of name -> {what}, not {type(value).__name__}"
        )
    for key, item in value.items():
        if not isinstance(key, str):
            raise UserCodeError(f"{where}: the key {key!r} is not a string")
        if not isinstance(item, kind):
            raise UserCodeError(f"{where}: {key!r} is {type(item).__name__}, not {what}")
