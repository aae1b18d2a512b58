"""The mouse wheel scrolls the forms; it changes a number or a choice only once focused.

Scrolling the Model tab over a conv layer's card turned its filters from 16 to 13 and
its initializer into ``constant``, without a click. The wheel turns here are real
QWheelEvents, through Qt's window-system queue as X's would come.
"""

from __future__ import annotations

from distloop.engine.examples import load_example
from distloop.engine.problems import Problem
from distloop.gui.project.project_editor import ProjectEditor
from PySide6.QtCore import QPoint, QPointF
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

NOTCH = 120  # one notch of a mouse wheel, in eighths of a degree


def turn_wheel(widget: QWidget, notches: int) -> None:
    """Turns the wheel ``notches`` (negative: towards the user) over ``widget``'s middle.

    QTest.wheelEvent goes through Qt's window-system queue, as a turn of a real wheel
    does: Qt hands it to the widget under the pointer and offers it to the parents.
    """
    window = widget.window()
    middle = widget.mapTo(window, QPoint(widget.width() // 2, widget.height() // 2))
    QTest.wheelEvent(window.windowHandle(), QPointF(middle), QPoint(0, notches * NOTCH))
    QApplication.processEvents()


def model_tab(qtbot) -> tuple[ProjectEditor, QScrollArea]:
    editor = ProjectEditor()
    qtbot.addWidget(editor)
    editor.set_project(load_example("digits"))
    editor.resize(470, 420)  # shorter than the model's cards: the tab scrolls
    editor.setCurrentIndex(editor.tab_of(Problem(("model",), "")))
    editor.show()
    qtbot.waitExposed(editor)
    page = editor.currentWidget()
    assert isinstance(page, QScrollArea)
    return editor, page


def test_the_wheel_over_unfocused_fields_scrolls_the_form(qtbot) -> None:
    editor, page = model_tab(qtbot)
    card = next(card for card in editor.model.cards if card.kind.value() == "conv2d")
    filters = card.forms["conv2d"].editors["filters"]
    initializer = card.initializer.editors["kind"]
    page.ensureWidgetVisible(filters)
    before = filters.value(), initializer.value(), editor.model.value()
    scrollbar = page.verticalScrollBar()
    start = scrollbar.value()
    assert start < scrollbar.maximum()

    turn_wheel(filters, -3)
    turn_wheel(initializer, -3)
    turn_wheel(card.kind, -3)

    assert (filters.value(), initializer.value(), editor.model.value()) == before
    assert scrollbar.value() > start  # the form scrolled instead
    assert not filters.hasFocus() and not initializer.hasFocus()


def test_the_wheel_over_a_focused_field_changes_it(qtbot) -> None:
    editor, page = model_tab(qtbot)
    card = next(card for card in editor.model.cards if card.kind.value() == "conv2d")
    filters = card.forms["conv2d"].editors["filters"]
    page.ensureWidgetVisible(filters)
    filters.setFocus()
    qtbot.waitUntil(filters.hasFocus)
    value = filters.value()
    turn_wheel(filters, 1)
    assert filters.value() == value + 1
