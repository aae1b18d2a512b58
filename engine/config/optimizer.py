"""The ``optimizer`` section: one model per Keras optimizer, chosen by ``kind``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ._strict import _Strict


class _OptimizerBase(_Strict):
    learning_rate: float = Field(0.01, gt=0, le=100)


class SGDConfig(_OptimizerBase):
    kind: Literal["sgd"] = "sgd"
    momentum: float = Field(0.0, ge=0, lt=1)
    nesterov: bool = False


class AdamConfig(_OptimizerBase):
    kind: Literal["adam"] = "adam"
    learning_rate: float = Field(0.001, gt=0, le=100)
    beta_1: float = Field(0.9, ge=0, lt=1)
    beta_2: float = Field(0.999, ge=0, lt=1)
    epsilon: float = Field(1e-7, gt=0)
    amsgrad: bool = False


class RMSpropConfig(_OptimizerBase):
    kind: Literal["rmsprop"] = "rmsprop"
    learning_rate: float = Field(0.001, gt=0, le=100)
    rho: float = Field(0.9, ge=0, lt=1)
    momentum: float = Field(0.0, ge=0, lt=1)
    epsilon: float = Field(1e-7, gt=0)
    centered: bool = False


class AdagradConfig(_OptimizerBase):
    kind: Literal["adagrad"] = "adagrad"
    learning_rate: float = Field(0.001, gt=0, le=100)
    initial_accumulator_value: float = Field(0.1, ge=0)
    epsilon: float = Field(1e-7, gt=0)


OptimizerConfig = Annotated[
    SGDConfig | AdamConfig | RMSpropConfig | AdagradConfig, Field(discriminator="kind")
]
OPTIMIZER_KINDS: tuple[str, ...] = ("sgd", "adam", "rmsprop", "adagrad")
