"""Sweeps: one base project expanded into several, over learning rate, batch size and optimizer.

A sweep is what DIGITS' job form and W&B sweeps offer: a grid (every combination
of the listed values) or a random search (``count`` draws, reproducible from
``seed``; the learning rate may come from a log-uniform range). Each expanded
project is validated on its own, because a value fine for the base can break a
rule in combination (a batch smaller than the replicas, an SGD-only setting); such
a combination is reported with its problems and left out, so one bad value never
loses the others. TensorFlow-free: the window and the CLI both use it.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .config import MAX_SEED, OPTIMIZER_KINDS, Project, load_project_data
from .problems import Problem, ProblemsError, problems_from_validation_error, raise_problems

MAX_RUNS = 1000
"""A sweep larger than this is a typo (a range where a list was meant), not a plan."""
RANDOM_ATTEMPTS = 100
"""Draws per wanted run before a random sweep gives up looking for new combinations."""

OptimizerKind = Literal["sgd", "adam", "rmsprop", "adagrad"]
assert set(OptimizerKind.__args__) == set(OPTIMIZER_KINDS)  # type: ignore[attr-defined]
LearningRate = Annotated[float, Field(gt=0, le=100)]
BatchSize = Annotated[int, Field(ge=1)]


class SweepSpec(BaseModel):
    """Which values to try; an axis left empty keeps the base project's value."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    method: Literal["grid", "random"] = "grid"
    learning_rates: list[LearningRate] = Field(default_factory=list)
    learning_rate_range: list[LearningRate] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="random only: low and high of a log-uniform learning rate",
    )
    batch_sizes: list[BatchSize] = Field(default_factory=list)
    optimizers: list[OptimizerKind] = Field(default_factory=list)
    count: int | None = Field(None, ge=1, le=MAX_RUNS, description="random only: runs to draw")
    seed: int = Field(0, ge=0, le=MAX_SEED)

    @model_validator(mode="after")
    def _check(self) -> SweepSpec:
        raise_problems("SweepSpec", self._problems())
        return self

    def _problems(self) -> list[Problem]:
        problems = []
        for name in ("learning_rates", "batch_sizes", "optimizers"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                problems.append(Problem((name,), "lists a value twice"))
        if self.learning_rate_range is not None:
            low, high = self.learning_rate_range
            if self.method != "random":
                problems.append(Problem(("learning_rate_range",), "applies only to random"))
            elif low >= high:
                problems.append(Problem(("learning_rate_range",), "low must be below high"))
            if self.learning_rates:
                problems.append(
                    Problem(("learning_rate_range",), "give learning_rates or a range, not both")
                )
        if self.method == "random" and self.count is None:
            problems.append(Problem(("count",), "a random sweep needs the number of runs"))
        if self.method == "grid" and self.count is not None:
            problems.append(Problem(("count",), "applies only to random; a grid runs them all"))
        if not (
            self.learning_rates or self.learning_rate_range or self.batch_sizes or self.optimizers
        ):
            problems.append(Problem((), "name at least one value to sweep"))
        choices = self._choice_count()
        if self.method == "grid" and choices > MAX_RUNS:
            problems.append(
                Problem((), f"the grid has {choices} runs; at most {MAX_RUNS} are allowed")
            )
        if (
            self.method == "random"
            and self.count is not None
            and self.learning_rate_range is None
            and self.count > choices
        ):
            problems.append(
                Problem(
                    ("count",),
                    f"only {choices} different combinations exist; use a grid or fewer runs",
                )
            )
        return problems

    def _choice_count(self) -> int:
        return (
            max(len(self.learning_rates), 1)
            * max(len(self.batch_sizes), 1)
            * max(len(self.optimizers), 1)
        )


@dataclass(frozen=True)
class SweepPoint:
    """One combination; None keeps the base project's value."""

    learning_rate: float | None = None
    batch_size: int | None = None
    optimizer: str | None = None

    def label(self) -> str:
        """``lr=0.01 bs=32 adam``: the swept values only, the way the runs are told apart."""
        parts = []
        if self.learning_rate is not None:
            parts.append(f"lr={self.learning_rate:g}")
        if self.batch_size is not None:
            parts.append(f"bs={self.batch_size}")
        if self.optimizer is not None:
            parts.append(self.optimizer)
        return " ".join(parts)


@dataclass(frozen=True)
class Rejected:
    """A combination that is not a valid project, and why."""

    name: str
    problems: list[Problem]

    def __str__(self) -> str:
        return f"{self.name}: " + "; ".join(str(problem) for problem in self.problems)


@dataclass(frozen=True)
class SweepExpansion:
    projects: list[Project]
    rejected: list[Rejected]


def load_sweep_spec(data: object, source: str = "sweep") -> SweepSpec:
    """The spec, or a ProblemsError naming each bad field."""
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise ProblemsError(problems_from_validation_error(exc, model=SweepSpec), source) from None


def sweep_points(spec: SweepSpec) -> list[SweepPoint]:
    """The combinations to run, in the order they run."""
    rates: list[float | None] = list(spec.learning_rates) or [None]
    sizes: list[int | None] = list(spec.batch_sizes) or [None]
    kinds: list[str | None] = list(spec.optimizers) or [None]
    if spec.method == "grid":
        return [SweepPoint(*values) for values in itertools.product(rates, sizes, kinds)]
    draw = random.Random(spec.seed)
    assert spec.count is not None  # the spec's validator requires it for random
    points: list[SweepPoint] = []
    for _ in range(spec.count * RANDOM_ATTEMPTS):
        if len(points) == spec.count:
            break
        if spec.learning_rate_range is not None:
            low, high = spec.learning_rate_range
            # Three significant digits: names stay readable and the value reads back as run.
            drawn = math.exp(draw.uniform(math.log(low), math.log(high)))
            rate: float | None = float(f"{drawn:.3g}")
        else:
            rate = draw.choice(rates)
        point = SweepPoint(rate, draw.choice(sizes), draw.choice(kinds))
        if point not in points:
            points.append(point)
    return points


def expand(base: Project, spec: SweepSpec) -> SweepExpansion:
    """One validated project per combination, named ``<base name> lr=… bs=… <optimizer>``."""
    projects: list[Project] = []
    rejected: list[Rejected] = []
    for point in sweep_points(spec):
        label = point.label()
        name = f"{base.name[: 200 - len(label) - 1]} {label}"
        try:
            projects.append(load_project_data(_apply(base, point, name), name))
        except ProblemsError as exc:
            rejected.append(Rejected(name, exc.problems))
    return SweepExpansion(projects, rejected)


def _apply(base: Project, point: SweepPoint, name: str) -> dict[str, Any]:
    """The base project's data with the point's values, ready to validate as a new project."""
    data = base.model_dump(mode="json")
    data["name"] = name
    optimizer = data["optimizer"]
    if point.optimizer is not None and point.optimizer != optimizer["kind"]:
        # Another optimizer's own settings (momentum, beta_1) do not carry over; its defaults do.
        optimizer = {"kind": point.optimizer, "learning_rate": optimizer["learning_rate"]}
    if point.learning_rate is not None:
        optimizer = {**optimizer, "learning_rate": point.learning_rate}
    data["optimizer"] = optimizer
    if point.batch_size is not None:
        data["data"] = {**data["data"], "global_batch_size": point.batch_size}
    return data
