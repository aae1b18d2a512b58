"""The window's actions for a cluster on other machines: Check Cluster, Run on Hosts, Dump
Stacks.

Each is the engine's own (``distloop preflight``'s pre-flight, ``distloop launch``'s run
through :func:`engine.run_handle.open_run` with ``hosts``, the cluster's stack dump); what
the window adds is running them off its thread (:class:`gui.background.Background`: ssh
and the pre-flight take seconds to a minute) and saying, on each disabled action, why it
does not apply now.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

from ..engine.cluster.preflight import Finding, preflight
from ..engine.cluster.run_plans import HostsPlan, hosts_plan
from ..engine.cluster.ssh import SshLaunch
from ..engine.config import Project
from ..engine.stack_dumps import TaskStack, diagnose
from . import dialogs
from .background import Background, Progress
from .hosts_panel import HostsPanel
from .run_controller import RunController, RunState

CHECK_KEYS = "Ctrl+Shift+K"
RUN_KEYS = "Ctrl+Shift+O"
DUMP_KEYS = "Ctrl+Shift+D"


def check_cluster(project: Project, launch: SshLaunch, progress: Progress) -> list[Finding]:
    """The engine's pre-flight of ``project``'s hosts; the shared ssh connections end after."""
    try:
        return preflight(project, launch.tf_config(project), launch, progress)
    finally:
        launch.close()


class HostRuns(QObject):
    """Check Cluster, Run on Hosts and Dump Stacks, with the hosts panel they report to."""

    log = Signal(str, str)  # text, level: for the window's log panel

    def __init__(
        self,
        panel: HostsPanel,
        controller: RunController,
        project: Callable[[], Project | None],
        start: Callable[[Project, Callable[[str], SshLaunch]], object],
        may_run: Callable[[Project], bool],
        show_panel: Callable[[], None],
        window: QWidget,
    ) -> None:
        """``project``: the forms' project with its paths resolved, or None when invalid;
        ``start``: starts it on hosts (the run starter's); ``may_run``: the user trusts its
        custom code; ``show_panel``: brings the TF_CONFIG tab's hosts into view."""
        super().__init__(window)
        self._panel = panel
        self._controller = controller
        self._project = project
        self._start = start
        self._may_run = may_run
        self._show_panel = show_panel
        self._window = window
        self._checking = Background(self)
        self._checking.progress.connect(panel.show_progress)
        self._checking.done.connect(self._checked)
        self._checking.failed.connect(self._check_failed)
        self._dumping = Background(self)
        self._dumping.done.connect(self._dumped)
        self._dumping.failed.connect(lambda text: self.log.emit(f"Dump Stacks: {text}", "error"))
        self._checked_plan = HostsPlan()
        self._run_after_check: Project | None = None
        self._step_at_dump: int | None = None

        self.check_action = self._action(
            "&Check Cluster", self.check, CHECK_KEYS, "Check every host before a run on them"
        )
        self.run_action = self._action(
            "Run on &Hosts",
            self.run,
            RUN_KEYS,
            "Start every task on the host its TF_CONFIG names, over ssh, after Check Cluster",
        )
        self.dump_action = self._action(
            "&Dump Stacks",
            self.dump,
            DUMP_KEYS,
            "Every task of the running cluster writes its Python stacks; the one not where "
            "its peers wait is named",
        )
        panel.check_button.setDefaultAction(self.check_action)
        controller.state_changed.connect(lambda _state: self.update_actions())

    def _action(self, text: str, slot: Callable[[], None], keys: str, tip: str) -> QAction:
        action = QAction(text, self._window)
        action.setShortcut(QKeySequence(keys))
        action.setStatusTip(tip)
        action.setToolTip(tip)
        action.setProperty("usual_tip", tip)
        action.triggered.connect(lambda _checked=False: slot())
        return action

    @property
    def checking(self) -> bool:
        return self._checking.running or self._run_after_check is not None

    # --- what applies now ----------------------------------------------------------------

    def update_actions(self) -> None:
        """Each action enabled when it applies, else disabled with the reason as its tip."""
        plan = hosts_plan(self._project())
        self._panel.set_plan(plan)
        busy = "a check is running" if self._checking.running else ""
        running = "a run is in progress" if self._controller.active else ""
        self._set(self.check_action, busy or ("" if plan.runnable else plan.refusal))
        self._set(self.run_action, running or busy or ("" if plan.runnable else plan.refusal))
        self._set(self.dump_action, self._dump_refusal())

    @staticmethod
    def _set(action: QAction, refusal: str) -> None:
        action.setEnabled(not refusal)
        usual = str(action.property("usual_tip"))
        keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        tip = f"{usual} ({keys})" if not refusal else f"Not now: {refusal}"
        action.setToolTip(tip)
        action.setStatusTip(tip)

    def _dump_refusal(self) -> str:
        if self._dumping.running:
            return "the tasks are writing their stacks"
        cluster = self._controller.cluster
        if not self._controller.active or cluster is None or cluster.done:
            return "no cluster is running (Dump Stacks asks the tasks of a running cluster)"
        if self._controller.state is not RunState.RUNNING:
            return "the cluster's tasks are still starting"
        if not hasattr(cluster, "dump_stacks"):
            return "this cluster cannot dump its tasks' stacks"
        return ""

    # --- Check Cluster and Run on Hosts --------------------------------------------------

    def check(self) -> None:
        """Check Cluster: the pre-flight of every host, its findings in the TF_CONFIG tab."""
        project = self._project()
        if project is not None and hosts_plan(project).runnable:
            self._begin_check(project)

    def run(self) -> None:
        """Run on Hosts: the pre-flight first; a finding asks before the run starts."""
        project = self._project()
        if project is None or self._controller.active or not hosts_plan(project).runnable:
            return
        if self._may_run(project) and self._begin_check(project):
            self._run_after_check = project

    def _begin_check(self, project: Project) -> bool:
        launch = self._panel.launch(project, "preflight")
        if not self._checking.start(lambda progress: check_cluster(project, launch, progress)):
            launch.close()
            return False
        self._checked_plan = hosts_plan(project)
        self._show_panel()
        self._panel.show_checking()
        self.update_actions()
        return True

    def _checked(self, findings: list[Finding]) -> None:
        plan = self._checked_plan
        tasks = sum(len(tasks) for tasks in plan.hosts.values())
        self._panel.show_findings(findings, len(plan.hosts), tasks)
        self._show_panel()
        for finding in findings:
            self.log.emit(f"Check Cluster: {finding}", "warning")
        if not findings:
            self.log.emit(
                f"Check Cluster: {len(plan.hosts)} host(s), {tasks} task(s) ready", "info"
            )
        project, self._run_after_check = self._run_after_check, None
        self.update_actions()
        if project is None or self._controller.active:
            return
        if findings and not dialogs.confirm_run_despite_findings(self._window, findings):
            self.log.emit("Run on Hosts: not started (Check Cluster found problems)", "warning")
            return
        self._start(project, lambda run_name: self._panel.launch(project, run_name))

    def _check_failed(self, text: str) -> None:
        self._run_after_check = None
        self._panel.show_check_failed(text)
        self.log.emit(f"Check Cluster could not run: {text}", "error")
        self.update_actions()

    # --- Dump Stacks ---------------------------------------------------------------------

    def dump(self) -> None:
        """Every running task writes its stacks into its folder (here or on its host)."""
        cluster = self._controller.cluster
        if self._dump_refusal() or cluster is None:
            return
        dump_stacks: Callable[[], list[TaskStack]] = cluster.dump_stacks  # type: ignore[attr-defined]
        model = self._controller.model
        self._step_at_dump = model.last_step if model is not None else None
        self._dumping.start(lambda _progress: dump_stacks())
        self.log.emit("Dump Stacks: asking every task for its Python stacks…", "info")
        self.update_actions()

    def _dumped(self, stacks: list[TaskStack]) -> None:
        self.update_actions()
        blame = diagnose(stacks)
        model = self._controller.model
        now = model.last_step if model is not None else None
        if now is not None and self._step_at_dump is not None and now > self._step_at_dump:
            blame.append(
                f"the cluster took steps meanwhile ({self._step_at_dump} to {now}): this is "
                "where each task was at that moment, not a hang"
            )
        files = [f"{stack.task}: {stack.file}" for stack in stacks]
        for line in blame:
            self.log.emit(f"Dump Stacks: {line}", "warning")
        self.log.emit("Dump Stacks: each task's stacks are in\n" + "\n".join(files), "info")
        dialogs.show_stacks(self._window, blame, files)
