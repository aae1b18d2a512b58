"""Every setting of the project file, one tab per section, and where each problem shows.

The editor holds no project object of its own: :meth:`ProjectEditor.data` reads
the forms into the project file's dict, which the main window validates with the
engine's models. Problems come back with their locations and are marked on the
widget that owns each one; the tab holding a problem gets a warning icon.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QSignalBlocker, QTimer, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QFrame,
    QGroupBox,
    QPlainTextEdit,
    QScrollArea,
    QStyle,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import SCHEMA_VERSION, LaunchConfig, Project
from ...engine.devices import DetectedDevices, detect_devices
from ...engine.problems import Loc, Problem
from ...engine.scaling_rule import Scaling, planned_replicas
from ...engine.validation import Validation
from .auto_form import AutoForm
from .custom_code_form import CustomCodeForm
from .data_form import DataForm
from .evaluation_form import EvaluationForm
from .hosts_panel import HostsPanel
from .loss_form import LossForm
from .model_form import ModelForm
from .optimizer_form import OptimizerForm
from .problem_marks import owner, route, set_problems
from .project_summary import ProjectSummary
from .scaling_note import ScalingNote
from .section_bar import SectionBar
from .strategy_form import StrategyForm
from .tf_config_editor import TFConfigEditor
from .training_form import TrainingForm

SCROLL_AFTER_MS = 100


class DescriptionEdit(QPlainTextEdit):
    """The project's free-text description (several lines)."""

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setTabChangesFocus(True)
        self.setFixedHeight(110)
        self.textChanged.connect(self.edited)

    def value(self) -> str:
        return self.toPlainText()

    def set_value(self, value: str) -> None:
        self.setPlainText(value)


def _scrolled(*widgets: QWidget) -> QScrollArea:
    page = QWidget()
    layout = QVBoxLayout(page)
    for widget in widgets:
        layout.addWidget(widget)
    layout.addStretch(1)
    return _scrollable(page)


