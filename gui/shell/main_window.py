"""The main window: settings on the left, the live run (plot, status, log) on the right.

The window builds the layout and the menus, and wires the forms, the project document
(:mod:`gui.project.project_document`: the file, its changes, its validation), the run
starter (:mod:`gui.run.run_starter`) and the run controller to the views; it keeps no rule
of its own. Each feature owns its actions and their enable rules (the project file's:
:mod:`gui.project.project_actions`; Run and Stop: :mod:`gui.run.run_actions`; Add Sweep…:
:mod:`gui.study.study_flow`; the plot's, the log's, the hosts' runs, the queue, the
studies), and the window asks each to update when the project, the run or the study
changes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QEvent,
    QMargins,
    QObject,
    QPoint,
    QRect,
    QSettings,
    QSize,
    Qt,
    QTimer,
    QUrl,
)
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDesktopServices,
    QKeySequence,
    QMoveEvent,
    QResizeEvent,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QDockWidget,
    QMainWindow,
    QSplitter,
    QStyle,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import Project
from ...engine.devices import DetectedDevices, detect_devices
from ...engine.engine_handle import ClusterFactory, EngineFactory
from ...engine.formatting import format_duration
from ...engine.process import WarmEngines
from ...engine.run_events import RunEvent, RunFailure, RunOutcome, Started, StatusChanged
from ...engine.run_history import RunSummary
from ...engine.run_model import RunModel
from ...engine.validation import Validation
from ..common import dialogs, settings
from ..files.dataset_preview import DatasetPreview
from ..project.data_form import DataForm
from ..project.problems_panel import ProblemsPanel
from ..project.project_actions import ProjectActions
from ..project.project_document import ProjectDocument
from ..project.project_editor import ProjectEditor
from ..queue.queue_panel import RunQueuePanel
from ..queue.run_queue import RunQueue
from ..run.cluster_panel import ClusterPanel
from ..run.host_runs import HostRuns
from ..run.log_panel import LogPanel
from ..run.loss_plot import LossPlot
from ..run.lr_finder_dialog import LrFinderDialog
from ..run.resources_plot import ResourcesPlot
from ..run.run_actions import RunActions
from ..run.run_controller import RunController, RunState
from ..run.run_starter import RunStarter
from ..run.status_panel import StatusPanel
from ..runs.runs_panel import RunsPanel
from ..runs.try_it_panel import TryItPanel
from ..study.studies_panel import StudiesPanel
from ..study.study_flow import StudyFlow
from ..study.study_session import StudySession
from ..study.study_views import StudyPanel
from .focus_return import FocusReturn
from .help_windows import GuideWindow, ShortcutsWindow

DEFAULT_SIZE = (1400, 900)
MIN_PLOT_SIZE = (320, 160)  # pixels of graph (the plot's controls come on top): readable
BOTTOM_DOCK_HEIGHT = 240  # pixels: five runs or a dozen log lines; the plot keeps the height
BOTTOM_DOCK_SHARE = 0.3  # of a smaller window's height: the plot keeps the most of it
PROJECT_DOCK_WIDTH = 470  # pixels: the forms' fields and their labels side by side
STUDY_DOCK_SHARE = 0.45  # of the window's height when a study opens: its plots need room
WINDOW_STATE_VERSION = 1  # 0: the forms beside the plot in a splitter, the log under it
LAYOUT_SAVE_DELAY_MS = 1000
"""How long after the window last moved or resized its geometry is saved: a window ended by
a signal or a crash, which never closes, came back at the default size."""
WARM_UP_DELAY_MS = 500
LONG_RUN_S = 24 * 3600
"""A run whose ETA is longer is asked about once (999,999,999 steps read "2964 h")."""
LONG_RUN_MEASURED_S = 5.0
"""Training seconds before the ETA is trusted for that question: the first steps are slow."""
"""How long after the window shows itself the first warm engine starts: the window first
paints and answers, then TensorFlow loads beside it."""


def fitted_geometry(
    available: QRect, frame: QMargins, wanted: QSize, centre: QPoint | None = None
) -> QRect:
    """A window's own rectangle: ``wanted`` or less, so that with its ``frame`` (title bar,
    borders) it lies inside ``available``, centred on ``centre`` (default: ``available``'s)
    as far as it stays inside.

    Sized without its frame, a 1400x900 window on a 1400x900 screen had its status bar
    below the screen's edge; Try It's 700x780 window went past a 1024x700 screen's.
    """
    width = min(wanted.width(), available.width() - frame.left() - frame.right())
    height = min(wanted.height(), available.height() - frame.top() - frame.bottom())
    outer = QRect(0, 0, width + frame.left() + frame.right(), height + frame.top() + frame.bottom())
    outer.moveCenter(available.center() if centre is None else centre)
    left = max(available.left(), min(outer.left(), available.right() - outer.width() + 1))
    top = max(available.top(), min(outer.top(), available.bottom() - outer.height() + 1))
    return QRect(left + frame.left(), top + frame.top(), width, height)


class MainWindow(QMainWindow):
    """One project at a time; one run at a time."""

    def __init__(
        self,
        engine_factory: EngineFactory | None = None,
        detect: Callable[[float], DetectedDevices] = detect_devices,
        runs_root: Path | None = None,
        cluster_factory: ClusterFactory | None = None,
        warm_engines: WarmEngines | None = None,
    ) -> None:
        """``warm_engines``: single-process runs (new and resumed) take a warm engine and
        the window keeps the next one ready. ``engine_factory`` and ``cluster_factory``
        stand in for the engine processes (tests).
        """
        super().__init__()
        self._tensorflow_version: str | None = None
        self._last_run_dir: Path | None = None
        self._close_confirmed = False
        self._close_after_run = False
        # The first size is set again once the frame is known (a first start), and a
        # remembered one that no longer fits the screen (a smaller one now) is fitted to it.
        self._fit_once_framed = True
        self._first_start = False
        self._offered_study = False
        self._asked_long_run = False

        self.editor = ProjectEditor(detect)
        self.problems_panel = ProblemsPanel()
        self.plot = LossPlot()
        self.resources_plot = ResourcesPlot(self.plot)
        self.status_panel = StatusPanel()
        self.log_panel = LogPanel()
        self.runs_panel = RunsPanel(self.plot, runs_root)
        # Multi-machine strategies run as a local cluster, driven like one engine.
        self.controller = RunController(
            engine_factory, cluster_factory, warm_engines=warm_engines, parent=self
        )
        self.document = ProjectDocument(self.editor, self)
        self.project_actions = ProjectActions(self, self.document)
        self.starter = RunStarter(self.controller, self.document, runs_root, self)
        self.cluster_panel = ClusterPanel(self.controller, self)
        self.run_queue = RunQueue(
            self.controller, self.starter.start_queued, self, scanner=self.runs_panel.scanner
        )
        self.queue_panel = RunQueuePanel(self.run_queue, self._project_for_queue)
        self.study_session = StudySession(self.controller, self.starter.start_trial, self)
        self.study_flow = StudyFlow(
            self,
            self.controller,
            self.starter,
            self.study_session,
            self.runs_panel,
            lambda: self._close_confirmed,
        )
        self.studies_panel = StudiesPanel(
            self.study_session,
            lambda: self.runs_panel.runs_root,
            self.study_flow.add_sweep_action,
        )
        self.run_actions = RunActions(self, self.controller, self.document, self.run, self.stop)
        self.validity = self.run_actions.validity
        self.dataset_preview = DatasetPreview(self.document.folders)
        self._previewed_form: DataForm | None = None  # the form whose data was last previewed
        self.host_runs = HostRuns(
            self.editor.hosts,
            self.controller,
            self._project_to_run,
            self.starter.start_new,
            self.starter.following.emit,
            lambda project: self.starter.may_run_custom_code(project, self.document.project_dir()),
            self.starter.may_launch,
            self.editor.show_hosts,
            self,
            runs_root,
        )
        self.study_panel = StudyPanel()

        self._build_layout()
        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self.statusBar().addPermanentWidget(self.validity)
        self._connect()
        self._restore_settings()
        self._focus_return = FocusReturn(self)
        self._layout_saver = QTimer(self)
        self._layout_saver.setSingleShot(True)
        self._layout_saver.setInterval(LAYOUT_SAVE_DELAY_MS)
        self._layout_saver.timeout.connect(self._save_layout)
        self.document.start()

    # --- construction -------------------------------------------------------------------

    def _build_layout(self) -> None:
        """The plot in the middle with the status under it; everything else in docks.

        At 1400x900 the plot had about 220 px between the forms' column, the status
        and the log. Now the forms are a dock on the left (closed or narrowed in one
        move), the log, runs, cluster and queue are tabs of one dock below the plot,
        and the window remembers how the user arranged them (saveState).
        """
        settings_side = QWidget()
        left = QVBoxLayout(settings_side)
        left.setContentsMargins(4, 0, 4, 4)
        left.addWidget(self.editor.section_bar)
        left.addWidget(self.editor, 1)
        left.addWidget(self.problems_panel)
        self.project_dock = self._dock("Project", "projectDock", settings_side)
        # The forms' dock runs the window's full height; the tabs stay under the plot.
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        # No arrangement squeezes the plot below this, a remembered one included: one that
        # left it 30 px high came back at every start.
        self.plot.plot_widget.setMinimumSize(*MIN_PLOT_SIZE)
        self.run_splitter = QSplitter(Qt.Orientation.Vertical)
        self.run_splitter.addWidget(self.plot)
        self.run_splitter.addWidget(self.status_panel)
        self.run_splitter.setStretchFactor(0, 1)
        self.run_splitter.setStretchFactor(1, 0)
        self.run_splitter.setCollapsible(0, False)
        self.setCentralWidget(self.run_splitter)
        self.log_dock = self._dock("Log", "logDock", self.log_panel)
        self.runs_dock = self._dock("Runs", "runsDock", self.runs_panel)
        # A tab under the plot, not a pane beside it: the loss keeps its height (a pane took
        # 160 px of it at 1400x900), and its step axis and crosshair are the plot's still.
        self.resources_dock = self._dock("Resources", "resourcesDock", self.resources_plot)
        self.queue_dock = self._dock("Queue", "queueDock", self.queue_panel)
        self.studies_dock = self._dock("Studies", "studiesDock", self.studies_panel)
        self.dataset_dock = self._dock("Dataset", "datasetDock", self.dataset_preview)
        self.study_dock = self._dock("Study", "studyDock", self.study_panel)
        self.resize(*DEFAULT_SIZE)
        self._place_docks()
        # Tabs beside Runs, hidden until a cluster run starts or something is queued (or
        # View ▸ Cluster, View ▸ Run Queue).
        self.cluster_panel.hide()
        self.queue_dock.hide()
        self.studies_dock.hide()  # until the first listing finds a study (its own thread)
        self._dock_state_restored = False
        self.studies_panel.listed.connect(self._show_studies_once)
        self.study_dock.hide()  # until a study is opened (File ▸ Open Study…)

    def _show_studies_once(self) -> None:
        """The Studies tab opens when the window's first listing of the studies finds one,
        unless the window's saved layout says whether it shows."""
        self.studies_panel.listed.disconnect(self._show_studies_once)
        if self.studies_panel.entries and not self._dock_state_restored:
            self.studies_dock.show()

    def _place_docks(self) -> None:
        """The docks where a first start puts them: the forms on the left, tabs below."""
        for dock in (self.project_dock, self.log_dock, *self._bottom_tabs()):
            dock.setFloating(False)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.project_dock)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        previous = self.log_dock
        for dock in self._bottom_tabs():
            self.tabifyDockWidget(previous, dock)
            previous = dock
        self.log_dock.raise_()
        self.resizeDocks([self.project_dock], [PROJECT_DOCK_WIDTH], Qt.Orientation.Horizontal)
        self.resizeDocks([self.log_dock], [BOTTOM_DOCK_HEIGHT], Qt.Orientation.Vertical)

    def _bottom_tabs(self) -> list[QDockWidget]:
        """The docks tabbed with the log, in tab order."""
        return [
            self.runs_dock,
            self.resources_dock,
            self.cluster_panel,
            self.queue_dock,
            self.studies_dock,
            self.study_dock,
            self.dataset_dock,
        ]

    def _dock(self, title: str, name: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)  # saveState keeps its place, size and visibility
        dock.setWidget(widget)
        return dock

    def _action(
        self,
        text: str,
        slot: Callable[[], object],
        shortcut: QKeySequence | QKeySequence.StandardKey | str | None = None,
        icon: QStyle.StandardPixmap | None = None,
        tip: str = "",
    ) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if icon is not None:
            action.setIcon(self.style().standardIcon(icon))
        if tip:
            action.setStatusTip(tip)
            action.setToolTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        return action

    def _build_actions(self) -> None:
        pixmap = QStyle.StandardPixmap
        files = self.project_actions
        self.new_action = files.new_action
        self.open_action = files.open_action
        self.save_action = files.save_action
        self.save_as_action = files.save_as_action
        self.export_script_action = files.export_script_action
        self.copy_json_action = files.copy_json_action
        self.export_cluster_action = files.export_cluster_action
        self.recent_menu = files.recent_menu
        self.examples_menu = files.examples_menu
        self.open_study_action = self._action(
            "Open &Study…",
            self.study_panel.ask_folder,
            "Ctrl+Alt+O",
            None,
            "Show a study's folder (distloop sweep): its trials, history, parallel "
            "coordinates and parameter importances",
        )
        self.quit_action = self._action("&Quit", self.close, "Ctrl+Q")
        self.run_action = self.run_actions.run_action
        self.stop_action = self.run_actions.stop_action
        self.detect_action = self._action(
            "&Detect Devices",
            self.editor.strategy.start_detection,
            None,
            None,
            "List the devices TensorFlow sees on this machine",
        )
        self.open_run_folder_action = self._action(
            "Open Run &Folder",
            self.open_run_folder,
            None,
            pixmap.SP_DirOpenIcon,
            "Show the last run's folder (project, metrics.csv, status, engine log)",
        )
        self.open_run_folder_action.setEnabled(False)
        self.mlflow_settings_action = self._action(
            "&MLflow Logging…",
            self.edit_mlflow_settings,
            None,
            None,
            "Where runs are logged to MLflow, and whether each run is logged as it trains",
        )
        self.auto_range_action = self.plot.auto_range_action
        self.log_scale_action = self.plot.log_scale_action
        self.export_plot_action = self.plot.export_action
        self.clear_log_action = self.log_panel.clear_action
        self.reset_layout_action = self._action(
            "Reset &Layout",
            self.reset_layout,
            None,
            None,
            "Put the panels, the toolbar and the plot back where a first start puts them",
        )
        self.full_screen_action = self._action(
            "&Full Screen", self.toggle_full_screen, "F11", None, "Fill the screen (F11)"
        )
        self.full_screen_action.setCheckable(True)
        self.about_action = self._action("&About Distloop", self.show_about)
        self.shortcuts_action = self._action(
            "&Keyboard Shortcuts",
            self.show_shortcuts,
            "Ctrl+/",
            None,
            "Every keyboard shortcut of the window",
        )
        self.guide_action = self._action(
            "Distloop &Guide",
            self.show_guide,
            QKeySequence.StandardKey.HelpContents,
            None,
            "The guide: what Distloop does, the project file, the command line, clusters",
        )
        self.resume_action = self.runs_panel.resume_action
        self.try_it_action = self.runs_panel.try_it_action
        self.try_it_action.setIcon(
            self.style().standardIcon(QStyle.StandardPixmap.SP_DialogApplyButton)
        )
        self.addAction(self.try_it_action)  # Ctrl+T works while the runs dock is hidden
        self.project_panel_action = self.project_dock.toggleViewAction()
        self.project_panel_action.setText("&Project Settings")
        self.project_panel_action.setShortcut(QKeySequence("Ctrl+Shift+F"))
        self.log_panel_action = self.log_dock.toggleViewAction()
        self.log_panel_action.setText("&Log")
        self.log_panel_action.setShortcut(QKeySequence("Ctrl+Shift+L"))
        self.runs_panel_action = self.runs_dock.toggleViewAction()
        self.runs_panel_action.setText("&Runs Panel")
        self.runs_panel_action.setShortcut(QKeySequence("Ctrl+Shift+H"))
        self.resources_panel_action = self.resources_dock.toggleViewAction()
        self.resources_panel_action.setText("R&esources")
        self.resources_panel_action.setShortcut(QKeySequence("Ctrl+Shift+M"))
        self.queue_panel_action = self.queue_dock.toggleViewAction()
        self.queue_panel_action.setText("Run &Queue")
        self.queue_panel_action.setShortcut(QKeySequence("Ctrl+Shift+U"))
        self.studies_panel_action = self.studies_dock.toggleViewAction()
        self.studies_panel_action.setText("&Studies")
        self.add_sweep_action = self.study_flow.add_sweep_action
        self.study_panel_action = self.study_dock.toggleViewAction()
        self.study_panel_action.setText("&Study")
        self.queue_panel.add_project_action.setShortcut(QKeySequence("Ctrl+Shift+A"))
        for action in (self.queue_panel.add_project_action, self.add_sweep_action):
            self.addAction(action)  # the shortcuts work while their dock is hidden

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        file_menu.addAction(self.new_action)
        file_menu.addAction(self.open_action)
        file_menu.addAction(self.open_study_action)
        file_menu.addMenu(self.recent_menu)
        file_menu.addMenu(self.examples_menu)
        file_menu.addSeparator()
        file_menu.addAction(self.save_action)
        file_menu.addAction(self.save_as_action)
        file_menu.addSeparator()
        for action in (self.export_script_action, self.export_plot_action, self.copy_json_action):
            file_menu.addAction(action)
        file_menu.addAction(self.export_cluster_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        run_menu = bar.addMenu("&Run")
        run_menu.setToolTipsVisible(True)  # a disabled entry's tooltip says why
        for action in (
            self.run_action,
            self.stop_action,
            self.resume_action,
            self.runs_panel.follow_action,
            self.try_it_action,
        ):
            run_menu.addAction(action)
        run_menu.addSeparator()
        hosts = self.host_runs
        for action in (
            hosts.check_action,
            hosts.run_action,
            hosts.submit_action,
            hosts.dump_action,
        ):
            run_menu.addAction(action)
        run_menu.addSeparator()
        queue = self.queue_panel
        for action in (queue.add_project_action, queue.start_action, self.add_sweep_action):
            run_menu.addAction(action)
        run_menu.addSeparator()
        run_menu.addAction(self.detect_action)
        run_menu.addAction(self.open_run_folder_action)
        run_menu.addAction(self.mlflow_settings_action)
        view_menu = bar.addMenu("&View")
        for action in (self.auto_range_action, self.log_scale_action, self.clear_log_action):
            view_menu.addAction(action)
        view_menu.addSeparator()
        view_menu.addAction(self.project_panel_action)
        view_menu.addAction(self.log_panel_action)
        view_menu.addAction(self.runs_panel_action)
        view_menu.addAction(self.resources_panel_action)
        view_menu.addAction(self.queue_panel_action)
        view_menu.addAction(self.studies_panel_action)
        view_menu.addAction(self.study_panel_action)
        view_menu.addAction(self.runs_panel.clear_comparison_action)
        view_menu.addAction(self.cluster_panel.toggleViewAction())
        view_menu.addSeparator()
        view_menu.addAction(self.reset_layout_action)
        view_menu.addAction(self.full_screen_action)
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self.guide_action)
        help_menu.addAction(self.shortcuts_action)
        help_menu.addSeparator()
        help_menu.addAction(self.about_action)

    def _build_toolbar(self) -> None:
        toolbar = QToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        for action in (self.new_action, self.open_action, self.save_action):
            toolbar.addAction(action)
        toolbar.addSeparator()
        toolbar.addAction(self.run_action)
        toolbar.addAction(self.stop_action)
        toolbar.addAction(self.try_it_action)
        self.toolbar = toolbar
        self.addToolBar(toolbar)

    def _connect(self) -> None:
        document = self.document
        self.editor.edited.connect(document.revalidate)
        document.validated.connect(self._show_validation)
        document.folders.progress.connect(self.problems_panel.show_progress)
        document.title_changed.connect(self._show_title)
        document.replaced.connect(self.dataset_preview.clear)
        document.replaced.connect(self._forget_last_run)
        document.reported.connect(lambda text: self.statusBar().showMessage(text, 5000))
        self.runs_panel.reported.connect(lambda text: self.statusBar().showMessage(text, 15000))
        self.plot.reported.connect(lambda text: self.statusBar().showMessage(text, 5000))
        self.controller.live_mlflow = settings.live_mlflow
        document.warning.connect(lambda text: self.log_panel.add(text, "warning"))
        self.starter.following.connect(self._show_run)
        self.starter.log.connect(self.log_panel.add)
        self.host_runs.log.connect(self.log_panel.add)
        self.host_runs.job_state.connect(self.status_panel.show_job_state)
        self.host_runs.job_state.connect(self._job_state_changed)
        for form in (self.editor.data_form, self.editor.evaluation.source):
            form.preview_requested.connect(lambda data, form=form: self._preview_data(data, form))
            form.edited.connect(lambda form=form: self._previewed_form_edited(form))
        self.editor.devices_detected.connect(self._on_devices_detected)
        self.editor.optimizer.find_rate_requested.connect(self.find_learning_rate)
        self.problems_panel.problem_activated.connect(self.editor.reveal)
        controller = self.controller
        controller.state_changed.connect(self._on_state)
        controller.changed.connect(self.plot.show_change)
        controller.changed.connect(self.resources_plot.show_change)
        controller.changed.connect(self.status_panel.show_change)
        controller.changed.connect(self.log_panel.show_change)
        controller.changed.connect(self._on_run_event)
        controller.state_changed.connect(self._sync_runs_panel)
        self.runs_panel.resume_requested.connect(self.resume_run)
        self.runs_panel.follow_requested.connect(self.follow_job)
        self.runs_panel.try_it_requested.connect(self.try_run)
        self.runs_panel.run_drawn.connect(self.status_panel.show_past)
        self.runs_panel.run_drawn.connect(lambda run: self.resources_plot.show_past(run.path))
        self.runs_panel.compared_changed.connect(self.resources_plot.compare)
        self.study_panel.opened.connect(self._show_study)
        self.study_panel.trials_chosen.connect(self.runs_panel.show_runs)
        self.study_panel.compare_requested.connect(self.runs_panel.compare)
        self.study_panel.project_requested.connect(self.open_trial_project)
        controller.idle.connect(self._on_idle)
        session = self.study_session
        session.log.connect(self.log_panel.add)
        session.changed.connect(self._update_actions)
        flow = self.study_flow
        flow.started.connect(self._show_started_study)
        flow.reported.connect(lambda text: self.statusBar().showMessage(text, 5000))
        flow.log.connect(self.log_panel.add)
        self.studies_panel.continue_requested.connect(flow.continue_study)
        self.studies_panel.show_requested.connect(self.open_study)

    # --- the document -------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        return self.document.path

    @property
    def validation(self) -> Validation:
        return self.document.validation

    @property
    def last_run_dir(self) -> Path | None:
        """The folder of the latest run (project.json, metrics.csv, status.json, engine.log)."""
        return self._last_run_dir

    def is_modified(self) -> bool:
        return self.document.is_modified()

    def _show_validation(self, validation: Validation) -> None:
        self.editor.show_validation(validation)
        self.problems_panel.show_validation(validation)
        self._update_actions()

    def _show_title(self, title: str, modified: bool) -> None:
        self.setWindowModified(modified)
        self.setWindowTitle(f"{title}[*] — Distloop")

    def _update_actions(self) -> None:
        """Each feature's actions as the project, the run and the study now say."""
        self.run_actions.update(studying=self.study_session.running)
        self.study_flow.update_action(self.run_actions.runnable)
        self.studies_panel.update_actions(idle=not self.controller.active)
        self.host_runs.update_actions()

    def new_project(self) -> None:
        self.document.new()

    def open_example(self, name: str) -> None:
        self.document.open_example(name)

    def open_project(self, path: str | Path | None = None) -> bool:
        return self.document.open(path)

    def open_startup_project(self, path: str | None) -> None:
        self.document.open_startup(path)

    def save(self) -> bool:
        return self.document.save()

    def save_as(self) -> bool:
        return self.document.save_as()

    def open_study(self, folder: Path) -> None:
        """Shows the study in ``folder`` once it is read; a folder that is none is one line."""
        self.study_panel.open(folder)

    def _show_study(self, folder: Path) -> None:
        """The Study tab in front, tall enough for its plots."""
        self.study_dock.show()
        self.study_dock.raise_()
        if not self.study_dock.isFloating():
            height = max(self.study_dock.height(), round(self.height() * STUDY_DOCK_SHARE))
            self.resizeDocks([self.study_dock], [height], Qt.Orientation.Vertical)
        self.statusBar().showMessage(f"Study {folder}", 5000)

    def open_trial_project(self, project: Project, title: str) -> bool:
        """Best Trial → Project: the trial's project becomes the open one (unsaved, so a
        Save asks where), after asking about the open project's unsaved changes."""
        if not self.document.maybe_save():
            return False
        self.document.set_project(project, None, title)
        self.statusBar().showMessage(f"Opened the project of {title}", 5000)
        return True

    def find_learning_rate(self) -> LrFinderDialog | None:
        """Find Learning Rate...: the range test of the project as the forms show it (its
        custom code trusted as a run's is); the rate chosen goes into the optimizer form."""
        project = self.document.valid_project(
            "Cannot find a learning rate", "The range test runs the project as it is."
        )
        if project is None:
            return None
        project = project.resolve_paths(self.document.base_dir())
        if not self.starter.may_run_custom_code(project, self.document.project_dir()):
            return None
        dialog = LrFinderDialog(project, self.runs_panel.runs_root, self)
        dialog.rate_chosen.connect(self.editor.optimizer.set_learning_rate)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def _preview_data(self, data: dict[str, Any], form: DataForm) -> None:
        self._previewed_form = form
        self.dataset_preview.show_data(data, self.document.base_dir())

    def _previewed_form_edited(self, form: DataForm) -> None:
        """A folder still being read for the preview stops once its path is changed."""
        if form is self._previewed_form:
            self.dataset_preview.stop_unless(form.value(), self.document.base_dir())
        self.dataset_dock.show()
        self.dataset_dock.raise_()

    # --- running ------------------------------------------------------------------------

    def run(self) -> None:
        self.starter.run()

    def _show_run(self, model: RunModel, caption: str) -> None:
        """The plot and the status panel follow ``model``'s run from now on."""
        assert model.run_dir is not None
        self._last_run_dir = model.run_dir
        self.open_run_folder_action.setEnabled(True)
        self.runs_panel.stop_drawing()  # a past run being read must not replace this one
        self.plot.clear()
        self.plot.follow(model)
        self.plot.set_caption(caption)
        self.resources_plot.follow(model)
        self.status_panel.follow(model, str(model.run_dir), model.name)

    def _forget_last_run(self) -> None:
        """Another project is open: the last run's curves and numbers go with the old one
        (a run going on stays in view; the Runs list still shows every run)."""
        if self.controller.active:
            return
        self.runs_panel.forget_shown_run()
        self.plot.clear()
        self.resources_plot.clear()
        self.status_panel.clear()

    def _project_to_run(self) -> Project | None:
        """The forms' project as a run would start it (paths resolved); None when invalid."""
        project = self.document.validation.project
        return None if project is None else project.resolve_paths(self.document.base_dir())

    def _project_for_queue(self) -> Project | None:
        """The project as Run would start it; the queue's tab shows itself for it."""
        project = self.starter.project_for_queue()
        if project is not None:
            self.queue_dock.show()
            self.queue_dock.raise_()
        return project

    def stop(self) -> None:
        """Stop: the run, and with a study's trial the study (it stays resumable)."""
        if self.study_session.running:
            self.study_session.stop()
        else:
            self.controller.stop()

    # --- studies ------------------------------------------------------------------------

    def _show_started_study(self, folder: Path) -> None:
        """A study started: the Studies tab in front, the study selected in it."""
        self.studies_dock.show()
        self.studies_dock.raise_()
        self.studies_panel.select(folder)

    def edit_mlflow_settings(self) -> None:
        """The MLflow store the window logs to, and whether each run logs as it trains (from
        the window, which follows the whole run: one MLflow run per job)."""
        uri, experiment = settings.mlflow_store()
        choice = dialogs.ask_mlflow(
            self, "MLflow Logging", uri, experiment, settings.logs_live_to_mlflow()
        )
        if choice is None:
            return
        settings.set_mlflow_store(choice.tracking_uri, choice.experiment)
        settings.set_live_mlflow(choice.live)
        where = choice.tracking_uri or "MLflow's default store"
        said = f"logged to {where} as they train" if choice.live else "not logged as they train"
        self.statusBar().showMessage(f"Runs are {said}", 5000)

    def open_run_folder(self) -> None:
        """The desktop's file manager on the last run's folder; without one, its path."""
        folder = self._last_run_dir
        if folder is not None and not QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            self.statusBar().showMessage(f"No program here opens folders; the run is in {folder}")
            self.log_panel.add(f"the last run's folder: {folder}")

    def try_run(self, run: RunSummary) -> TryItPanel:
        """Opens a "Try it" window on the run's saved model, beside the main window."""
        panel = TryItPanel(run.path, run.name, parent=self)
        panel.setWindowFlag(Qt.WindowType.Window)
        panel.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        # On this window's screen, over it, never past the screen's edges; its frame will
        # be like this window's (one window manager frames both).
        handle = self.windowHandle()
        panel.setGeometry(
            fitted_geometry(
                self.screen().availableGeometry(),
                handle.frameMargins() if handle is not None else QMargins(),
                panel.size(),
                self.frameGeometry().center(),
            )
        )
        panel.show()
        return panel

    def _job_state_changed(self, model: RunModel, _job: str, _state: str) -> None:
        """A bound slot, not a lambda: the state is told from the thread that polls the job,
        and only a slot of the window's own runs on the window's thread (queued)."""
        self.runs_panel.job_changed(model.run_dir)

    def follow_job(self, run: RunSummary) -> None:
        """Follow Job on a job Slurm still holds: followed as one submitted here is."""
        if run.job is not None:
            self.host_runs.follow_job(run.job.run_dir, run.name)

    def resume_run(self, run: RunSummary) -> None:
        """A Slurm job's run resumes as a new job (sbatch); any other where it ran."""
        if run.job is not None:
            self.host_runs.resume_job(run.job.run_dir, run.name)
        else:
            self.starter.resume(run)

    def _sync_runs_panel(self, state: RunState) -> None:
        """The runs list follows the run: it appears running, then ends selected."""
        active = state is not RunState.IDLE
        self.runs_panel.set_active_run(self._last_run_dir if active else None)
        if state is RunState.RUNNING:
            self.runs_panel.refresh()
        elif state is RunState.IDLE:
            self.runs_panel.refresh()
            if self._last_run_dir is not None:
                self.runs_panel.select_paths([self._last_run_dir])

    def _on_state(self, state: RunState) -> None:
        self._update_actions()
        if state is RunState.STARTING:
            self.log_panel.run_starting()
            self.problems_panel.show_validation(self.validation)  # the last failure goes

    def _on_run_event(self, model: RunModel, event: RunEvent) -> None:
        match event:
            case Started() as started:
                self._tensorflow_version = started.tensorflow_version
                self._asked_long_run = False
            case StatusChanged(outcome=RunOutcome(failure=RunFailure() as failed)):
                self._on_failed(failed)
            case _:
                self._maybe_ask_long_run(model)

    def _maybe_ask_long_run(self, model: RunModel) -> None:
        """Once per run the user started, when its measured ETA is over a day: keep it?

        The speed is known only once the run has trained for a while, so the question
        comes then, not before Run; queued runs and study trials are not asked about.
        """
        if self._asked_long_run or not settings.asks_about_long_runs():
            return
        if self.run_queue.current is not None or self.study_session.running:
            return
        eta, elapsed, rate = model.eta_s(), model.elapsed_s(), model.rate()
        if eta is None or elapsed is None or rate is None or model.total_steps is None:
            return
        if elapsed < LONG_RUN_MEASURED_S or eta <= LONG_RUN_S:
            return
        self._asked_long_run = True
        keep, ask_again = dialogs.confirm_long_run(
            self, format_duration(eta), model.total_steps, rate
        )
        if not ask_again:
            settings.stop_asking_about_long_runs()
        if not keep and self.controller.active:
            self.stop()

    def _on_failed(self, message: RunFailure) -> None:
        """The failure is in the log (the log panel's view); a dialog too, unless expected."""
        if self.controller.stop_requested and self.controller.killed:
            return  # the user asked for the stop; the log says it was forced
        if self.run_queue.current is not None or self.study_session.running:
            return  # the queue or study goes on with its next run; the failure is in its list
        if message.known:
            self.problems_panel.show_run_failure(message.message)
        dialogs.show_error(
            self,
            "The run failed",
            f"{message.error_type}: {message.message}",
            "" if message.known else message.traceback,  # a known one's is in engine.log
        )

    def _on_idle(self) -> None:
        self._update_actions()
        if self._close_after_run:
            self.close()

    def _on_devices_detected(self, found: DetectedDevices) -> None:
        self._tensorflow_version = found.tensorflow_version
        self.status_panel.set_tensorflow_version(found.tensorflow_version)
        names = ", ".join(f"{d.name} ({d.device_type})" for d in found.devices)
        self.log_panel.add(f"TensorFlow {found.tensorflow_version} sees: {names}")

    # --- about, settings, closing -------------------------------------------------------

    def reset_layout(self) -> None:
        """View ▸ Reset Layout: docks, toolbar and the plot's share as at a first start.

        The Cluster, Queue and Study tabs keep their visibility: they show when there is
        something in them.
        """
        shown = {
            dock: dock.toggleViewAction().isChecked()
            for dock in (self.cluster_panel, self.queue_dock, self.study_dock)
        }
        self._place_docks()
        for dock in (
            self.project_dock,
            self.log_dock,
            self.runs_dock,
            self.resources_dock,
            self.dataset_dock,
        ):
            dock.show()
        for dock, visible in shown.items():
            dock.setVisible(visible)
        self.log_dock.raise_()
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)
        self.toolbar.show()
        status = self.status_panel.sizeHint().height()
        self.run_splitter.setSizes([max(self.run_splitter.height() - status, 1), status])

    def toggle_full_screen(self) -> None:
        """View ▸ Full Screen (F11), and back to the window as it was."""
        self.setWindowState(self.windowState() ^ Qt.WindowState.WindowFullScreen)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() is QEvent.Type.WindowStateChange:
            self.full_screen_action.setChecked(self.isFullScreen())

    def show_shortcuts(self) -> ShortcutsWindow:
        window = ShortcutsWindow(self)
        window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.show()
        return window

    def show_guide(self) -> GuideWindow:
        window = GuideWindow(self)
        window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.show()
        return window

    def about_text(self) -> str:
        return dialogs.about_html(self._tensorflow_version)

    def show_about(self) -> None:
        dialogs.about(self, self.about_text())

    def _restore_settings(self) -> None:
        store = QSettings()
        geometry = store.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            self._fit_to_screen(QSize(*DEFAULT_SIZE))
            self._first_start = True
        state = store.value("window/state")
        if state is not None:  # a state of the older layout is refused: the defaults stay
            self._dock_state_restored = self.restoreState(state, WINDOW_STATE_VERSION)
        for key, splitter in self._splitters().items():
            saved = store.value(f"window/{key}")
            if saved is not None:
                splitter.restoreState(saved)
        self.runs_panel.restore_settings()

    def _save_settings(self) -> None:
        self._save_layout()
        self.runs_panel.save_settings()
        settings.set_last_project(self.document.path)

    def _save_layout(self) -> None:
        """The window's size, place and docks, as the next start restores them."""
        store = QSettings()
        store.setValue("window/geometry", self.saveGeometry())
        store.setValue("window/state", self.saveState(WINDOW_STATE_VERSION))
        for key, splitter in self._splitters().items():
            store.setValue(f"window/{key}", splitter.saveState())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.isVisible():
            self._layout_saver.start()

    def moveEvent(self, event: QMoveEvent) -> None:
        super().moveEvent(event)
        if self.isVisible():
            self._layout_saver.start()

    def _splitters(self) -> dict[str, QSplitter]:
        return {"runSplitter": self.run_splitter}

    def _fit_to_screen(self, size: QSize) -> None:
        """``size``, or less: the window and its frame fit on the screen."""
        handle = self.windowHandle()
        frame = handle.frameMargins() if handle is not None else QMargins()
        available = self.screen().availableGeometry()
        self.setGeometry(fitted_geometry(available, frame, size))
        height = min(BOTTOM_DOCK_HEIGHT, round(self.height() * BOTTOM_DOCK_SHARE))
        self.resizeDocks([self.log_dock], [height], Qt.Orientation.Vertical)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """A window manager frames a new window before it first shows: fit it again then;
        and a remembered geometry that does not fit the screen now (a smaller screen, another
        resolution) is fitted to it, centred, instead of reaching past its edges."""
        if event.type() is QEvent.Type.Expose and watched is self.windowHandle():
            watched.removeEventFilter(self)
            framed = not self.windowHandle().frameMargins().isNull()
            fits = self.screen().availableGeometry().contains(self.frameGeometry())
            if (self._first_start and framed) or not fits:
                self._fit_to_screen(self.size())
        return super().eventFilter(watched, event)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._fit_once_framed:
            self._fit_once_framed = False
            self.windowHandle().installEventFilter(self)
        QTimer.singleShot(WARM_UP_DELAY_MS, self.controller.prepare_warm_engine)
        if not self._offered_study:
            self._offered_study = True
            QTimer.singleShot(0, self.study_flow.offer_to_continue)

    def interrupt(self) -> None:
        """Ctrl-C in the terminal that started the window: quit, as closing it does.

        The interrupt is the user's word on the run (it is stopped after its current
        step, with a checkpoint, and resumes later), so only unsaved changes are asked
        about. A second Ctrl-C kills the run's engine, as in ``distloop run``.
        """
        if self._close_confirmed:
            self.controller.kill()
            return
        if not self.document.maybe_save():
            return
        self._close_confirmed = True
        self.close()

    def _may_stop_for_closing(self) -> bool:
        """The user's word on stopping what runs: a study's own question says it goes on."""
        if self.study_session.running:
            return dialogs.confirm_stop_study(self)
        return not self.controller.active or dialogs.confirm_stop_run(self)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Unsaved changes and a running engine both need the user's word before closing."""
        if not self._close_confirmed:
            if not self.document.maybe_save() or not self._may_stop_for_closing():
                event.ignore()
                return
            self._close_confirmed = True
        if self.study_session.running and not self.controller.active:
            self.study_session.stop()  # between two trials: it ends at once
        if self.controller.active:
            self._close_after_run = True
            self.controller.stop_warming()  # none warms up after the run's end
            self.stop()
            self.statusBar().showMessage("Stopping the run before closing…")
            event.ignore()
            return
        self._save_settings()
        self.controller.close_warm_engines()  # an idle warm engine has no run to lose
        for panel in self.findChildren(TryItPanel):
            panel.close()  # and with it its prediction process
        self.document.folders.close()
        event.accept()
