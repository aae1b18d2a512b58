"""The study panel: what a study found, as a trials table and three plots, kept current.

A study folder (``distloop sweep``'s, or the window's) is read by a worker thread
(:class:`StudyReader`: Optuna's SQLite storage, the trials' run folders and the
importances never run on the window's thread), and read again while the study goes
on: a cheap look at the folder each second tells whether a trial ended or one is
running (its steps and time grow). The views are the trials table (selecting trials
draws their loss curves in the plot, as the runs list does), the optimization
history, parallel coordinates and parameter importances; each exports as PNG or SVG.
Best Trial → Project makes the best trial's project the open one.

A folder that is no study, a damaged ``study.db`` or a study of another version is
one line: in a dialog when the user opened it (the study shown stays), above the
views when a study already shown becomes unreadable (its last reading stays).
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import (
    QSortFilterProxyModel,
    Qt,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QStyle,
    QTableView,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import Project
from ...engine.problems import ProblemsError
from ...engine.run_folder import TRIALS_DIR
from ...engine.run_history import RunSummary
from ...engine.study.results import StudyResults, StudyUnreadable, read_results, storage_stamp
from ..common import dialogs
from ..common.background import Background, WhenBusy
from ..files import file_dialogs
from ..files.exports import IMAGE_SUFFIXES, PLOT_FILTER, export_plot, export_widget
from ..widgets.elided_label import ElidedLabel
from ..widgets.tables import select_rows, style_list_table
from .study_plots import HistoryPlot, ImportancePlot, ParallelPlot
from .study_trials import SORT_ROLE, TrialsTableModel

POLL_MS = 1000
"""How often the folder is looked at (a few stat calls) while a study is shown."""
RESIZE_ROWS = 50
"""Rows whose text sizes the columns when a study opens: all of 300 took 0.4 s."""
SELECTION_DELAY_MS = 150  # a drag over many rows draws their curves once, at its end
OPEN, REFRESH = "open", "refresh"
"""What a reading was for: a study the user opened, or the one shown read again."""


def folder_signature(folder: Path) -> tuple[object, ...]:
    """What changes when a trial is asked for, reports or ends: the storage's files and
    the trials folder."""
    try:
        info = os.stat(folder / TRIALS_DIR)
        trials: object = (info.st_mtime_ns, info.st_size)
    except OSError:
        trials = None
    return (*storage_stamp(folder), trials)


class StudyPanel(QWidget):
    """One study at a time: its trials and what mattered, refreshed while it runs."""

    trials_chosen = Signal(object)  # list[RunSummary]: draw exactly these runs' curves
    compare_requested = Signal(object)  # list[RunSummary]: add them to the comparison
    project_requested = Signal(object, str)  # (Project, title): open it as the project
    opened = Signal(object)  # Path: a study is shown (its first reading arrived)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.results: StudyResults | None = None
        self._folder: Path | None = None
        self._signature: tuple[object, ...] = ()

        self.reader = Background(
            self, WhenBusy.REPLACE, name="study-reader"
        )  # what is asked last is read
        self.reader.done.connect(self._on_read)
        self.reader.failed.connect(self._on_failed)

        self.title = ElidedLabel(mode=Qt.TextElideMode.ElideMiddle)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #c62828;")
        self.problem.hide()
        self.model = TrialsTableModel()
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setSourceModel(self.model)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        style_list_table(self.table, QAbstractItemView.SelectionMode.ExtendedSelection)
        header = self.table.horizontalHeader()
        header.setResizeContentsPrecision(RESIZE_ROWS)
        self.history = HistoryPlot()
        self.parallel = ParallelPlot()
        self.importance = ImportancePlot()
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.table, "Trials")
        self.tabs.addTab(self.history, "History")
        self.tabs.addTab(self.parallel, "Parallel Coordinates")
        self.tabs.addTab(self.importance, "Importance")

        self._build_actions()
        self.toolbar = QToolBar("Study")
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        for action in (
            self.open_action,
            self.refresh_action,
            self.compare_action,
            self.best_project_action,
            self.export_action,
            self.open_folder_action,
        ):
            self.toolbar.addAction(action)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 4, 0)
        top.addWidget(self.toolbar)
        top.addWidget(self.title, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(top)
        layout.addWidget(self.problem)
        layout.addWidget(self.tabs, 1)
        self.title.set_full_text("No study open: Open Study… shows a distloop sweep's folder")

        self._selection_timer = QTimer(self)
        self._selection_timer.setSingleShot(True)
        self._selection_timer.setInterval(SELECTION_DELAY_MS)
        self._selection_timer.timeout.connect(self._selection_settled)
        self.table.selectionModel().selectionChanged.connect(
            lambda *_args: self._selection_timer.start()
        )
        self.table.doubleClicked.connect(lambda _index: self._selection_settled())
        for plot in (self.history, self.parallel):
            plot.trial_clicked.connect(self.select_trials_by_number)
        self._poll = QTimer(self)
        self._poll.setInterval(POLL_MS)
        self._poll.timeout.connect(self._look)
        self.tabs.currentChanged.connect(lambda _index: self._update_actions())
        self._update_actions()

    def _action(
        self,
        text: str,
        slot: object,
        tip: str,
        icon: QStyle.StandardPixmap | None = None,
        shortcut: str | None = None,
    ) -> QAction:
        action = QAction(text, self)
        if icon is not None:
            action.setIcon(self.style().standardIcon(icon))
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        shown = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        action.setToolTip(f"{tip} ({shown})" if shown else tip)
        action.setStatusTip(tip)
        action.triggered.connect(lambda _checked=False: slot())  # type: ignore[operator]
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        pixmap = QStyle.StandardPixmap
        self.open_action = self._action(
            "Open Study…",
            self.ask_folder,
            "Show a study's folder (distloop sweep --out, or the window's)",
            pixmap.SP_DialogOpenButton,
        )
        self.refresh_action = self._action(
            "Refresh Study",
            self.refresh,
            "Read the study again (it is read by itself while trials run)",
            pixmap.SP_BrowserReload,
            "F5",
        )
        self.compare_action = self._action(
            "Compare Trials",
            self.compare_selected,
            "Add the selected trials' curves to the comparison on the plot",
            pixmap.SP_FileDialogDetailedView,
            "Ctrl+Return",
        )
        self.best_project_action = self._action(
            "Best Trial → Project",
            self.open_best_project,
            "Make the best trial's project (the study's, with its values) the open project",
            pixmap.SP_DialogApplyButton,
        )
        self.export_action = self._action(
            "Export View…",
            self.export_view,
            "Save the view shown (table, history, parallel coordinates, importance) as PNG or SVG",
            pixmap.SP_DialogSaveButton,
        )
        self.open_folder_action = self._action(
            "Open Study Folder",
            self.open_folder,
            "Show the study's folder (study.json, study.db, trials/)",
            pixmap.SP_DirOpenIcon,
        )

    # --- the study ----------------------------------------------------------------------

    @property
    def folder(self) -> Path | None:
        """The study shown."""
        return self._folder

    def ask_folder(self) -> None:
        folder = file_dialogs.choose_folder(
            self, "Open study", file_dialogs.Purpose.PROJECTS, self._folder
        )
        if folder is not None:
            self.open(folder)

    def open(self, folder: Path) -> None:
        """Reads ``folder`` in the worker; it is shown once read, or refused in one line."""
        folder = folder.absolute()
        self.reader.start(
            lambda _progress: read_results(folder), known=(StudyUnreadable,), key=(OPEN, folder)
        )
        self.title.set_full_text(f"Reading {folder}…")

    def refresh(self) -> None:
        if self._folder is not None and not self.reader.running:  # never over an opening
            self._signature = folder_signature(self._folder)
            folder, previous = self._folder, self.results
            self.reader.start(
                lambda _progress: read_results(folder, previous),
                known=(StudyUnreadable,),
                key=(REFRESH, folder),
            )

    def _look(self) -> None:
        """Reads the study again when its folder changed, or while a trial runs."""
        if self._folder is None or self.reader.running:
            return
        running = self.results is not None and any(
            t.state == "running" for t in self.results.trials
        )
        if running or folder_signature(self._folder) != self._signature:
            self.refresh()

    def _on_read(self, key: tuple[str, Path], results: StudyResults) -> None:
        if key[0] == OPEN:
            first = results.folder != self._folder
            self._folder = results.folder
            self._signature = folder_signature(results.folder)
            self._show(results, first)
            self._poll.start()
            self.opened.emit(results.folder)
            return
        if results.folder == self._folder:
            self._show(results, first=False)

    def _on_failed(self, key: tuple[str, Path], line: str) -> None:
        if key[0] == OPEN:
            self._show_title()
            dialogs.show_error(self, "Cannot open the study", line)
            return
        self.problem.setText(f"Not read again: {line}")
        self.problem.show()

    def _show(self, results: StudyResults, first: bool) -> None:
        selected = self.selected_numbers()
        self.results = results
        self.problem.hide()
        rows = self.model.rowCount()
        self.model.set_results(results)
        if first:
            self.table.resizeColumnsToContents()
            selected = []
        elif self.model.rowCount() != rows:
            self._widen_columns()
        self.select_trials_by_number(selected, draw=False)
        for plot in (self.history, self.parallel, self.importance):
            plot.show_results(results)
        self._mark_selection()
        self._show_title()
        self._update_actions()

    def _widen_columns(self) -> None:
        """Columns as wide as the new rows need, never narrower than they are: a study
        opened with one trial running had its state and objective cut short once trials
        ended (``compl…``), and a width the user chose stays."""
        header = self.table.horizontalHeader()
        for column in range(self.model.columnCount()):
            wanted = self.table.sizeHintForColumn(column)
            if wanted > header.sectionSize(column):
                header.resizeSection(column, wanted)

    def _show_title(self) -> None:
        results = self.results
        if results is None:
            self.title.set_full_text("No study open: Open Study… shows a distloop sweep's folder")
            return
        trials = results.trials
        counts = {
            state: sum(1 for t in trials if t.state == state)
            for state in ("complete", "pruned", "failed", "running")
        }
        done = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
        settings = results.plan.settings
        best = results.best()
        best_text = (
            f"; best: trial {best.number}, {results.objective} {best.value:.4g}"
            if (best is not None and best.value is not None)
            else ""
        )
        self.title.set_full_text(
            f"{results.plan.project.name}: {len(trials)} of {settings.trials} trials "
            f"({done or 'none yet'}); {settings.sampler} sampler, {settings.pruner} pruner"
            f"{best_text}",
            str(results.folder),
        )

    # --- the selection ------------------------------------------------------------------

    def selected_numbers(self) -> list[int]:
        rows = sorted(index.row() for index in self.table.selectionModel().selectedRows())
        return [
            self.model.trial(self.proxy.mapToSource(self.proxy.index(row, 0)).row()).number
            for row in rows
        ]

    def selected_runs(self) -> list[RunSummary]:
        """The selected trials' run folders (a trial not started yet has none)."""
        if self.results is None:
            return []
        chosen = set(self.selected_numbers())
        return [t.run for t in self.results.trials if t.number in chosen and t.run is not None]

    def select_trials_by_number(self, numbers: list[int] | int, draw: bool = True) -> None:
        wanted = [numbers] if isinstance(numbers, int) else list(numbers)
        selection = self.table.selectionModel()
        if not draw:
            selection.blockSignals(True)
        rows = [row for row in map(self.model.row_of, wanted) if row is not None]
        select_rows(self.table, [self.proxy.mapFromSource(self.model.index(r, 0)) for r in rows])
        if not draw:
            selection.blockSignals(False)
            self.table.viewport().update()

    def _selection_settled(self) -> None:
        self._mark_selection()
        self._update_actions()
        runs = self.selected_runs()
        if runs:
            self.trials_chosen.emit(runs)

    def _mark_selection(self) -> None:
        numbers = self.selected_numbers()
        self.history.set_selected(numbers)
        self.parallel.set_selected(numbers)

    def compare_selected(self) -> None:
        runs = self.selected_runs()
        if runs:
            self.compare_requested.emit(runs)

    # --- what can be done with it -------------------------------------------------------

    def _update_actions(self) -> None:
        shown = self.results is not None
        self.refresh_action.setEnabled(shown)
        self.open_folder_action.setEnabled(shown)
        self.export_action.setEnabled(shown)
        self.compare_action.setEnabled(bool(self.selected_runs()))
        best = self.results.best() if self.results is not None else None
        self.best_project_action.setEnabled(best is not None)
        if best is not None:
            self.best_project_action.setToolTip(
                f"Make trial {best.number}'s project (the study's, with its values) the open "
                "project"
            )

    def open_best_project(self) -> None:
        """Asks the window to open the best trial's project, as the study trained it."""
        if self.results is None:
            return
        best = self.results.best()
        try:
            project: Project = self.results.best_project()
        except ProblemsError as exc:
            dialogs.show_error(self, "Cannot open the best trial's project", str(exc))
            return
        assert best is not None
        self.project_requested.emit(project, f"trial {best.number} of {self.results.folder.name}")

    def current_view(self) -> QWidget:
        return self.tabs.currentWidget()

    def export_view(self) -> Path | None:
        """Saves the view shown as PNG or SVG, where the user says."""
        if self.results is None:
            return None
        view = self.current_view()
        name = {
            self.table: "trials",
            self.history: "history",
            self.parallel: "parallel-coordinates",
            self.importance: "importance",
        }[view]
        answer = file_dialogs.save_file(
            self,
            "Export view",
            f"{self.results.folder.name}-{name}.png",
            PLOT_FILTER,
            file_dialogs.Purpose.EXPORTS,
        )
        if answer is None:
            return None
        target, chosen_filter = answer
        if target.suffix.lower() not in IMAGE_SUFFIXES:
            target = target.with_name(target.name + (".svg" if "svg" in chosen_filter else ".png"))
        try:
            export_view(view, target)
        except (OSError, ValueError) as exc:
            dialogs.show_error(self, "Cannot export the view", f"Writing {target} failed: {exc}")
            return None
        return target

    def open_folder(self) -> None:
        if self._folder is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self._folder)))


def export_view(view: QWidget, target: Path) -> None:
    """A plot as the loss plot exports; the table as it looks on screen."""
    plot_item = getattr(view, "plot_item", None)
    if plot_item is not None:
        export_plot(plot_item, target)
    else:
        export_widget(view, target)
