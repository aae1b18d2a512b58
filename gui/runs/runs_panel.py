"""The runs panel: every past run, newest first, to reopen, compare, rename, delete or resume.

The list is the run folders themselves (:mod:`engine.run_history`), so runs made
from the command line or copied from another machine appear beside the window's
own. It is read again when a run starts or ends, on Refresh (F5), and when a
folder appears in or leaves the runs folder. A filter box keeps the runs whose
name, tags or notes hold every word typed. The window's batch jobs (Slurm's) are listed
too, by their schedulers (:mod:`engine.cluster.scheduler`), each as its chief's folder;
their state is asked of the scheduler by the scanner's thread, again every
:data:`JOB_POLL_MS` while it holds them.

Showing a run draws it in the loss plot; while a run is going on, a shown run is
compared instead, so the live curves are never replaced. Compared runs pile up
until the comparison is cleared, each once and never the run the plot already
draws; they can be compared by any metric they recorded, against the step or the
wall time. The plot's own curves are the loss against the step, so comparing by
anything else takes the shown run into the comparison. Under the comparison, a table
says what differs between those runs' environments (:mod:`.environment_diff`).
Questions (delete?) and file choices go through methods a test can replace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import (
    QFileSystemWatcher,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QSettings,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QSizePolicy,
    QStyle,
    QTableView,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from ...engine.cluster.scheduler import jobs_roots, listed_jobs
from ...engine.mlflow_log import MlflowLogError, NotAJobFolder, log_folder
from ...engine.resume_rules import RESUMABLE_STATUSES
from ...engine.run_curves import (
    STEP,
    WALL_TIME,
    X_AXES,
    comparable_metrics,
    legend_names,
)
from ...engine.run_folder import default_runs_root, has_model
from ...engine.run_history import (
    RunSummary,
    delete_run,
    list_runs,
    newest_first,
    summarize,
)
from ..common import dialogs, settings
from ..common.background import Background
from ..files import file_dialogs
from ..files.exports import CSV_FILTER, copy_metrics
from ..run.loss_plot import LossPlot
from ..widgets.tables import select_rows, style_list_table
from .drawn_run_worker import ComparedCurve, ComparedRuns, DrawnRun, DrawnRunRequest
from .environment_diff import EnvironmentDiff
from .run_drawing import RunDrawing
from .run_scanner import RunScanner
from .run_table import SORT_ROLE
from .runs_model import Column, RunsTableModel, is_run_of

HEADER_KEY = "runsPanel/columns"
"""The header's saved state (widths, order, sort); the key of the columns' order before
status and validation came first was another, so an old order is never restored."""
TRY_IT_TIP = "Run a saved model (model.keras) on images, texts, CSV rows or arrays"
WATCH_DELAY_MS = 300  # a new run folder fills within moments; read it once it settled
JOB_POLL_MS = 15_000
"""How often Slurm is asked again about the jobs it still holds (each a few commands)."""
RESUME_TIP = "Continue the selected stopped, failed or interrupted run from its last checkpoint"
MLFLOW_TIP = "Log the selected runs to MLflow, each job (a cluster's too) as one MLflow run"
FOLLOW_TIP = (
    "Follow the selected Slurm job here (one submitted earlier, or from a shell): its steps "
    "in the plot, its state, Stop (scancel) and Dump Stacks"
)
DEFAULT_WIDTHS = {
    Column.NAME: 190,
    Column.STATUS: 80,
    Column.VALIDATION: 130,
    Column.STEPS: 70,
    Column.FINAL_LOSS: 95,
    Column.LATE_LOSS: 95,
    Column.DURATION: 75,
    Column.STARTED: 120,
    Column.STRATEGY: 150,
    Column.REPLICAS: 65,
    Column.TAGS: 120,
}
LOSS = "loss"
PLOT_UNITS = (LOSS, STEP)
"""What the plot's own curves show: any other comparison leaves them out."""


