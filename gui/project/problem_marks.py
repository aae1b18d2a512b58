"""Showing a validation problem on the widget that owns the bad value.

Problems come from the pydantic models with a location (``data.features``,
``model.layers.0.units``); each form registers which widget owns which location,
and :func:`route` gives a problem to the widget with the longest matching prefix.
The look (red background, the model's message as tooltip) matches the TF_CONFIG
editor's, so a wrong value looks the same everywhere in the window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QAbstractScrollArea, QFrame, QGroupBox, QWidget

from ...engine.problems import Loc, Problem

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

    Editors get a red palette, so spin box arrows, combo arrows and check marks
    keep their native drawing; containers (a layer's card, a group) get a red
    border from a style rule that matches the marked widget only, not its children.
    """
    target = _styled(widget)
    if target.property(_BASE_TOOLTIP) is None:
        target.setProperty(_BASE_TOOLTIP, target.toolTip())
    base = str(target.property(_BASE_TOOLTIP))
    target.setProperty(_MARKED, bool(messages))
    if isinstance(target, QFrame | QGroupBox) and not isinstance(target, QAbstractScrollArea):
        name = target.metaObject().className()
        target.setStyleSheet(
            f'{name}[{_MARKED}="true"] {{ border: 2px solid {BAD_BORDER}; border-radius: 3px; }}'
            if messages
            else ""
        )
    else:
        target.setPalette(_bad_palette(target) if messages else QPalette())
    if not messages:
        target.setToolTip(base)
        return
    listed = "\n".join(f"• {message}" for message in messages)
    target.setToolTip(f"{listed}\n\n{base}" if base else listed)


def _bad_palette(widget: QWidget) -> QPalette:
    palette = QPalette(widget.palette())
    for role in (QPalette.ColorRole.Base, QPalette.ColorRole.Button):
        palette.setColor(role, QColor(BAD_BACKGROUND))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        palette.setColor(role, QColor("#000000"))
    return palette


def is_marked(widget: QWidget) -> bool:
    return bool(_styled(widget).property(_MARKED))


def problem_tooltip(widget: QWidget) -> str:
    """The tooltip a marked widget shows (the one that lists its problems)."""
    return _styled(widget).toolTip()
