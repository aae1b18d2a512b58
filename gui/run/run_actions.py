"""Run and Stop, and the status bar's line on whether the project can run: their texts,
tooltips and enable rules in one place.

Run reads "Run Cluster" when the project's strategy runs as a local cluster
(:func:`engine.cluster.run_plans.cluster_plan`), and is enabled only when the engine's
loader accepts the forms' content and, for a cluster, its plan can start here; its
tooltip says why not. A study going on (the window tells :meth:`RunActions.update`) holds
Run as a run does, and Stop stops it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QStyle, QWidget

from ...engine.cluster.run_plans import cluster_plan
from ..project.project_document import ProjectDocument
from .run_controller import RunController, RunState

RUN_TIP = "Train the project (Ctrl+R)"


class RunActions(QObject):
    """The window's Run and Stop actions and its validity line, kept up to date."""

    def __init__(
        self,
        window: QWidget,
        controller: RunController,
        document: ProjectDocument,
        run: Callable[[], None],
        stop: Callable[[], None],
    ) -> None:
        """``run`` and ``stop``: what the actions do (Stop ends a study too, which only the
        window knows of); ``window`` gives the actions their icons."""
        super().__init__(window)
        self._controller = controller
        self._document = document
        pixmap = QStyle.StandardPixmap
        self.run_action = self._action(window, "&Run", run, "Ctrl+R", pixmap.SP_MediaPlay, RUN_TIP)
        self.stop_action = self._action(
            window,
            "S&top",
            stop,
            "Ctrl+.",
            pixmap.SP_MediaStop,
            "Stop after the current step; kill the engine if it does not stop within 5 s",
        )
        self.validity = QLabel()
        """The status bar's line: ready, the problems' summary, or what is going on."""
        self.runnable = False
        """The project as the forms show it would start (valid, and its cluster plan too)."""

    def _action(
        self,
        window: QWidget,
        text: str,
        slot: Callable[[], None],
        shortcut: str,
        icon: QStyle.StandardPixmap,
        tip: str,
    ) -> QAction:
        action = QAction(text, self)
        action.setShortcut(QKeySequence(shortcut))
        action.setIcon(window.style().standardIcon(icon))
        action.setStatusTip(tip)
        action.setToolTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        return action

    def update(self, studying: bool) -> None:
        """Texts and states as the project's validation, the run and ``studying`` (a
        study is going on, between two trials too) now say."""
        active = self._controller.active
        validation = self._document.validation
        plan = cluster_plan(validation.project)  # None: the project runs as one process
        self.runnable = validation.valid and (plan is None or plan.runnable)
        summary = validation.summary() if plan is None else plan.summary()
        single_tip = RUN_TIP if self.runnable else summary
        tip = single_tip if plan is None else plan.describe()  # a cluster's tasks and ports
        self.run_action.setText("&Run" if plan is None else "&Run Cluster")
        self.run_action.setEnabled(self.runnable and not active and not studying)
        self.run_action.setToolTip(
            "A study is running" if studying else "A run is in progress" if active else tip
        )
        self.stop_action.setEnabled(
            studying or (active and self._controller.state is not RunState.STOPPING)
        )
        self.validity.setText(
            "Study in progress" if studying else "Run in progress" if active else summary
        )
