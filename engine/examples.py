"""The built-in example projects shipped in ``resources/examples``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from .config import Project
from .project_file import load_project_text


def _examples_dir() -> resources.abc.Traversable:
    return resources.files("distloop.resources").joinpath("examples")


def example_names() -> list[str]:
    """Names accepted by ``distloop example NAME``, seed first."""
    names = sorted(
        entry.name.removesuffix(".json")
        for entry in _examples_dir().iterdir()
        if entry.name.endswith(".json")
    )
    return sorted(names, key=lambda name: name != "seed")


def example_text(name: str) -> str:
    """The example's JSON exactly as shipped; KeyError for an unknown name."""
    entry = _examples_dir().joinpath(f"{name}.json")
    if name not in example_names():
        raise KeyError(name)
    return entry.read_text(encoding="utf-8")


def portable_example_text(name: str) -> str:
    """The example as shipped, but with its files (data folder, custom code) named by
    absolute paths, so the printed project runs wherever the user saves it."""
    shipped = json.loads(example_text(name))
    resolved = load_example(name).model_dump(mode="json")
    return json.dumps(_take_changed_strings(shipped, resolved), indent=2) + "\n"


def _take_changed_strings(shipped: Any, resolved: Any) -> Any:
    """``shipped`` with every string that resolving changed (only paths change) replaced."""
    if isinstance(shipped, dict) and isinstance(resolved, dict):
        return {
            key: _take_changed_strings(value, resolved.get(key)) for key, value in shipped.items()
        }
    if isinstance(shipped, str) and isinstance(resolved, str):
        return resolved
    return shipped


def load_example(name: str) -> Project:
    """The example, with its relative paths (custom code) resolved against the examples folder."""
    project = load_project_text(example_text(name), f"example {name}")
    # An installed package's folder is a real directory; resolve_paths needs a Path.
    return project.resolve_paths(Path(str(_examples_dir())))


def is_shipped(path: Path) -> bool:
    """True for a file of the installed examples: code that came with Distloop itself."""
    return path.resolve().is_relative_to(Path(str(_examples_dir())).resolve())
