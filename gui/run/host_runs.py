"""The window's actions for a cluster on other machines: Check Cluster, Run on Hosts,
Submit to Slurm, Dump Stacks.

Each is the engine's own (``distloop preflight``'s pre-flight, ``distloop launch``'s run
through :func:`engine.run_handle.open_run` with the hosts as its placement, ``distloop
submit``'s job, the cluster's or the job's stack dump); a followed job is its scheduler's
(:mod:`engine.cluster.scheduler`), asked to follow, resume and signal it. What the window
adds is running them off its thread (:class:`gui.common.background.Background`: ssh, sbatch
and the pre-flight take seconds to a minute) and saying, on each disabled action, why it
does not apply now.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

from ...engine.cluster.preflight import Finding, preflight
from ...engine.cluster.run_plans import HostsPlan, hosts_plan
from ...engine.cluster.scheduler import (
    JobRun,
    Scheduler,
    SchedulerError,
    scheduler_named,
    scheduler_of,
)
from ...engine.cluster.ssh import SshLaunch
from ...engine.cluster_layout import local_cluster_tasks, runs_as_cluster
from ...engine.config import Project
from ...engine.exports.slurm import SlurmJob
from ...engine.problems import ProblemsError
from ...engine.run_folder import TASKS_DIR, default_runs_root
from ...engine.run_model import RunModel
from ...engine.stack_dumps import TaskStack, diagnose
from ..common import dialogs
from ..common.background import Background, Progress
from ..project.hosts_panel import HostsPanel
from . import slurm_dialog
from .run_controller import RunController, RunState

CHECK_KEYS = "Ctrl+Shift+K"
RUN_KEYS = "Ctrl+Shift+O"
DUMP_KEYS = "Ctrl+Shift+D"
SUBMIT_KEYS = "Ctrl+Shift+B"
SLURM_STOP_GRACE_S = 45.0
"""scancel's SIGTERM, a checkpoint at one step, then Slurm's KillWait (30 s by default)."""


def check_cluster(project: Project, launch: SshLaunch, progress: Progress) -> list[Finding]:
    """The engine's pre-flight of ``project``'s hosts; the shared ssh connections end after."""
    try:
        return preflight(project, launch.tf_config(project), launch, progress)
    finally:
        launch.close()


class HostRuns(QObject):
    """Check Cluster, Run on Hosts and Dump Stacks, with the hosts panel they report to."""

    log = Signal(str, str)  # text, level: for the window's log panel
    job_state = Signal(object, str, str)  # RunModel, job id, state: a Slurm job's, as it changes

    def __init__(
        self,
        panel: HostsPanel,
        controller: RunController,
        project: Callable[[], Project | None],
        start: Callable[[Project, Callable[[str], SshLaunch]], object],
        follow: Callable[[RunModel, str], None],
        may_run: Callable[[Project], bool],
        may_launch: Callable[[Project, SshLaunch], bool],
        show_panel: Callable[[], None],
        window: QWidget,
        runs_root: Path | None = None,
    ) -> None:
        """``project``: the forms' project with its paths resolved, or None when invalid;
        ``start``: starts it on hosts (the run starter's); ``follow``: the views follow a
        run's model from now on (a submitted job's); ``may_run``: the user trusts its
        custom code; ``show_panel``: brings the TF_CONFIG tab's hosts into view;
        ``runs_root``: beside it, Submit to Slurm proposes the job's folder."""
        super().__init__(window)
        self._panel = panel
        self._controller = controller
        self._project = project
        self._start = start
        self._follow = follow
        self._runs_root = runs_root
        self._may_run = may_run
        self._may_launch = may_launch
        self._show_panel = show_panel
        self._window = window
        self._checking = Background(self)
        self._checking.progress.connect(lambda _key, *shown: panel.show_progress(*shown))
        self._checking.done.connect(lambda _key, findings: self._checked(findings))
        self._checking.failed.connect(lambda _key, text: self._check_failed(text))
        self._dumping = Background(self)
        self._dumping.done.connect(lambda _key, said: self._dumped(said))
        self._dumping.failed.connect(
            lambda _key, text: self.log.emit(f"Dump Stacks: {text}", "error")
        )
        self._submitting = Background(self)
        self._submitting.done.connect(lambda _key, run: self._submitted(run))
        self._submitting.failed.connect(lambda _key, text: self._submit_failed(text))
        self._refused_title = "Cannot submit"  # or "Cannot resume": what sbatch refused
        self._slurm = scheduler_named("slurm")
        self._job: tuple[Scheduler, JobRun] | None = None
        """The job the window follows, and its scheduler (Dump Stacks asks it)."""
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
        self.submit_action = self._action(
            "&Submit to Slurm…",
            self.submit,
            SUBMIT_KEYS,
            "Submit the cluster as a Slurm batch job (sbatch) and follow it here",
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
        self._set(self.submit_action, running or self._submit_refusal())

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
        job = self._followed_job()
        cluster = job[1] if job else self._controller.cluster
        if not self._controller.active or cluster is None or cluster.done:
            return "no cluster is running (Dump Stacks asks the tasks of a running cluster)"
        if self._controller.state is not RunState.RUNNING:
            return "the cluster's tasks are still starting"
        if not job and not hasattr(cluster, "dump_stacks"):
            return "this cluster cannot dump its tasks' stacks"
        return ""

    def _followed_job(self) -> tuple[Scheduler, JobRun] | None:
        """The job the window's run is, with its scheduler; None for any other run."""
        if self._job is None or self._controller.engine is not self._job[1]:
            return None
        return self._job

    def _submit_refusal(self) -> str:
        project = self._project()
        if self._submitting.running:
            return "a job is being submitted"
        if project is None:
            return "the project has problems: fix them first"
        if not runs_as_cluster(project):
            return (
                f"strategy {project.strategy.kind} runs in one process: choose "
                "multi_worker_mirrored or parameter_server to run on several nodes"
            )
        if shutil.which("sbatch") is None:
            return "sbatch is not on PATH: Slurm's client commands are not installed here"
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
        if not self._may_launch(project, launch):
            launch.close()
            return False
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

    # --- Submit to Slurm -----------------------------------------------------------------

    def submit(self) -> None:
        """Submit to Slurm: the job's shape asked for, sbatch run off the window's thread,
        then the job followed like any run (Stop is scancel, with a checkpoint)."""
        project = self._project()
        if project is None or self._controller.active or self._submit_refusal():
            return
        if not self._may_run(project):
            return
        try:
            tasks = len(local_cluster_tasks(project))
        except ProblemsError:
            tasks = 0
        stamp = time.strftime("%Y%m%d-%H%M%S")
        slug = re.sub(r"[^a-z0-9]+", "-", project.name.lower()).strip("-")[:40] or "job"
        folder = self._jobs_root() / f"{stamp}-{slug}"  # a path any shell takes
        asked = slurm_dialog.ask_slurm_job(self._window, project.strategy.kind, tasks, folder)
        if asked is None:
            return
        job, folder = asked
        self._submit(project, job, folder)

    def _submit(self, project: Project, job: SlurmJob, folder: Path) -> None:
        slurm = self._slurm
        self._sbatch(
            lambda: (slurm, slurm.submit(project, folder, job)),
            "Cannot submit",
            f"Submit to Slurm: sbatch {folder}/slurm.sbatch…",
        )

    def _sbatch(
        self, submit: Callable[[], tuple[Scheduler, JobRun]], refused_title: str, saying: str
    ) -> None:
        """Submit and Resume alike: sbatch off the window's thread, then follow the job
        (:meth:`_submitted`), or say what sbatch refused under ``refused_title``."""
        self._refused_title = refused_title
        self._submitting.start(
            lambda _progress: submit(), known=(SchedulerError, ProblemsError, OSError)
        )
        self.log.emit(saying, "info")
        self.update_actions()

    def resume_job(self, run_dir: Path, name: str) -> None:
        """Resume on a stopped job's run in the Runs list: a new job of its scheduler
        continues it from its checkpoint (``distloop submit --resume``), followed as a
        submitted one is."""
        if self._controller.active or self._submitting.running:
            return
        try:
            scheduler = scheduler_of(run_dir)
            project = scheduler.project_of(run_dir)
        except SchedulerError as exc:
            dialogs.show_error(self._window, "Cannot resume", f"{name}: {exc}")
            return
        if not self._may_run(project):
            return
        self._sbatch(
            lambda: (scheduler, scheduler.resubmit(run_dir)),
            "Cannot resume",
            f"Resume: sbatch a new job that continues {name}…",
        )

    def _jobs_root(self) -> Path:
        return self._slurm.jobs_root(self._runs_root or default_runs_root())

    def follow_job(self, run_dir: Path, name: str) -> None:
        """Follow Job on a job its scheduler still holds (submitted by an earlier window, or
        by ``distloop submit``): its steps from the job's first, its state, Stop and Dump
        Stacks, as for a job submitted here."""
        if self._controller.active:
            return
        try:
            scheduler = scheduler_of(run_dir)
            run = scheduler.follow(run_dir)
        except SchedulerError as exc:
            dialogs.show_error(self._window, "Cannot follow", f"{name}: {exc}")
            return
        self._watch(scheduler, run, f"following job {run.job_id}, run folder {run.run_dir}")

    def _submitted(self, submitted: tuple[Scheduler, JobRun]) -> None:
        self.update_actions()
        scheduler, run = submitted
        try:  # a folder the user chose elsewhere: the Runs list finds the job through this
            scheduler.remember(self._runs_root or default_runs_root(), run.run_dir)
        except OSError as exc:
            self.log.emit(f"job {run.job_id} is not in the Runs list: {exc}", "warning")
        if self._controller.active:
            self.log.emit(
                f"job {run.job_id} is submitted but not followed (another run started): "
                f"distloop submit --follow {run.run_dir}",
                "warning",
            )
            return
        self._watch(scheduler, run, f"submitted job {run.job_id}, run folder {run.run_dir}")

    def _watch(self, scheduler: Scheduler, run: JobRun, saying: str) -> None:
        """The job followed as the window's run: plot, status, Stop (scancel), its state."""
        self._job = (scheduler, run)
        project = run.project
        model = RunModel(total_steps=project.total_steps(), run_dir=run.run_dir)
        run.on_state = lambda state: self.job_state.emit(model, run.job_id, str(state))
        self.log.emit(saying, "info")
        self._follow(model, f"{project.name} ({scheduler.title} job {run.job_id})")
        self._controller.start(
            project, run.run_dir, model=model, opened=run, stop_grace_s=SLURM_STOP_GRACE_S
        )

    def _submit_failed(self, text: str) -> None:
        self.update_actions()
        self.log.emit(f"{self._refused_title}: {text}", "error")
        dialogs.show_error(self._window, self._refused_title, text)

    # --- Dump Stacks ---------------------------------------------------------------------

    def dump(self) -> None:
        """Every running task writes its stacks into its folder (here, on its host, or on
        its Slurm node)."""
        job = self._followed_job()
        cluster = self._controller.cluster
        if self._dump_refusal():
            return
        if job is not None:
            scheduler, run = job
            run_dir, job_id = run.run_dir, run.job_id
            files = [f"{run_dir / TASKS_DIR}/*/stacks.txt"]
            self._dumping.start(
                lambda _progress: (scheduler.dump_stacks(run_dir, job_id), files),
                known=(SchedulerError, OSError),
            )
        elif cluster is not None:
            dump_stacks: Callable[[], list[TaskStack]] = cluster.dump_stacks  # type: ignore[attr-defined]

            def ask(_progress: Progress) -> tuple[list[str], list[str]]:
                stacks = dump_stacks()
                return diagnose(stacks), [f"{stack.task}: {stack.file}" for stack in stacks]

            self._dumping.start(ask)
        model = self._controller.model
        self._step_at_dump = model.last_step if model is not None else None
        self.log.emit("Dump Stacks: asking every task for its Python stacks…", "info")
        self.update_actions()

    def _dumped(self, said: tuple[list[str], list[str]]) -> None:
        self.update_actions()
        blame, files = said
        model = self._controller.model
        now = model.last_step if model is not None else None
        if now is not None and self._step_at_dump is not None and now > self._step_at_dump:
            blame.append(
                f"the cluster took steps meanwhile ({self._step_at_dump} to {now}): this is "
                "where each task was at that moment, not a hang"
            )
        for line in blame:
            self.log.emit(f"Dump Stacks: {line}", "warning")
        self.log.emit("Dump Stacks: each task's stacks are in\n" + "\n".join(files), "info")
        dialogs.show_stacks(self._window, blame, files)
