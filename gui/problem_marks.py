"""Showing a validation problem on the widget that owns the bad value.

Problems come from the pydantic models with a location (``data.features``,
``model.layers.0.units``); each form registers which widget owns which location,
and :func:`route` gives a problem to the widget with the longest matching prefix.
The look (red background, the model's message as tooltip) matches the TF_CONFIG
editor's, so a wrong value looks the same everywhere in the window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from PySide6.QtWidgets import QFrame, QGroupBox, QWidget

from engine.problems import Loc, Problem

BAD_BACKGROUND = "#ffd6d6"
BAD_BORDER = "#c62828"
_BASE_TOOLTIP = "distloopBaseToolTip"
_MARKED = "problem"


def route(
    problems: Iterable[Problem], targets: Mapping[Loc, QWidget]
) -> tuple[dict[QWidget, list[str]], list[Problem]]:
    """Messages per owning widget, and the problems no widget owns."""
    owned: dict[QWidget, list[str]] = {}
    unowned: list[Problem] = []
    for problem in problems:
        widget = owner(problem.loc, targets)
        if widget is None:
            unowned.append(problem)
        else:
            owned.setdefault(widget, []).append(problem.message)
    return owned, unowned


def owner(loc: Loc, targets: Mapping[Loc, QWidget]) -> QWidget | None:
    """The widget registered for the longest prefix of ``loc``."""
    for end in range(len(loc), 0, -1):
        widget = targets.get(loc[:end])
        if widget is not None:
            return widget
    return None


def _styled(widget: QWidget) -> QWidget:
    """Composite editors name the inner widget that shows the mark (``mark_target``)."""
    target = getattr(widget, "mark_target", None)
    return target if isinstance(target, QWidget) else widget


def set_problems(widget: QWidget, messages: list[str]) -> None:
    """Marks ``widget`` with ``messages`` (its tooltip lists them); none clears the mark.

    The style names the widget's own class so it does not cascade into children: a
    combo box's popup or a group box's fields keep their normal look. Containers
    get a red border only, so the fields inside stay readable.
    """
    target = _styled(widget)
    if target.property(_BASE_TOOLTIP) is None:
        target.setProperty(_BASE_TOOLTIP, target.toolTip())
    base = str(target.property(_BASE_TOOLTIP))
    target.setProperty(_MARKED, bool(messages))
    if not messages:
        target.setStyleSheet("")
        target.setToolTip(base)
        return
    name = target.metaObject().className()
    if isinstance(target, QFrame | QGroupBox):
        target.setStyleSheet(f"{name} {{ border: 2px solid {BAD_BORDER}; border-radius: 3px; }}")
    else:
        target.setStyleSheet(
            f"{name} {{ background-color: {BAD_BACKGROUND}; color: #000000;"
            f" border: 1px solid {BAD_BORDER}; }}"
        )
    listed = "\n".join(f"• {message}" for message in messages)
    target.setToolTip(f"{listed}\n\n{base}" if base else listed)


def is_marked(widget: QWidget) -> bool:
    return bool(_styled(widget).property(_MARKED))


def problem_tooltip(widget: QWidget) -> str:
    """The tooltip a marked widget shows (the one that lists its problems)."""
    return _styled(widget).toolTip()
