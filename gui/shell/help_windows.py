"""Help ▸ Keyboard Shortcuts and Help ▸ Distloop Guide: both read from what is there.

The shortcut list is built from the window's own actions when it opens, so it never
disagrees with the menus. The guide is the README and the pages under ``docs/`` it
links to (the checkout's or the bundle's files beside the package's folders; else the
installed package's metadata, which carries the README as its description), shown and
followed in the window: opening a file or a web page needs a desktop handler that a
bare X session, or a cluster's login node, lacks.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence, QTextCursor, QTextDocument
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHeaderView,
    QMainWindow,
    QMenu,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ... import resources
from ..widgets.close_keys import close_button

PACKAGE = "distloop"
IMAGE_WIDTH = 820  # pixels: the guide's width less its margins
PACKAGE_ROOT = Path(resources.__file__).resolve().parents[1]
"""The folder holding ``resources/``: the checkout, or the installed ``distloop`` folder.
The README's image paths (``resources/screenshots/...``) start there."""


def _plain(text: str) -> str:
    """A menu text without its mnemonic marks: ``Save &As…`` → ``Save As…``."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


def _keys(action: QAction) -> str:
    return ", ".join(
        key.toString(QKeySequence.SequenceFormat.NativeText) for key in action.shortcuts()
    )


def shortcut_rows(window: QMainWindow) -> list[tuple[str, str, str]]:
    """``(where, command, keys)`` for every action of ``window`` with a shortcut.

    Menu actions first, in menu order, as ``File``, ``View``, ...; then the actions that
    live in a panel (the runs table's) under that panel's name.
    """
    rows: list[tuple[str, str, str]] = []
    seen: set[QAction] = set()

    def walk(menu: QMenu, where: str) -> None:
        for action in menu.actions():
            if action.menu() is not None:
                walk(action.menu(), f"{where} ▸ {_plain(action.text())}")
            elif action.shortcuts() and action not in seen:
                seen.add(action)
                rows.append((where, _plain(action.text()), _keys(action)))

    for top in window.menuBar().actions():
        if top.menu() is not None:
            walk(top.menu(), _plain(top.text()))
    for action in window.findChildren(QAction):
        if action.shortcuts() and action not in seen and action.text():
            seen.add(action)
            rows.append((_panel_of(action), _plain(action.text()), _keys(action)))
    return rows


def _panel_of(action: QAction) -> str:
    """The dock an action's widget sits in (its title), for actions outside the menus."""
    for owner in action.associatedObjects():
        widget = owner if isinstance(owner, QWidget) else None
        while widget is not None:
            if widget.windowTitle() and not widget.isWindow():
                return widget.windowTitle()
            widget = widget.parentWidget()
    return "Window"


class ShortcutsWindow(QDialog):
    """Every shortcut of the window, in a table that can be read, sorted and copied."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.setWindowTitle("Keyboard Shortcuts — Distloop")
        rows = shortcut_rows(window)
        self.table = QTableWidget(len(rows), 3)
        self.table.setHorizontalHeaderLabels(["Where", "Command", "Keys"])
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        for row, cells in enumerate(rows):
            for column, text in enumerate(cells):
                self.table.setItem(row, column, QTableWidgetItem(text))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        buttons = close_button(self)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(620, 560)


def _installed_readme() -> str | None:
    """The README as the installed package's description (an install without the file)."""
    try:
        description = metadata.metadata(PACKAGE).get_payload()  # type: ignore[attr-defined]
    except metadata.PackageNotFoundError:
        return None
    return description if isinstance(description, str) and description.strip() else None


MISSING_IMAGE = "(a screenshot, not installed with the app)"
"""Said where a page shows a screenshot this installation lacks (the .deb leaves them out:
documentation, not the app's data), instead of Qt's broken-image icon at full width."""


def _fit_images(document: QTextDocument, width: int) -> None:
    """Shows the screenshots ``width`` pixels wide (at 1400 px they scrolled sideways),
    and says :data:`MISSING_IMAGE` for those not here."""
    cursor = QTextCursor(document)
    block = document.begin()
    while block.isValid():
        fragments = block.begin()
        while not fragments.atEnd():
            fragment = fragments.fragment()
            fragments += 1  # before any edit of this fragment
            if not fragment.charFormat().isImageFormat():
                continue
            image = fragment.charFormat().toImageFormat()
            cursor.setPosition(fragment.position())
            cursor.setPosition(
                fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor
            )
            if _image_file(document, image.name()) is None:
                cursor.insertText(MISSING_IMAGE)
                continue
            image.setWidth(width)  # the height follows, keeping the proportions
            cursor.setCharFormat(image)
        block = block.next()


def _image_file(document: QTextDocument, name: str) -> Path | None:
    """The local file an image of the page names, relative to the page (or to the
    installation, for a README read from the package's metadata); None when absent."""
    base = document.baseUrl()
    if base.isEmpty():
        base = QUrl.fromLocalFile(str(PACKAGE_ROOT) + "/")
    url = base.resolved(QUrl(name))
    if not url.isLocalFile():
        return None
    path = Path(url.toLocalFile())
    return path if path.is_file() else None


class GuideWindow(QDialog):
    """The README and its pages, rendered; web links open in the browser when the
    desktop has one."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setWindowTitle("Distloop Guide")
        self.setWindowFlag(Qt.WindowType.WindowMaximizeButtonHint)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)  # followed here: _follow
        self.browser.anchorClicked.connect(self._follow)
        self.browser.sourceChanged.connect(
            lambda _: _fit_images(self.browser.document(), IMAGE_WIDTH)
        )
        readme = PACKAGE_ROOT / "README.md"
        if readme.is_file():
            self.browser.setSource(QUrl.fromLocalFile(str(readme)))
        else:
            self.browser.setSearchPaths([str(PACKAGE_ROOT)])
            text = _installed_readme()
            if text is None:
                self.browser.setPlainText(
                    "The README is not in this installation; see the project's page for it."
                )
            else:
                self.browser.setMarkdown(text)
                _fit_images(self.browser.document(), IMAGE_WIDTH)
        back = QPushButton("Back")
        back.setShortcut(QKeySequence(QKeySequence.StandardKey.Back))
        back.setEnabled(False)
        back.clicked.connect(self.browser.backward)
        self.browser.backwardAvailable.connect(back.setEnabled)
        self.back_button = back
        buttons = close_button(self)
        buttons.addButton(back, buttons.ButtonRole.ActionRole)
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser)
        layout.addWidget(buttons)
        self.resize(900, 700)

    def _follow(self, link: QUrl) -> None:
        """A page of the guide opens here, by its whole path so that Back finds it again;
        a web link in the desktop's browser; a page this installation lacks says so."""
        if link.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(link)
            return
        target = self.browser.source().resolved(link)
        if target.isLocalFile() and Path(target.toLocalFile()).is_file():
            self.browser.setSource(target)
        elif link.hasFragment() and not link.path():
            self.browser.scrollToAnchor(link.fragment())
        else:
            self.browser.setPlainText(
                f"{link.toString()} is not in this installation; see the project's page for it."
            )
