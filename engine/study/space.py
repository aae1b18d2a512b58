"""The search space of a study: project fields by dotted path, each with what to try.

A space file is JSON; each key is a field's path in the project
(``optimizer.learning_rate``, ``model.layers.2.units``, ``data.global_batch_size``)
and each value one of

``{"low": a, "high": b, "log": bool}``  a float range, or an int range when the field
                                        holds an int and both ends are ints
``{"choices": [...]}``                  any of these values (the sampler picks)
``{"values": [...]}``                   an axis of a grid: each value is tried

Every path is checked against the project before a study starts: it must name a
field the project has, and each end of a range and every choice must make a valid
project on its own, so a typo or a range the field refuses is one problem with its
path, not a failed trial twenty minutes in.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..code_text import shortened, shown
from ..config import Project
from ..problems import (
    Problem,
    ProblemsError,
    parse_json_text,
    problems_from_validation_error,
)
from ..project_file import source_problems

MAX_AXES = 32
"""More settings than a search can learn anything about in a useful number of trials."""
MAX_CHOICES = 1000
Value = bool | int | float | str | None
_EXPECTED = (
    'expected a JSON object of field paths, e.g. {"optimizer.learning_rate": '
    '{"low": 1e-4, "high": 1, "log": true}}'
)


@dataclass(frozen=True)
class FloatRange:
    low: float
    high: float
    log: bool = False


@dataclass(frozen=True)
class IntRange:
    low: int
    high: int
    log: bool = False


@dataclass(frozen=True)
class Choices:
    """Values to pick from; ``grid`` says they came as a grid axis (``values``)."""

    values: tuple[Value, ...]
    grid: bool = False


Axis = FloatRange | IntRange | Choices


@dataclass(frozen=True)
class SearchSpace:
    """Axes by field path, in the file's order (the order trials suggest them)."""

    axes: dict[str, Axis]

    def is_grid(self) -> bool:
        return all(isinstance(axis, Choices) for axis in self.axes.values())

    def grid_size(self) -> int:
        return math.prod(len(a.values) for a in self.axes.values() if isinstance(a, Choices))

    def to_json(self) -> dict[str, Any]:
        """The space as its file writes it (kept in the study folder for a resume)."""
        out: dict[str, Any] = {}
        for path, axis in self.axes.items():
            if isinstance(axis, Choices):
                out[path] = {"values" if axis.grid else "choices": list(axis.values)}
            else:
                out[path] = {"low": axis.low, "high": axis.high, "log": axis.log}
        return out


def parse_space(text: str, project: Project, source: str = "space") -> SearchSpace:
    """Reads a space file's text and checks it against ``project``; ProblemsError says why not."""
    return space_from_data(parse_json_text(text, source), project, source)


def space_from_data(data: object, project: Project, source: str = "space") -> SearchSpace:
    if not isinstance(data, dict) or not data:
        raise ProblemsError([Problem((), _EXPECTED)], source)
    if len(data) > MAX_AXES:
        raise ProblemsError([Problem((), f"{len(data)} fields; at most {MAX_AXES}")], source)
    base = project.model_dump(mode="json")
    axes: dict[str, Axis] = {}
    problems: list[Problem] = []
    for path, spec in data.items():
        try:
            current = field_value(base, path)
            axis = _axis(spec, current)
        except ValueError as exc:  # the path may be no field at all: any text, any length
            problems.append(Problem((shortened(path),), str(exc)))
            continue
        for value in _ends(axis):
            problems += [
                Problem((path,), f"{shown(value)}: {p.message if p.path == path else p}")
                for p in value_problems(project, path, value)
            ]
        axes[path] = axis
    if problems:
        raise ProblemsError(problems, source)
    return SearchSpace(axes)