def _scrollable(page: QWidget) -> QScrollArea:
    """A page that scrolls rather than widening the forms' dock to its own minimum width."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidget(page)
    return area


def _boxed(title: str, widget: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    QVBoxLayout(box).addWidget(widget)
    return box


class ProjectEditor(QTabWidget):
    """The settings side of the window; ``edited`` fires on every user edit.

    Its sections are chosen in :attr:`section_bar` (two rows of buttons, which the
    window puts above it), not in a tab strip.
    """

    edited = Signal()
    devices_detected = Signal(object)

    def __init__(self, detect: Callable[[float], DetectedDevices] = detect_devices) -> None:
        super().__init__()
        self.setDocumentMode(True)
        self.general = AutoForm(
            Project,
            ["name", "description"],
            custom={"description": DescriptionEdit()},
        )
        self.strategy = StrategyForm(detect)
        self.tf_config = TFConfigEditor()
        self.hosts = HostsPanel()
        self.model = ModelForm()
        self.data_form = DataForm()
        self.optimizer = OptimizerForm()
        self.scaling = ScalingNote()
        self._replicas_set_for: int | None = None
        """The replicas the project's batch and rate were loaded (or last scaled) for."""
        self.loss = LossForm()
        self.training = TrainingForm()
        self.custom_code = CustomCodeForm()
        self.evaluation = EvaluationForm()

        self.summary = ProjectSummary()
        self.addTab(_scrolled(self.general, self.summary), "Project")
        self.addTab(_scrolled(self.strategy), "Strategy")
        tf_config_page = QWidget()
        tf_config_column = QVBoxLayout(tf_config_page)
        tf_config_column.setContentsMargins(0, 0, 0, 0)
        tf_config_column.addWidget(self.tf_config, 1)
        tf_config_column.addWidget(self.hosts)
        self.addTab(_scrollable(tf_config_page), "TF_CONFIG")
        self.addTab(_scrolled(self.model), "Model")
        self.addTab(_scrolled(self.data_form), "Data")
        self.addTab(
            _scrolled(
                _boxed("Optimizer", self.optimizer),
                _boxed("Batch and replicas", self.scaling),
                _boxed("Loss", self.loss),
            ),
            "Optimizer && loss",
        )
        self.addTab(
            _scrolled(_boxed("Training", self.training), _boxed("Step code", self.custom_code)),
            "Training",
        )
        self.addTab(_scrolled(self.evaluation), "Evaluation")
        self._base_tips = [self.tabToolTip(i) for i in range(self.count())]
        self.section_bar = SectionBar(self)
        self._sections: dict[str, QWidget] = {
            "name": self.general,
            "description": self.general,
            "schema_version": self.general,
            "strategy": self.strategy,
            "tf_config": self.tf_config,
            "model": self.model,
            "data": self.data_form,
            "optimizer": self.optimizer,
            "loss": self.loss,
            "training": self.training,
            "custom_code": self.custom_code,
            "evaluation": self.evaluation,
        }
        self._marked: set[QWidget] = set()
        self._launch: LaunchConfig | None = None

        # Every form but the general one owns project paths it can be marked at.
        self._forms = (
            self.strategy,
            self.model,
            self.data_form,
            self.optimizer,
            self.loss,
            self.training,
            self.custom_code,
            self.evaluation,
        )
        for form in (self.general, *self._forms):
            form.edited.connect(self.edited)
        self.tf_config.changed.connect(self.edited)
        self.strategy.kind_changed.connect(self.tf_config.set_strategy_kind)
        self.strategy.devices_detected.connect(self.devices_detected)
        self.edited.connect(self._show_scaling)
        self.scaling.apply_requested.connect(self._apply_scaling)

    def set_project(self, project: Project) -> None:
        """Shows ``project``; loading is not an edit, so ``edited`` does not fire."""
        with QSignalBlocker(self):
            self.general.set_value(project)
            self.strategy.set_value(project.strategy)
            self.tf_config.set_strategy_kind(project.strategy.kind)
            self.tf_config.set_tf_config(project.tf_config)
            self.model.set_value(project.model)
            self.data_form.set_value(project.data)
            self.optimizer.set_value(project.optimizer)
            self.loss.set_value(project.loss)
            self.training.set_value(project.training)
            self.custom_code.set_value(project.custom_code)
            self.evaluation.set_value(project.evaluation)
        self._launch = project.launch
        self._replicas_set_for = planned_replicas(
            project.strategy.model_dump(), project.tf_config and project.tf_config.model_dump()
        )
        self._show_scaling()

    def _show_scaling(self) -> None:
        """The batch's split over the replicas as the forms show them; the linear-scaling
        offer once they differ from those the batch and rate were set for."""
        replicas = planned_replicas(self.strategy.value(), self.tf_config.tf_config_data())
        batch = self.data_form.value().get("global_batch_size")
        rate = self.optimizer.value().get("learning_rate")
        if not replicas or not isinstance(batch, int) or not isinstance(rate, float):
            self.scaling.show_scaling(None)
            return
        before = self._replicas_set_for or replicas
        self.scaling.show_scaling(Scaling(before, replicas, batch, rate))

    def _apply_scaling(self, batch: int, rate: float) -> None:
        """The offer taken: the scaled batch and rate, as if typed; now the new baseline."""
        self._replicas_set_for = planned_replicas(
            self.strategy.value(), self.tf_config.tf_config_data()
        )
        self.data_form.batching.editors["global_batch_size"].set_value(batch)
        self.optimizer.set_learning_rate(rate)

    def data(self) -> dict[str, Any]:
        """The project file's dict as the forms show it, valid or not."""
        return {
            "schema_version": SCHEMA_VERSION,
            **self.general.value(),
            "strategy": self.strategy.value(),
            "tf_config": self.tf_config.tf_config_data(),
            "model": self.model.value(),
            "optimizer": self.optimizer.value(),
            "loss": self.loss.value(),
            "data": self.data_form.value(),
            "training": self.training.value(),
            "custom_code": self.custom_code.value(),
            "evaluation": self.evaluation.value(),
            # No form edits it yet: kept as loaded, so saving never drops it.
            "launch": None if self._launch is None else self._launch.model_dump(mode="json"),
        }

    def targets(self) -> dict[Loc, QWidget]:
        """The widget owning each location of the project file."""
        targets: dict[Loc, QWidget] = {
            ("name",): self.general.editors["name"],
            ("description",): self.general.editors["description"],
        }
        for form in self._forms:
            targets.update(form.targets())
        return targets

    def show_validation(self, validation: Validation) -> None:
        """Marks each problem's widget and each tab that holds one; updates the summary."""
        self.summary.show_project(validation.project)
        problems = validation.problems
        outside_tf = [p for p in problems if p.loc[:1] != ("tf_config",)]
        owned, _ = route(outside_tf, self.targets())
        for widget in self._marked - owned.keys():
            set_problems(widget, [])
        for widget, messages in owned.items():
            set_problems(widget, messages)
        self._marked = set(owned)
        self.tf_config.mark_problems(problems)

        per_tab: dict[int, list[str]] = {}
        for problem in problems:
            per_tab.setdefault(self.tab_of(problem), []).append(str(problem))
        warning = self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning)
        for index in range(self.count()):
            messages = per_tab.get(index, [])
            self.setTabIcon(index, warning if messages else QIcon())
            self.setTabToolTip(index, "\n".join(messages) or self._base_tips[index])
        self.section_bar.sync()

    def tab_of(self, problem: Problem) -> int:
        """The tab that shows ``problem``: its widget's tab, else its section's."""
        widget = owner(problem.loc, self.targets()) if problem.loc[:1] != ("tf_config",) else None
        if widget is None:
            section = str(problem.loc[0]) if problem.loc else "name"
            widget = self._sections.get(section, self.general)
        for index in range(self.count()):
            page = self.widget(index)
            if page is widget or page.isAncestorOf(widget):
                return index
        return 0

    def show_hosts(self) -> None:
        """The TF_CONFIG tab, scrolled to its hosts' check (the findings, once there are)."""
        self.setCurrentIndex(self.tab_of(Problem(("tf_config",), "")))
        page = self.currentWidget()
        if isinstance(page, QScrollArea):
            # Once the layouts have placed what the check just showed, hid or lengthened
            # (the scroll area resizes its page after the page's own layout has run). The
            # page is the timer's context: a window closed meanwhile drops the call.
            QTimer.singleShot(
                SCROLL_AFTER_MS, page, lambda: page.ensureWidgetVisible(self.hosts.last_shown())
            )

    def reveal(self, problem: Problem) -> None:
        """Shows the tab of ``problem`` and puts the focus on its widget."""
        self.setCurrentIndex(self.tab_of(problem))
        widget = owner(problem.loc, self.targets())
        if widget is not None and problem.loc[:1] != ("tf_config",):
            page = self.currentWidget()
            if isinstance(page, QScrollArea):
                page.ensureWidgetVisible(widget)
            widget.setFocus()