class RunsFilter(QSortFilterProxyModel):
    """Sorts by :data:`SORT_ROLE` and keeps the runs :meth:`RunSummary.matches` the text."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._text = ""
        self.setSortRole(SORT_ROLE)

    def set_text(self, text: str) -> None:
        self.beginFilterChange()
        self._text = text
        self.endFilterChange()

    def filterAcceptsRow(
        self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex
    ) -> bool:
        model = self.sourceModel()
        return not isinstance(model, RunsTableModel) or model.run(source_row).matches(self._text)


class RunsPanel(QWidget):
    """A sortable table of the runs under ``runs_root`` and what can be done with them."""

    resume_requested = Signal(object)  # RunSummary: the window owns the run controller
    follow_requested = Signal(object)  # RunSummary of a job Slurm still holds
    try_it_requested = Signal(object)  # RunSummary whose saved model the window lets one try
    run_drawn = Signal(object)  # RunSummary of the past run now drawn as the plot's own
    compared_changed = Signal(object)  # list[(name, Path)]: the runs compared with the plot
    reported = Signal(str)  # one line for the window's status bar: what Log to MLflow did

    def __init__(
        self, plot: LossPlot, runs_root: Path | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._plot = plot
        plot.clear_comparisons_requested.connect(self.clear_comparison)
        self._root = runs_root or default_runs_root()
        self._active_run: Path | None = None
        self._shown: RunSummary | None = None  # the past run drawn as the plot's own curves
        self._compared: dict[Path, RunSummary] = {}  # in the order they were compared
        self._drawing = RunDrawing(self)
        self._drawing.read.connect(self._drawn)
        self._drawing.failed.connect(self._drawing_failed)
        self._drawing.progress.connect(self._reading_progress)
        self._drawing_run: RunSummary | None = None  # the past run being read for the plot
        self._comparing = RunDrawing(self)  # the compared runs, read as the drawn one is
        self._comparing.read.connect(self._compared_read)
        self._comparing.failed.connect(self._comparing_failed)
        self._comparing.progress.connect(self._comparing_progress)
        self._cut = False  # the shown run came back cut to its buckets (a long run)
        self._mlflow = Background(self)  # Log to MLflow: its store answers over the network
        self._mlflow.done.connect(lambda _key, said: self._mlflow_ended(said))
        self._mlflow.failed.connect(
            lambda _key, why: self._mlflow_ended(f"Not logged to MLflow: {why}")
        )
        self._plot.smooth_slider.valueChanged.connect(self._smoothing_changed)

        self.model = RunsTableModel()
        self.proxy = RunsFilter(self)
        self.proxy.setSourceModel(self.model)
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by name, tag or note")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self.proxy.set_text)
        self.metric_box = QComboBox()
        self.metric_box.setToolTip("What the compared runs show: the loss, a named loss, val_*")
        self.x_axis_box = QComboBox()
        self.x_axis_box.addItem("step", STEP)
        self.x_axis_box.addItem("wall time", WALL_TIME)
        self.x_axis_box.setToolTip("Compare against the step or the seconds since the start")
        self.comparison_note = QLabel()
        self.comparison_note.setWordWrap(True)
        self.environment_diff = EnvironmentDiff()
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(Column.STARTED, Qt.SortOrder.DescendingOrder)
        style_list_table(
            self.table,
            QAbstractItemView.SelectionMode.ExtendedSelection,
            QAbstractItemView.EditTrigger.EditKeyPressed,
        )
        # Same-named runs differ at the end (``seed #3``): a long name loses its middle.
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionsMovable(True)
        for column, width in DEFAULT_WIDTHS.items():
            # Never narrower than its title ("Loss, last 10%" was clipped), whatever the font.
            header.resizeSection(column, max(width, header.sectionSizeHint(column)))
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

        self._build_actions()
        self.toolbar = QToolBar("Runs")
        # Icons, their names in the tooltips (and in full in the context menu): with the
        # filter and the comparison beside them, one row above the table, not two.
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        for action in (
            self.refresh_action,
            self.show_action,
            self.compare_action,
            self.clear_comparison_action,
            self.resume_action,
            self.follow_action,
            self.delete_action,
        ):
            self.toolbar.addAction(action)
        self.metric_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        # One row above the table, not two: the rows are what the dock is for. The filter
        # gives way first when the dock is narrow.
        self.filter_edit.setMinimumWidth(60)
        self.filter_edit.setMaximumWidth(320)
        self.metric_box.setMinimumContentsLength(5)
        self.comparison_row = QWidget()
        self.comparison_row.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        comparison = QHBoxLayout(self.comparison_row)
        comparison.setContentsMargins(8, 0, 0, 0)
        comparison.setSpacing(4)
        for widget in (QLabel("Compare"), self.metric_box, QLabel("against"), self.x_axis_box):
            comparison.addWidget(widget)
        self._tools_row = QHBoxLayout()
        self._tools_row.setContentsMargins(0, 0, 4, 0)
        self._tools_row.setSpacing(4)
        self._tools_row.addWidget(self.toolbar)
        self._tools_row.addWidget(self.filter_edit, 1)
        self._tools_row.addWidget(self.comparison_row)
        self._second_row = QHBoxLayout()
        self._second_row.setContentsMargins(0, 0, 4, 0)  # empty, it takes no height
        self._second_row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(self._tools_row)
        layout.addLayout(self._second_row)
        layout.addWidget(self.comparison_note)
        layout.addWidget(self.environment_diff)
        layout.addWidget(self.table, 1)
        self._fill_metric_box()
        self.metric_box.currentIndexChanged.connect(lambda _index: self._draw_comparisons())
        self.x_axis_box.currentIndexChanged.connect(lambda _index: self._draw_comparisons())

        self.scanner = RunScanner(self)
        self.scanner.scanned.connect(self.model.update_run)

        self._watcher = QFileSystemWatcher(self)
        self._watch_timer = QTimer(self)
        self._watch_timer.setSingleShot(True)
        self._watch_timer.setInterval(WATCH_DELAY_MS)
        self._watch_timer.timeout.connect(self.refresh)
        self._watcher.directoryChanged.connect(lambda _path: self._watch_timer.start())
        self._job_timer = QTimer(self)
        self._job_timer.setInterval(JOB_POLL_MS)
        self._job_timer.timeout.connect(self._ask_held_jobs)
        self._job_timer.start()

        self.table.doubleClicked.connect(self._double_clicked)
        self.model.dataChanged.connect(self._rows_changed)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.selectionModel().selectionChanged.connect(self._update_actions)
        self.refresh()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_comparison()

    def _place_comparison(self) -> None:
        """The comparison's choices beside the tools where all fit, else on a row below them.

        At 1024 px one row held them only by hiding three of the toolbar's actions behind
        its "»" menu; a second row costs less than actions nobody sees.
        """
        needed = (
            self.toolbar.sizeHint().width()
            + self.filter_edit.minimumWidth()
            + self.comparison_row.sizeHint().width()
            + 2 * self._tools_row.spacing()
            + self._tools_row.contentsMargins().right()
        )
        beside = self.width() >= needed
        if beside == (self._tools_row.indexOf(self.comparison_row) >= 0):
            return
        if beside:
            self._second_row.removeWidget(self.comparison_row)
            self._tools_row.addWidget(self.comparison_row)
        else:
            self._tools_row.removeWidget(self.comparison_row)
            self._second_row.insertWidget(0, self.comparison_row)
        self.layout().activate()  # now: the table's height is read as soon as the panel shows

    # --- construction -------------------------------------------------------------------

    def _action(
        self,
        text: str,
        slot: Callable[[], object],
        shortcut: QKeySequence | QKeySequence.StandardKey | str | None,
        tip: str,
        icon: QStyle.StandardPixmap | None = None,
        *,
        local: bool = True,
    ) -> QAction:
        """An action of the panel.

        A ``local`` shortcut works only while the table itself has the focus: not
        while a name is edited in it, where Return and Delete belong to the editor.
        """
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
            if local:
                action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        if icon is not None:
            action.setIcon(self.style().standardIcon(icon))
        shown = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        action.setToolTip(f"{tip} ({shown})" if shown else tip)
        action.setStatusTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        (self.table if local else self).addAction(action)
        return action

    def _build_actions(self) -> None:
        pixmap = QStyle.StandardPixmap
        self.refresh_action = self._action(
            "Refresh", self.refresh, "F5", "Read the runs folder again", pixmap.SP_BrowserReload
        )
        self.show_action = self._action(
            "Show",
            self.show_selected,
            "Return",
            "Draw the selected run in the loss plot (compared instead while a run is going on)",
            pixmap.SP_FileDialogContentsView,
        )
        self.compare_action = self._action(
            "Compare",
            self.compare_selected,
            "Ctrl+Return",
            "Add the selected runs to the comparison on the plot, each in its own colour",
            pixmap.SP_FileDialogDetailedView,
        )
        self.clear_comparison_action = self._action(
            "Clear Comparison",
            self.clear_comparison,
            "Ctrl+Shift+Backspace",
            "Remove the compared runs from the plot",
            pixmap.SP_DialogResetButton,
            local=False,
        )
        self.rename_action = self._action(
            "Rename", self.rename_selected, "F2", "Give the selected run a name of its own"
        )
        self.edit_tags_action = self._action(
            "Edit Tags",
            lambda: self._edit_selected(Column.TAGS),
            None,
            "Tag the selected run (tags are separated by commas)",
        )
        self.edit_notes_action = self._action(
            "Edit Notes", lambda: self._edit_selected(Column.NOTES), None, "Note what the run tried"
        )
        self.delete_action = self._action(
            "Delete…",
            self.delete_selected,
            QKeySequence.StandardKey.Delete,
            "Delete the selected runs' folders from disk",
            pixmap.SP_TrashIcon,
        )
        self.export_csv_action = self._action(
            "Export Metrics as CSV…",
            self.export_selected_metrics,
            "Ctrl+E",
            "Save a copy of the selected run's metrics.csv",
        )
        self.open_folder_action = self._action(
            "Open Folder",
            self.open_selected_folder,
            None,
            "Show the selected run's folder",
            pixmap.SP_DirOpenIcon,
        )
        self.try_it_action = self._action(
            "Try It…",
            self.try_target,
            "Ctrl+T",
            TRY_IT_TIP,
            local=False,
        )
        self.resume_action = self._action(
            "Resume Run",
            self.resume_selected,
            "Ctrl+Shift+R",
            RESUME_TIP,
            pixmap.SP_MediaSeekForward,
            local=False,
        )
        self.mlflow_action = self._action(
            "Log to MLflow…", self.log_selected_to_mlflow, None, MLFLOW_TIP
        )
        self.follow_action = self._action(
            "Follow Job",
            self.follow_selected,
            "Ctrl+Shift+G",
            FOLLOW_TIP,
            pixmap.SP_MediaPlay,
            local=False,
        )
        self._update_actions()

    def _context_menu(self, position: QPoint) -> None:
        menu = QMenu(self)
        for action in (self.show_action, self.compare_action, self.clear_comparison_action):
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction(self.resume_action)
        menu.addAction(self.follow_action)
        menu.addAction(self.try_it_action)
        menu.addSeparator()
        for action in (
            self.rename_action,
            self.edit_tags_action,
            self.edit_notes_action,
            self.export_csv_action,
            self.mlflow_action,
            self.open_folder_action,
        ):
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction(self.delete_action)
        menu.addAction(self.refresh_action)
        menu.exec(self.table.viewport().mapToGlobal(position))

    # --- the list -----------------------------------------------------------------------

    @property
    def runs_root(self) -> Path:
        return self._root

    def refresh(self) -> None:
        """Reads every run folder again, keeping the selection and the sort order.

        No file is read whole here: a run whose ``metrics.csv`` or ``eval.csv`` grew
        since it was last scanned shows its last step at once and its best values
        once a worker thread has scanned the new part (:mod:`engine.csv_summary`).
        """
        selected = [run.path for run in self.selected_runs()]
        asked = {run.path: run for run in self.model.runs() if run.job is not None}
        runs = newest_first(
            list_runs(self._root, scan=False)
            + [_as_asked(job, asked.get(job.path)) for job in listed_jobs(self._root, scan=False)]
        )
        self.model.set_runs(runs)
        self.scanner.scan(
            [run.job.run_dir if run.job else run.path for run in runs if run.pending or run.job]
        )
        self.select_paths(selected)
        self._sync_compared()
        for root in (self._root, *jobs_roots(self._root)):
            if root.is_dir() and str(root) not in self._watcher.directories():
                self._watcher.addPath(str(root))
        self._update_actions()

    def job_changed(self, run_dir: Path) -> None:
        """A Slurm job the window follows changed state: its row is read and asked again
        (listed first when the job was just submitted)."""
        if self.model.row_of(run_dir) is None:
            self.refresh()
        else:
            self.scanner.scan([run_dir])

    def _rows_changed(self, *_changed: object) -> None:
        """Rows read again (renamed elsewhere, scanned, a job Slurm has the word on) change
        what is compared and what applies (Slurm's word on a job decides Resume). A bound
        slot, not a lambda: Qt drops it with the panel, and the model outlives the panel."""
        self._sync_compared()
        self._update_actions()

    def _ask_held_jobs(self) -> None:
        held = [run.job for run in self.model.runs() if run.job is not None and run.job.held]
        self.scanner.scan([job.run_dir for job in held])

    def runs(self) -> list[RunSummary]:
        """Every run in the order the table shows them."""
        return [self.model.run(self._source_row(row)) for row in range(self.proxy.rowCount())]

    def selected_runs(self) -> list[RunSummary]:
        """The selected runs in the order the table shows them."""
        rows = sorted(index.row() for index in self.table.selectionModel().selectedRows())
        return [self.model.run(self._source_row(row)) for row in rows]

    def select_paths(self, paths: list[Path]) -> None:
        """Selects the runs in ``paths`` (the first one current); unknown ones are skipped."""
        rows = [row for row in map(self.model.row_of, paths) if row is not None]
        select_rows(self.table, [self.proxy.mapFromSource(self.model.index(r, 0)) for r in rows])

    def set_active_run(self, run_dir: Path | None) -> None:
        """The folder a run is writing now (None when idle): it cannot be deleted or resumed.

        Its live curves are the plot's own; once it ended, they are its record there,
        as if it had been shown. While it goes on, compared runs show their loss
        against the step, as it does.
        """
        previous, self._active_run = self._active_run, run_dir
        self._update_actions()
        if run_dir == previous:
            return
        if run_dir is not None:
            self.stop_drawing()
            self._shown = None
            self._compared = {
                path: run for path, run in self._compared.items() if not self._is_active(run)
            }
        elif previous is not None:
            self._shown = self._summary(previous)
        for box in (self.metric_box, self.x_axis_box):
            box.setEnabled(run_dir is None)
        self._draw_comparisons()

    def compared_runs(self) -> list[RunSummary]:
        """The runs in the comparison, in the order they joined it."""
        return list(self._compared.values())

    def forget_shown_run(self) -> None:
        """The plot no longer draws a past run as its own curves (compared runs stay)."""
        self.stop_drawing()
        self._shown = None
        self._fill_metric_box()
        self._show_environments()

    def shown_run(self) -> RunSummary | None:
        """The past run the plot draws as its own curves (not a compared one)."""
        return self._shown

    def _summary(self, path: Path) -> RunSummary:
        row = self.model.row_of(path)
        return self.model.run(row) if row is not None else summarize(path, scan=False)

    def _source_row(self, proxy_row: int) -> int:
        return self.proxy.mapToSource(self.proxy.index(proxy_row, 0)).row()

    def _single(self) -> RunSummary | None:
        runs = self.selected_runs()
        return runs[0] if len(runs) == 1 else None

    def _update_actions(self) -> None:
        runs = self.selected_runs()
        single = runs[0] if len(runs) == 1 else None
        for action in (
            self.show_action,
            self.rename_action,
            self.edit_tags_action,
            self.edit_notes_action,
            self.export_csv_action,
            self.open_folder_action,
        ):
            action.setEnabled(single is not None)
        self.compare_action.setEnabled(bool(runs))
        self.delete_action.setEnabled(bool(runs))
        self.mlflow_action.setEnabled(
            bool(runs)
            and not self._mlflow.running
            and not any(run.status == "running" or self._is_active(run) for run in runs)
        )
        self.resume_action.setEnabled(
            single is not None
            and self._active_run is None
            and single.status in RESUMABLE_STATUSES
            and not (single.job is not None and single.job.held)
        )
        held = single.job if single is not None and single.job and single.job.held else None
        resume_tip = (
            f"Not now: Slurm still holds the job ({held.note}); it goes on, or resumes from "
            "its checkpoint, by itself"
            if held is not None
            else RESUME_TIP
        )
        self.resume_action.setToolTip(f"{resume_tip} (Ctrl+Shift+R)")
        self.resume_action.setStatusTip(resume_tip)
        follow_refusal = (
            "select a job Slurm still holds (an ended job's run continues with Resume)"
            if held is None
            else "a run is in progress"
            if self._active_run is not None
            else ""
        )
        follow_tip = f"Not now: {follow_refusal}" if follow_refusal else FOLLOW_TIP
        self.follow_action.setEnabled(not follow_refusal)
        self.follow_action.setToolTip(f"{follow_tip} (Ctrl+Shift+G)")
        self.follow_action.setStatusTip(follow_tip)
        target = self.try_it_target()
        self.try_it_action.setEnabled(target is not None)
        tip = f"{TRY_IT_TIP}: {target.name}" if target is not None else TRY_IT_TIP
        self.try_it_action.setToolTip(f"{tip} (Ctrl+T)")
        self.try_it_action.setStatusTip(tip)

    def try_it_target(self) -> RunSummary | None:
        """The run Try It opens: the selected one when it has a model; with none selected, the
        latest run that has one (a Try It right after a run needs no click in the list)."""
        runs = self.selected_runs()
        if runs:
            return runs[0] if len(runs) == 1 and has_model(runs[0].path) else None
        newest_first = sorted(self.runs(), key=lambda run: run.started_at or 0.0, reverse=True)
        return next((run for run in newest_first if has_model(run.path)), None)

    # --- what can be done with a run ---------------------------------------------------

    def _double_clicked(self, index: QModelIndex) -> None:
        """Tags and notes are edited where they are; anywhere else the run is shown."""
        if index.column() in (Column.TAGS, Column.NOTES):
            self.table.edit(index)
        else:
            self.show_selected()

    def show_selected(self) -> None:
        """Draws the selected run in the plot; compares it while a run is going on."""
        run = self._single()
        if run is not None:
            self.show_run(run)

    def show_runs(self, runs: list[RunSummary]) -> None:
        """Draws exactly ``runs`` (a study's trials): one as the plot's own curves, several
        compared; while a run goes on, they are compared beside it."""
        self._compared.clear()
        if len(runs) == 1:
            self.show_run(runs[0])
            return
        if self._active_run is None:
            self.stop_drawing()
            self._plot.clear()
            self._shown = None
        self.compare(runs)

    def show_run(self, run: RunSummary) -> None:
        """Draws ``run`` in the plot; compares it while a run is going on."""
        if self._active_run is not None:
            self.compare([run])
            return
        self._plot.clear()
        self._shown = None
        self._drawing_run = run
        self._plot.show_busy(f"Reading {run.name}…")
        self._drawing.ask(DrawnRunRequest(run.path, self._plot.smoothing_weight()))

    def _smoothing_changed(self) -> None:
        """A long run's curves came back cut to buckets, smoothed at the weight then: one
        smoothed again here would smooth the buckets, not the steps. It is read again,
        smoothed over every step at the new weight (the plot smooths the drawn points
        meanwhile), and replaces what is drawn without moving the view."""
        reading = self._drawing_run
        if reading is not None and reading is not self._shown:  # read at the new weight
            self._drawing.ask(DrawnRunRequest(reading.path, self._plot.smoothing_weight()))
            return
        run = self._shown
        if run is None or not self._cut or self._active_run is not None:
            return
        self._drawing_run = run
        self._plot.set_caption(f"{run.name} (smoothing every step again…)")
        self._drawing.ask(DrawnRunRequest(run.path, self._plot.smoothing_weight()))

    def _reading_progress(self, request: DrawnRunRequest, done: int, total: int) -> None:
        """The share of the run's metrics.csv read so far, in the plot it will fill."""
        run = self._drawing_run
        if run is not None and run is not self._shown and run.path == request.run_dir and total:
            self._plot.show_busy(f"Reading {run.name}… {_share_read(done, total)}")

    def _drawing_failed(self, request: DrawnRunRequest, why: str) -> None:
        run, self._drawing_run = self._drawing_run, None
        self._plot.clear()
        if run is not None and run.path == request.run_dir:
            dialogs.show_error(self, "Cannot show the run", f"{run.name}: {why}")

    def stop_drawing(self) -> None:
        """A past run being read is not drawn after all (a live run takes the plot)."""
        self._drawing.cancel()
        self._drawing_run = None

    def _drawn(self, request: DrawnRunRequest, drawn: DrawnRun) -> None:
        """The run asked for last is read: its curves become the plot's own."""
        run, self._drawing_run = self._drawing_run, None
        if run is None or run.path != request.run_dir or self._active_run is not None:
            return
        smoothed_again = run is self._shown  # the view the user chose stays
        view = self._plot.plot_item.getViewBox().viewRange() if smoothed_again else None
        self._plot.show_drawn(drawn)
        self._cut = len(drawn.steps) != drawn.recorded_steps
        self._shown = run
        self._compared.pop(run.path, None)  # drawn once: as the plot's own curves
        self._plot.set_caption(run.name)
        if run.pruned is not None:
            self._plot.mark_pruned(*run.pruned)
        if view is None:
            self._plot.auto_range()
        else:
            self._plot.plot_item.setRange(xRange=view[0], yRange=view[1], padding=0)
        self._fill_metric_box()
        self._draw_comparisons()
        self.run_drawn.emit(run)

    def compare_selected(self) -> None:
        self.compare(self.selected_runs())

    def compare(self, runs: list[RunSummary]) -> None:
        """Adds ``runs`` to the comparison; the plot's own run is never drawn a second time."""
        shown = self._shown.path if self._shown and self._selection() == PLOT_UNITS else None
        for run in runs:
            if run.path != shown and not self._is_active(run):
                self._compared[run.path] = run
        self._fill_metric_box()
        self._draw_comparisons()

    def _selection(self) -> tuple[str, str]:
        """(metric, x axis) the compared runs show: the live run's units while one goes on."""
        if self._active_run is not None:
            return PLOT_UNITS
        return (
            str(self.metric_box.currentData() or LOSS),
            str(self.x_axis_box.currentData() or STEP),
        )

    def _fill_metric_box(self) -> None:
        """Offers every metric a compared or shown run recorded, keeping the one chosen."""
        runs = [*self._compared.values(), *([self._shown] if self._shown else [])]
        found = {metric for run in runs for metric in comparable_metrics(run.path)}
        metrics = [LOSS, *sorted(found - {LOSS}, key=lambda m: (m.startswith("val_"), m))]
        chosen = self.metric_box.currentData() or LOSS
        self.metric_box.blockSignals(True)
        self.metric_box.clear()
        for metric in metrics:
            self.metric_box.addItem(metric, metric)
        self.metric_box.setCurrentIndex(metrics.index(chosen) if chosen in metrics else 0)
        self.metric_box.blockSignals(False)

    def _draw_comparisons(self) -> None:
        """Reads the compared runs by the chosen metric off the window's thread (a run of
        10^7 steps is gigabytes), saying meanwhile how much is read; the curves drawn
        until then stay. No compared runs: the comparison is cleared at once."""
        selection = self._selection()
        if selection != PLOT_UNITS and self._shown is not None:
            # The plot's own curves show the loss by the step: the shown run joins instead.
            shown, self._shown = self._shown, None
            self._plot.clear()
            self._compared = {shown.path: shown, **self._compared}
        self._show_environments()
        self.compared_changed.emit([(run.name, run.path) for run in self._compared.values()])
        if not self._compared:
            self._comparing.cancel()
            self._compared_read(ComparedRuns((), *selection), {})
            return
        request = ComparedRuns(tuple(self._compared), *selection)
        self._comparing.ask(request)
        if self._comparing.reading == request:
            self._show_comparing(f"Reading {len(request.runs)} runs to compare…")

    def _show_environments(self) -> None:
        """What differs between the environments of the runs in the plot (its own and the
        compared ones): below the comparison, while there are two or more."""
        self.environment_diff.show_runs(
            [*([self._shown] if self._shown else []), *self._compared.values()]
        )

    @property
    def comparing(self) -> bool:
        """Whether runs to compare are being read (their curves are not drawn yet)."""
        return self._comparing.reading is not None

    def _show_comparing(self, text: str) -> None:
        """Says what is read for the comparison: in the note above the plot, and in the
        plot itself while it is empty."""
        self.comparison_note.setText(text)
        self.comparison_note.setVisible(True)
        if self._plot.hint.isVisible():
            self._plot.show_busy(text)

    def _comparing_progress(self, request: ComparedRuns, done: int, total: int) -> None:
        if total and self._comparing.reading == request:
            runs = len(request.runs)
            self._show_comparing(f"Reading {runs} runs to compare… {_share_read(done, total)}")

    def _comparing_failed(self, request: ComparedRuns, why: str) -> None:
        """The reading process itself failed (each run's own problem comes back as read)."""
        self._compared_read(request, {path: why for path in request.runs})

    def _compared_read(self, request: ComparedRuns, curves: dict[Path, ComparedCurve]) -> None:
        """The compared runs are read: they replace the comparison drawn before."""
        runs = [self._compared[path] for path in request.runs if path in self._compared]
        problems, missing = compare_runs(self._plot, runs, curves, request.metric, request.x_axis)
        for path in problems:  # told once, not on every redraw
            self._compared.pop(path, None)
        self.comparison_note.setText(
            f"Not drawn, no {request.metric} recorded: {', '.join(missing)}" if missing else ""
        )
        self.comparison_note.setVisible(bool(missing))
        if problems:
            dialogs.show_error(
                self,
                "Cannot compare every run",
                "These runs have no readable metrics:",
                "\n".join(problems.values()),
            )

    def _sync_compared(self) -> None:
        """Compared runs renamed or deleted elsewhere are drawn as they are now."""
        current = {path: self._summary(path) for path in self._compared if path.is_dir()}
        if current != self._compared:
            self._compared = current
            self._fill_metric_box()
            self._draw_comparisons()

    def clear_comparison(self) -> None:
        self._compared.clear()
        self._fill_metric_box()
        self._draw_comparisons()

    def rename_selected(self) -> None:
        """Starts editing the selected run's name in place (Enter keeps it, Esc cancels)."""
        run = self._single()
        if run is None:
            return
        row = self.model.row_of(run.path)
        if row is not None:
            self.table.edit(self.proxy.mapFromSource(self.model.index(row, Column.NAME)))

    def _edit_selected(self, column: Column) -> None:
        run = self._single()
        row = self.model.row_of(run.path) if run is not None else None
        if row is not None:
            index = self.proxy.mapFromSource(self.model.index(row, column))
            self.table.setCurrentIndex(index)
            self.table.edit(index)

    def rename(self, run: RunSummary, name: str) -> bool:
        """Gives ``run`` another name; an empty one is refused (False)."""
        row = self.model.row_of(run.path)
        if row is None:
            return False
        return self.proxy.setData(
            self.proxy.mapFromSource(self.model.index(row, Column.NAME)), name
        )

    def delete_selected(self) -> None:
        """Deletes the selected runs' folders after asking; never the run going on now."""
        runs = self.selected_runs()
        if not runs:
            return
        if any(self._is_active(run) for run in runs):
            dialogs.show_error(
                self,
                "Cannot delete a running run",
                "The run going on now writes into its folder; stop it first.",
            )
            return
        jobs = {run.name: run.job for run in runs if run.job is not None}
        if jobs:
            dialogs.show_error(
                self,
                "Slurm jobs are not deleted here",
                "A Slurm job's run lives in its job folder on the shared file system, with its "
                "script and output; once the job has ended, delete that folder yourself:",
                "\n".join(f"{name}: {job.run_dir.parent.parent}" for name, job in jobs.items()),
            )
            runs = [run for run in runs if run.job is None]
        if not runs or not self.confirm_delete(runs):
            return
        failures = []
        for run in runs:
            try:
                delete_run(run.path)
            except (OSError, ValueError) as exc:
                failures.append(f"{run.name}: {exc}")
        self.refresh()
        if failures:
            dialogs.show_error(self, "Some runs were not deleted", "\n".join(failures[:10]))

    def confirm_delete(self, runs: list[RunSummary]) -> bool:
        """Asks before deleting (tests replace this method)."""
        names = "\n".join(f"• {run.name} ({run.path.name})" for run in runs[:10])
        more = f"\n… and {len(runs) - 10} more" if len(runs) > 10 else ""
        still = [run for run in runs if run.status == "running"]
        warning = (
            "\n\nA run whose status says running may still be training from the command "
            "line or another window; such a run is not deleted (stop it first)."
            if still
            else ""
        )
        answer = QMessageBox.question(
            self,
            "Delete runs",
            f"Delete {'this run' if len(runs) == 1 else f'these {len(runs)} runs'} and "
            f"everything in {'its folder' if len(runs) == 1 else 'their folders'} "
            f"(metrics, checkpoints, logs)? This cannot be undone.\n\n{names}{more}{warning}",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        return answer == QMessageBox.StandardButton.Yes

    def export_selected_metrics(self) -> None:
        """Saves a copy of the selected run's ``metrics.csv`` where the user says."""
        run = self._single()
        if run is None:
            return
        slug = re.sub(r"[^A-Za-z0-9]+", "-", run.name).strip("-").lower() or "run"
        answer = file_dialogs.save_file(
            self,
            "Export metrics",
            f"{slug}-metrics.csv",
            CSV_FILTER,
            file_dialogs.Purpose.EXPORTS,
        )
        if answer is None:
            return
        chosen, _ = answer
        target = chosen if chosen.suffix else chosen.with_suffix(".csv")
        try:
            copy_metrics(run.path, target)
        except OSError as exc:
            dialogs.show_error(self, "Cannot export the metrics", f"{target}: {exc}")

    def log_selected_to_mlflow(self) -> None:
        """Logs the selected runs to the MLflow store the user names (remembered), off the
        window's thread; the result is one line in the status bar."""
        runs = self.selected_runs()
        if not runs or not self.mlflow_action.isEnabled():
            return
        uri, experiment = settings.mlflow_store()
        choice = dialogs.ask_mlflow(self, "Log to MLflow", uri, experiment, live=None)
        if choice is None:
            return
        settings.set_mlflow_store(choice.tracking_uri, choice.experiment)
        folders = [run.job.run_dir if run.job else run.path for run in runs]
        uri, experiment = settings.mlflow_store()
        self._mlflow.start(
            lambda _progress: _log_folders(folders, uri or None, experiment),
            known=(MlflowLogError, NotAJobFolder),
        )
        self.reported.emit(f"Logging {_runs_count(len(folders))} to MLflow…")
        self._update_actions()

    def _mlflow_ended(self, said: str) -> None:
        self.reported.emit(said)
        self._update_actions()

    def open_selected_folder(self) -> None:
        run = self._single()
        if run is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(run.path)))

    def try_target(self) -> None:
        run = self.try_it_target()
        if run is not None:
            self.try_it_requested.emit(run)

    def resume_selected(self) -> None:
        run = self._single()
        if run is not None and self.resume_action.isEnabled():
            self.resume_requested.emit(run)

    def follow_selected(self) -> None:
        run = self._single()
        if run is not None and self.follow_action.isEnabled():
            self.follow_requested.emit(run)

    def _is_active(self, run: RunSummary) -> bool:
        """Whether ``run`` is the one going on now (a Slurm job's by its job's run folder)."""
        return self._active_run is not None and is_run_of(run, self._active_run)

    # --- settings -----------------------------------------------------------------------

    def save_settings(self) -> None:
        QSettings().setValue(HEADER_KEY, self.table.horizontalHeader().saveState())

    def restore_settings(self) -> None:
        """Column widths, order and the sort the user chose last time."""
        state = QSettings().value(HEADER_KEY)
        header = self.table.horizontalHeader()
        if state is not None and header.restoreState(state):
            self.table.sortByColumn(header.sortIndicatorSection(), header.sortIndicatorOrder())


def _as_asked(job: RunSummary, asked: RunSummary | None) -> RunSummary:
    """A job's row read again from its folders keeps what Slurm said of it until Slurm is
    asked again: a job Slurm holds is never shown, even for a moment, as resumable."""
    if asked is None or asked.job is None or job.job is None or not asked.job.held:
        return job
    return replace(job, status=asked.status, job=asked.job)


def compare_runs(
    plot: LossPlot,
    runs: list[RunSummary],
    curves: dict[Path, ComparedCurve],
    metric: str = "loss",
    x_axis: str = STEP,
) -> tuple[dict[Path, str], list[str]]:
    """Draws exactly ``runs`` on ``plot`` as compared runs, by ``metric`` against ``x_axis``,
    from their ``curves`` as :class:`ComparedRuns` read them.

    Returns why a run could not be read (one line, by its folder) and the legend
    names of the runs that have no ``metric``.
    """
    plot.clear_comparisons()
    problems: dict[Path, str] = {}
    missing: list[str] = []
    names = legend_names(runs)
    for run in runs:
        curve = curves.get(run.path, f"{run.name}: not read")
        if isinstance(curve, str):
            problems[run.path] = curve
            continue
        x, values = curve
        if not len(values):
            missing.append(names[run.path])
            continue
        plot.add_comparison(str(run.path), names[run.path], x, values)
    plot.set_comparison_axes(X_AXES[x_axis] if runs else X_AXES[STEP], metric if runs else "loss")
    return problems, missing


def _runs_count(count: int) -> str:
    return "1 run" if count == 1 else f"{count} runs"


def _log_folders(folders: list[Path], tracking_uri: str | None, experiment: str) -> str:
    """Logs each folder (its worker thread's work); the line the status bar shows."""
    values = runs = 0
    for folder in folders:
        for _name, _run_id, count in log_folder(folder, tracking_uri, experiment):
            runs, values = runs + 1, values + count
    where = tracking_uri or "MLflow's default store"
    return (
        f"Logged {_runs_count(len(folders))} to MLflow at {where}, experiment {experiment}: "
        f"{runs} MLflow run(s), {values:,} metric values"
    )


def _share_read(done: int, total: int) -> str:
    """``34% of 1,300.0 MB``: how much of what is read is read."""
    return f"{done * 100 // total}% of {total / 1e6:,.1f} MB"
