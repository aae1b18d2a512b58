"""The ``loss`` section: the per-example loss, and which losses are for classes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..problems import Problem, raise_problems
from ._strict import _Strict

LossKind = Literal[
    "binary_crossentropy",
    "categorical_crossentropy",
    "sparse_categorical_crossentropy",
    "mean_squared_error",
    "mean_absolute_error",
    "huber",
]
LOSS_KINDS: tuple[str, ...] = LossKind.__args__  # type: ignore[attr-defined]
CROSSENTROPY_LOSSES = (
    "binary_crossentropy",
    "categorical_crossentropy",
    "sparse_categorical_crossentropy",
)


class LossConfig(_Strict):
    """The per-example loss; always built with ``reduction=None`` (see engine.model)."""

    kind: LossKind = "binary_crossentropy"
    from_logits: bool = False
    delta: float | None = Field(None, gt=0, description="Huber's delta (1.0 when omitted).")

    @model_validator(mode="after")
    def _check(self) -> LossConfig:
        problems = []
        if self.from_logits and self.kind not in CROSSENTROPY_LOSSES:
            problems.append(
                Problem(
                    ("from_logits",), f"from_logits applies to crossentropy losses, not {self.kind}"
                )
            )
        if self.delta is not None and self.kind != "huber":
            problems.append(Problem(("delta",), "delta applies only to huber"))
        raise_problems("LossConfig", problems)
        return self

    @property
    def is_classification(self) -> bool:
        return self.kind in CROSSENTROPY_LOSSES