def _axis(spec: object, current: object) -> Axis:
    if not isinstance(spec, dict):
        raise ValueError('give {"low", "high"}, {"choices": [...]} or {"values": [...]}')
    keys = set(spec)
    if keys in ({"low", "high"}, {"low", "high", "log"}):
        low, high, log = spec["low"], spec["high"], spec.get("log", False)
        if not all(_is_number(v) for v in (low, high)) or not isinstance(log, bool):
            raise ValueError("low and high must be numbers, log true or false")
        if not math.isfinite(low) or not math.isfinite(high) or low >= high:
            raise ValueError(
                f"the range [{shortened(str(low))}, {shortened(str(high))}] is empty: low must "
                "be below high"
            )
        if log and low <= 0:
            raise ValueError("a log range must start above 0")
        if isinstance(current, bool) or not _is_number(current):
            raise ValueError(f"holds {json.dumps(current)}, not a number: use choices")
        if isinstance(current, int) and isinstance(low, int) and isinstance(high, int):
            return IntRange(low, high, log)
        return FloatRange(float(low), float(high), log)
    for key, grid in (("choices", False), ("values", True)):
        if keys == {key}:
            values = spec[key]
            if not isinstance(values, list) or not values:
                raise ValueError(f"{key} must be a non-empty list")
            if len(values) == 1:
                raise ValueError(f"{key} has one value: set it in the project instead")
            if len(values) > MAX_CHOICES:
                raise ValueError(f"{len(values)} {key}; at most {MAX_CHOICES}")
            if not all(isinstance(v, bool | int | float | str) or v is None for v in values):
                raise ValueError(f"{key} must be numbers, strings, true, false or null")
            if len({json.dumps(v) for v in values}) != len(values):
                raise ValueError(f"{key} lists a value twice")
            return Choices(tuple(values), grid)
    raise ValueError(
        f"unknown keys {shortened(str(sorted(keys)))}: give low/high[/log], choices or values "
        "(one of them)"
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ends(axis: Axis) -> tuple[Value, ...]:
    """The values that stand for the whole axis when checking it against the project."""
    if isinstance(axis, Choices):
        return axis.values
    return (axis.low, axis.high)


def field_value(data: dict[str, Any], path: str) -> object:
    """The value at ``path`` in a project's JSON; ValueError names the first missing part."""
    node: Any = data
    walked: list[str] = []
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            where = ".".join(walked) or "the project"
            raise ValueError(f"{shortened(where)} has no field {shown(part)}")
        walked.append(part)
    if isinstance(node, dict | list):
        raise ValueError("names a section, not a value: name one of its fields")
    return node


def with_values(project: Project, values: dict[str, Value], name: str) -> Project:
    """The project with each path set to its value, validated; ProblemsError says why not.

    A section whose ``kind`` changes (``optimizer.kind`` adam -> sgd) keeps only the
    settings the new kind has too, as the window's kind selectors do: adam's
    ``beta_1`` means nothing to SGD.
    """
    data = project.model_dump(mode="json")
    data["name"] = name
    for path, value in values.items():
        parent, key = _parent(data, path)
        parent[key] = value
    for _ in range(len(values) + 1):
        try:
            project = Project.model_validate(data)
        except ValidationError as exc:
            changed_kinds = {p.rsplit(".", 1)[0] for p in values if p.endswith(".kind")}
            foreign = [
                _data_path(data, e["loc"]) for e in exc.errors() if e["type"] == "extra_forbidden"
            ]
            dropped = [path for path in foreign if path.rpartition(".")[0] in changed_kinds]
            if not dropped:
                raise ProblemsError(
                    problems_from_validation_error(exc, model=Project), name
                ) from None
            for path in dropped:
                parent, key = _parent(data, path)
                parent.pop(key, None)
        else:  # the schema holds: now the rules that ask the data's source
            problems = source_problems(project)
            if problems:
                raise ProblemsError(problems, name)
            return project
    raise ProblemsError([Problem((), "the values do not make a valid project")], name)


def _data_path(data: dict[str, Any], loc: tuple[str | int, ...]) -> str:
    """An error location as a path in ``data``: pydantic adds a discriminated union's tag
    (``layers.0.dense.units``), which is no key of the document, so it is skipped."""
    node: Any = data
    parts: list[str] = []
    for part in loc:
        present = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        )
        if present:
            node = node[part]
            parts.append(str(part))
    return ".".join(parts)


def _parent(data: dict[str, Any], path: str) -> tuple[Any, Any]:
    *head, last = path.split(".")
    node: Any = data
    for part in head:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, (int(last) if isinstance(node, list) else last)


def value_problems(project: Project, path: str, value: Value) -> list[Problem]:
    """Why ``value`` at ``path`` makes no valid project (empty: it does)."""
    try:
        with_values(copy.deepcopy(project), {path: value}, project.name)
    except ProblemsError as exc:
        return exc.problems
    return []
