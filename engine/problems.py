"""Validation problems as users see them: a dotted path to the bad field and a message.

Every loader and validator in Distloop reports through this one shape, so the CLI
prints, and the GUI marks, the same problems the pydantic models find. Cross-field
rules raise a real ``pydantic.ValidationError`` (see :func:`raise_problems`), which
keeps the models the single source of truth: ``Project.model_validate`` alone
enforces every rule of the schema; the rules that ask a data source are added by the
loaders (``engine.project_file``), in the same shape.
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from .code_text import printable, shown

Loc = tuple[str | int, ...]
RULE_ERROR_TYPE = "distloop_rule"
"""pydantic error type of the rules raised by :func:`raise_problems` (not shape errors)."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, located by its path inside the document."""

    loc: Loc
    message: str

    @property
    def path(self) -> str:
        """The location written the way users read it: ``model.layers.0.units``."""
        return ".".join(str(part) for part in self.loc)

    def __str__(self) -> str:
        """One line however the input was written: a value quoted in the message (a
        ``data.path`` holding a line break and a terminal escape) cannot start a line of
        its own or rewrite the ones above (``code_text.printable``)."""
        message = printable(self.message)
        return f"{printable(self.path)}: {message}" if self.loc else message


class ProblemsError(ValueError):
    """Raised by loaders when an input cannot be used; carries every problem found."""

    def __init__(self, problems: Sequence[Problem], what: str = "input") -> None:
        self.problems = list(problems)
        self.what = what
        if len(self.problems) == 1 and not self.problems[0].loc:
            # One problem with the whole input (unreadable, not JSON): one line, like a compiler.
            super().__init__(f"{what}: {self.problems[0].message}")
            return
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{what} has {len(self.problems)} problem(s):\n{lines}")


def parse_json_text(text: str, what: str) -> Any:
    """JSON text as Python data, or a ProblemsError saying where it stops being JSON.

    A leading UTF-8 byte order mark (Windows editors write one) is skipped. A key given
    twice in one object is refused: ``json`` keeps the last silently, so the value a user
    reads first in the file would not be the one used.
    """
    try:
        return json.loads(text.removeprefix("\ufeff"), object_pairs_hook=_unique_keys)
    except DuplicateKey as exc:
        raise ProblemsError([Problem((), str(exc))], what) from None
    except json.JSONDecodeError as exc:
        # json's messages end in "at" before the position it leaves out of msg.
        message = re.sub(r" at$", " here", exc.msg)
        position = f"line {exc.lineno}, column {exc.colno}"
        raise ProblemsError([Problem((), f"{position}: not valid JSON: {message}")], what) from None
    except (ValueError, RecursionError) as exc:  # huge integers, absurd nesting
        raise ProblemsError([Problem((), f"not readable as JSON: {exc}")], what) from None


class DuplicateKey(ValueError):
    """A JSON object names a key twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(f"{shown(key)} is given twice in one object: keep one")
        found[key] = value
    return found


_STRICT_TYPE_ERRORS = ("int_type", "float_type", "bool_type", "string_type")


def problems_from_validation_error(
    error: ValidationError, prefix: Loc = (), model: type[BaseModel] | None = None
) -> list[Problem]:
    """Turns pydantic's errors into Problems, dropping the union-branch noise from locs.

    Discriminated unions put the tag in the location (``layers.0.dense.units``);
    users never typed that tag as a key, so it is removed. With the validated
    ``model``, an unknown key gets the closest known key as a suggestion, and a
    value of the wrong JSON type is quoted, since ``"0.5"`` and ``0.5`` look alike.
    """
    problems = []
    for err in error.errors(include_url=False):
        loc = tuple(part for part in err["loc"] if not _is_union_tag(part))
        message = err["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if err["type"] == "string_too_short" and err.get("ctx", {}).get("min_length") == 1:
            message = "must not be empty"  # pydantic: "String should have at least 1 character"
        if err["type"] in _STRICT_TYPE_ERRORS and isinstance(
            err["input"], str | bool | int | float | None
        ):
            message = f"{message}, not {_shown(err['input'])}"
        if err["type"] == "extra_forbidden" and model is not None and err["loc"]:
            known = _known_keys(model, err["loc"][:-1])
            close = difflib.get_close_matches(str(err["loc"][-1]), known, n=1, cutoff=0.6)
            if close:
                message = f"unknown key; did you mean {close[0]!r}?"
            elif known:
                message = f"unknown key; known keys: {', '.join(known)}"
        problems.append(Problem(prefix + loc, message))
    return problems


def _shown(value: str | bool | float | None) -> str:
    """A JSON value as the file spells it, shortened to fit a one-line message."""
    text = json.dumps(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _known_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys a JSON object at ``loc`` (pydantic's raw location, tags included) may have."""
    current: Any = model
    for part in loc:
        current = _child_type(current, part)
        if current is None:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """The type under ``Annotated`` and ``Optional``; unions of several types stay unions."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _child_type(annotation: Any, part: str | int) -> Any:
    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(str(part))
        return None if field is None else field.annotation
    if origin in (Union, types.UnionType):  # a discriminated union: the location names the tag
        for member in typing.get_args(annotation):
            member = _unwrap(member)
            if (
                isinstance(member, type)
                and issubclass(member, BaseModel)
                and any(field.default == part for field in member.model_fields.values())
            ):
                return member
        return None
    if origin is list and isinstance(part, int):
        return typing.get_args(annotation)[0]
    if origin is dict and isinstance(part, str):
        return typing.get_args(annotation)[1]
    return None


_UNION_TAGS: set[str] = set()


def register_union_tags(tags: Iterable[str]) -> None:
    """Declares discriminator values, which pydantic inserts into error locations."""
    _UNION_TAGS.update(tags)


def _is_union_tag(part: Any) -> bool:
    return isinstance(part, str) and (part in _UNION_TAGS or part.startswith("function-"))


def raise_problems(title: str, problems: Sequence[Problem]) -> None:
    """Raises the problems as one ValidationError so each keeps its own location."""
    if not problems:
        return
    raise ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError(RULE_ERROR_TYPE, "{message}", {"message": p.message}),
                loc=p.loc,
                input=None,
            )
            for p in problems
        ],
    )
