"""The project file's actions: New, Open, Open Recent, the examples, Save, Save As, and the
exports made from the project (a script, its JSON, a cluster setup).

They all act on the one open :class:`gui.project.project_document.ProjectDocument`, so they
live beside it rather than in the window, which only places them in its menus and toolbar.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QStyle, QWidget

from ...engine.examples import example_names, example_text
from .project_document import ProjectDocument


class ProjectActions(QObject):
    """The document's actions and its two submenus, Open Recent and Examples."""

    def __init__(self, window: QWidget, document: ProjectDocument) -> None:
        """``window`` gives the actions their icons and the submenus their parent."""
        super().__init__(window)
        self._window = window
        pixmap = QStyle.StandardPixmap
        standard = QKeySequence.StandardKey
        self.new_action = self._action(
            "&New",
            document.new,
            standard.New,
            pixmap.SP_FileIcon,
            "Start a new project from the seed example",
        )
        self.open_action = self._action(
            "&Open…",
            document.open,
            standard.Open,
            pixmap.SP_DialogOpenButton,
            "Open a project file",
        )
        self.save_action = self._action(
            "&Save",
            document.save,
            standard.Save,
            pixmap.SP_DialogSaveButton,
            "Save the project",
        )
        self.save_as_action = self._action(
            "Save &As…",
            document.save_as,
            "Ctrl+Shift+S",
            None,
            "Save the project under a new name",
        )
        self.export_script_action = self._action(
            "Export as &Script…",
            document.export_script,
            "Ctrl+Shift+E",
            None,
            "Write the project as a standalone TensorFlow program that needs no Distloop",
        )
        self.copy_json_action = self._action(
            "Copy Project &JSON",
            document.copy_json,
            "Ctrl+Shift+J",
            None,
            "Copy the project file's text to the clipboard",
        )
        self.export_cluster_action = self._action(
            "Export &Cluster Setup…",
            document.export_cluster_setup,
            None,
            None,
            "Write the files that start this project's cluster on real hosts: TF_CONFIGs, "
            "shell scripts, Kubernetes manifests or a Kubeflow TFJob",
        )
        self.recent_menu = QMenu("Open &Recent", window)
        # Filled as it opens, so files opened in another Distloop window are listed too.
        self.recent_menu.aboutToShow.connect(lambda: document.fill_recent_menu(self.recent_menu))
        self.examples_menu = QMenu("&Examples", window)
        for name in example_names():
            title = json.loads(example_text(name)).get("name", name)
            action = self.examples_menu.addAction(f"{name}: {title}")
            action.triggered.connect(lambda _checked=False, n=name: document.open_example(n))

    def _action(
        self,
        text: str,
        slot: Callable[[], object],
        shortcut: QKeySequence.StandardKey | str | None,
        icon: QStyle.StandardPixmap | None,
        tip: str,
    ) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if icon is not None:
            action.setIcon(self._window.style().standardIcon(icon))
        action.setStatusTip(tip)
        action.setToolTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        return action
