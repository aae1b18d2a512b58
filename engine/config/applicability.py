"""Which fields apply to which kind, asked of the models instead of restated here.

The models already reject, say, ``cpu_replicas`` under ``one_device`` or ``delta``
for a crossentropy loss. To grey out a field, the GUI sets it to a probe value
under the chosen kind and looks whether the model objects to that very field, so
the forms follow the rules wherever the engine changes them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ValidationError

from ..problems import Loc, problems_from_validation_error
from . import Initializer, LossConfig, StrategyConfig

# A non-default value per optional field: the model objects to it where it does not apply.
_PROBES: dict[type[BaseModel], dict[str, Any]] = {
    StrategyConfig: {
        "devices": ["/cpu:0"],
        "cpu_replicas": 2,
        "cross_device_ops": "nccl",
        "communication": "ring",
        "communication_timeout_s": 60.0,
        "tpu": "local",
    },
    LossConfig: {"from_logits": True, "delta": 1.0},
    Initializer: {"value": 1.0, "stddev": 0.05},
}


def _objections(model: type[BaseModel], data: dict[str, Any]) -> list[Loc]:
    try:
        instance = model.model_validate(data)
    except ValidationError as exc:
        return [problem.loc for problem in problems_from_validation_error(exc)]
    if isinstance(instance, StrategyConfig):  # its rules run inside the project's validator
        return [problem.loc[1:] for problem in instance.problems()]
    return []


@cache
def applicable_fields(model: type[BaseModel], kind: str) -> frozenset[str]:
    """The probed fields of ``model`` that ``kind`` uses, and ``kind`` itself.

    ``kind`` always applies: it is how the user leaves this kind, so greying it out
    (as happened to the Strategy's under its default, ``mirrored``) locks the section.
    """
    used = {
        name
        for name, probe in _PROBES[model].items()
        if not any(loc[:1] == (name,) for loc in _objections(model, {"kind": kind, name: probe}))
    }
    return frozenset({"kind", *used})
