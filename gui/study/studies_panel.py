"""The Studies tab: every study among the runs, how far it got, and the buttons that
start one (Add Sweep…), continue a stopped one, stop the one running, and show one's
trials in the Study tab (:mod:`gui.study.study_views`; a double-click does too).

A row is read from the study's folder (:func:`engine.study.folders.list_studies`),
so a study of ``distloop sweep`` is listed as one of the window's, and one a
process runs now says so (its folder's lock). The folders are read off the window's
thread (a :class:`gui.common.background.Background`): a study folder may be anyone's,
and its ``study.db`` one that takes its reader's time until the read's deadline says it
is unreadable. The trials
themselves are runs: the Runs tab lists them, and the plot follows the one training.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QAction, QBrush, QColor, QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from ...engine.run_folder import folder_stamp
from ...engine.study.folders import StudyEntry, list_studies
from ..common.background import Background, WhenBusy
from ..widgets.tables import style_list_table
from .study_session import StudySession

HEADERS = ("Study", "State", "Trials", "Pruned", "Failed", "Search", "Folder")
STATE_COLORS = {
    "running": QColor(21, 101, 192),
    "stopped": QColor(230, 81, 0),
    "unreadable": QColor(198, 40, 40),
}
COLUMN_WIDTHS = (220, 80, 70, 60, 60, 260)
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


class StudiesPanel(QWidget):
    """The list of studies under ``runs_root`` and what can be done with them."""

    continue_requested = Signal(object)  # Path: the study folder to continue
    show_requested = Signal(object)  # Path: the study whose trials the Study tab shows
    listed = Signal()  # a listing arrived: ``entries`` are the studies as they are now

    def __init__(
        self,
        session: StudySession,
        runs_root: Callable[[], Path],
        add_sweep_action: QAction,
        parent: QWidget | None = None,
    ) -> None:
        """``add_sweep_action``: Add Sweep…, the study flow's (:mod:`gui.study.study_flow`),
        first on the tab's toolbar."""
        super().__init__(parent)
        self._session = session
        self._runs_root = runs_root
        self.entries: list[StudyEntry] = []
        self._idle = True
        self._lister = Background(
            self, WhenBusy.REPLACE, name="study-lister"
        )  # the latest folder asked for
        self._lister.done.connect(self._on_listed)
        self._wanted: Path | None = None
        """A study to select once a listing has it (it was asked for before)."""

        self.table = QTableWidget(0, len(HEADERS))
        self.table.setHorizontalHeaderLabels(HEADERS)
        style_list_table(self.table, QAbstractItemView.SelectionMode.SingleSelection)
        header = self.table.horizontalHeader()
        for column, width in enumerate(COLUMN_WIDTHS):
            header.resizeSection(column, width)

        pixmap = QStyle.StandardPixmap
        self.continue_action = self._action(
            "&Continue",
            self.continue_selected,
            "Continue the selected study: the trial it stopped in runs again",
            pixmap.SP_MediaPlay,
        )
        self.show_action = self._action(
            "Show &Trials",
            self.show_selected,
            "Show the selected study's trials, history, parallel coordinates and importances "
            "in the Study tab (double-click a study)",
            pixmap.SP_FileDialogDetailedView,
        )
        self.stop_action = self._action(
            "St&op Study",
            session.stop,
            "Stop the current trial and the study; Continue goes on where it stopped",
            pixmap.SP_MediaStop,
        )
        self.open_folder_action = self._action(
            "Open &Folder",
            self.open_selected_folder,
            "Show the study's folder (study.json, study.db, trials/)",
            pixmap.SP_DirOpenIcon,
        )
        self.toolbar = QToolBar("Studies")
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        for action in (
            add_sweep_action,
            self.continue_action,
            self.show_action,
            self.stop_action,
            self.open_folder_action,
        ):
            self.toolbar.addAction(action)
        self.summary = QLabel()
        self.toolbar.addSeparator()
        self.toolbar.addWidget(self.summary)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.table, 1)

        session.changed.connect(self.refresh)
        self.table.itemSelectionChanged.connect(self.update_actions)
        self.table.doubleClicked.connect(lambda _index: self.show_selected())
        self.refresh()

    def _action(
        self,
        text: str,
        slot: Callable[[], object],
        tip: str,
        icon: QStyle.StandardPixmap | None = None,
    ) -> QAction:
        action = QAction(text, self)
        if icon is not None:
            action.setIcon(self.style().standardIcon(icon))
        action.setToolTip(tip)
        action.setStatusTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        return action

    def refresh(self) -> None:
        """Reads the studies again (in the lister's thread), keeping the selected one
        selected when they arrive."""
        root = self._runs_root()
        self._lister.start(lambda _progress: list_studies(root), key=root)

    @property
    def listing(self) -> bool:
        """A listing asked for has not arrived yet."""
        return self._lister.running

    def _on_listed(self, _root: Path, entries: list[StudyEntry]) -> None:
        current = self.selected()
        wanted = self._wanted or (current.folder if current is not None else None)
        self._wanted = None
        self.entries = entries
        self.table.setRowCount(len(self.entries))
        for row, entry in enumerate(self.entries):
            for column, text in enumerate(self._texts(entry)):
                item = QTableWidgetItem(text)
                item.setToolTip(entry.error or f"{entry.name}\n{entry.folder}")
                if column == 1 and entry.state in STATE_COLORS:
                    item.setForeground(QBrush(STATE_COLORS[entry.state]))
                if column in (2, 3, 4):
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.table.setItem(row, column, item)
        if wanted is not None:
            self.select(wanted)
        running = sum(entry.state == "running" for entry in self.entries)
        self.summary.setText(f"  {len(self.entries)} studies, {running} running")
        self.update_actions()
        self.listed.emit()

    def _texts(self, entry: StudyEntry) -> tuple[str, ...]:
        state = entry.state
        if state == "running" and entry.folder != self._session.folder:
            state = "running elsewhere"
        stamp = folder_stamp(entry.folder)  # studies of one project told apart by when
        name = f"{entry.name} {stamp:%m-%d %H:%M}" if stamp is not None else entry.name
        if entry.plan is None:
            return (name, state, "—", "—", "—", entry.error, entry.folder.name)
        settings = entry.plan.settings
        fields = ", ".join(path.rsplit(".", 1)[-1] for path in entry.plan.space.axes)
        search = f"{settings.sampler}/{settings.pruner}, {settings.objective}: {fields}"
        return (
            name,
            state,
            f"{entry.ended} of {entry.planned}",
            str(entry.pruned),
            str(entry.failed),
            search,
            entry.folder.name,
        )

    def selected(self) -> StudyEntry | None:
        rows = self.table.selectionModel().selectedRows()
        return self.entries[rows[0].row()] if rows else None

    def select(self, folder: Path) -> None:
        """Selects the study in ``folder``; one the listing does not have yet (a study
        just started) once a listing that has it arrives."""
        for row, entry in enumerate(self.entries):
            if entry.folder == folder:
                self.table.selectRow(row)
                return
        self._wanted = folder

    def continue_selected(self) -> None:
        entry = self.selected()
        if entry is not None:
            self.continue_requested.emit(entry.folder)

    def show_selected(self) -> None:
        entry = self.selected()
        if entry is not None:
            self.show_requested.emit(entry.folder)

    def open_selected_folder(self) -> None:
        entry = self.selected()
        if entry is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(entry.folder)))

    def update_actions(self, idle: bool | None = None) -> None:
        """``idle``: no run is going on in the window (None: as last told)."""
        if idle is not None:
            self._idle = idle
        entry = self.selected()
        running = self._session.running
        self.continue_action.setEnabled(
            self._idle and not running and entry is not None and entry.state == "stopped"
        )
        self.stop_action.setEnabled(running)
        self.open_folder_action.setEnabled(entry is not None)
        self.show_action.setEnabled(entry is not None and entry.plan is not None)
