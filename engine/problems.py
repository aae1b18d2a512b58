"""Validation problems as users see them: a dotted path to the bad field and a message.

Every loader and validator in Distloop reports through this one shape, so the CLI
prints, and the GUI marks, the same problems the pydantic models find. Cross-field
rules raise a real ``pydantic.ValidationError`` (see :func:`raise_problems`), which
keeps the models the single source of truth: ``Project.model_validate`` alone
enforces every rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

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
        return f"{self.path}: {self.message}" if self.loc else self.message


class ProblemsError(ValueError):
    """Raised by loaders when an input cannot be used; carries every problem found."""

    def __init__(self, problems: Sequence[Problem], what: str = "input") -> None:
        self.problems = list(problems)
        self.what = what
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{what} has {len(self.problems)} problem(s):\n{lines}")


def problems_from_validation_error(error: ValidationError, prefix: Loc = ()) -> list[Problem]:
    """Turns pydantic's errors into Problems, dropping the union-branch noise from locs.

    Discriminated unions put the tag in the location (``layers.0.dense.units``);
    users never typed that tag as a key, so it is removed.
    """
    problems = []
    for err in error.errors(include_url=False):
        loc = tuple(part for part in err["loc"] if not _is_union_tag(part))
        message = err["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        problems.append(Problem(prefix + loc, message))
    return problems


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
