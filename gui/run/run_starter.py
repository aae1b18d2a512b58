"""What happens between Run (or the queue's next run, or Resume) and the engine's start.

The window's Run, the queue and the runs panel's Resume all start runs the same way:
the project's paths resolved against the project file, its custom code trusted by the
user, a run folder made (or a stopped run's folder reused) and a run model for the views
to follow. Kept here, beside the window, so the window only wires its actions to it and
its views to :attr:`RunStarter.following`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ...engine.cluster.run_plans import cluster_plan
from ...engine.cluster.ssh import SshLaunch
from ...engine.config import Project
from ...engine.examples import is_shipped
from ...engine.problems import ProblemsError
from ...engine.resume_rules import Layout, resumable_run, window_refusal
from ...engine.run_folder import RunFolderError, has_checkpoint, new_run_dir
from ...engine.run_history import RunSummary, summarize
from ...engine.run_model import RunModel
from ...engine.user_code import UserCodeError, fingerprint
from ..common import dialogs, settings
from ..project.project_document import ProjectDocument
from .run_controller import RunController


class RunStarter(QObject):
    """Starts the document's project, a queued project or a resumed run on ``controller``."""

    following = Signal(object, str)  # RunModel, caption: the views follow this run from now on
    log = Signal(str, str)  # text, level ("info" or "warning")

    def __init__(
        self,
        controller: RunController,
        document: ProjectDocument,
        runs_root: Path | None,
        window: QWidget,
    ) -> None:
        """``runs_root``: where run folders are made (None: the user's default)."""
        super().__init__(window)
        self._controller = controller
        self._document = document
        self._window = window
        self.runs_root = runs_root

    def run(self) -> None:
        """Starts the project as the forms show it, in a fresh run folder."""
        project = self._document.validation.project
        if project is None or self._controller.active:
            return
        project = project.resolve_paths(self._document.base_dir())
        if self.may_run_custom_code(project, self._document.project_dir()):
            self.start_new(project)

    def start_new(
        self, project: Project, hosts: Callable[[str], SshLaunch] | None = None
    ) -> Path | None:
        """Starts ``project`` (paths resolved, code trusted) in a fresh folder; the folder.

        ``hosts`` gives, for the run folder's name, how the cluster's tasks reach the hosts
        its TF_CONFIG names (Run on Hosts); None runs here."""
        try:
            run_dir = new_run_dir(project.name, self.runs_root)
        except OSError as exc:
            dialogs.show_error(self._window, "Cannot run", f"No run folder could be made: {exc}")
            return None
        launch = hosts(run_dir.name) if hosts is not None else None
        name = summarize(run_dir, scan=False).name
        self._start_in(project, run_dir, name, "run folder", launch)
        return run_dir

    def start_trial(self, project: Project, run_dir: Path) -> bool:
        """Starts a study's trial in the folder the study gave it; False when it could not.

        The study made the project (its paths resolved, its custom code trusted when
        the study started) and named it after the trial's values.
        """
        if self._controller.active:
            return False
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            dialogs.show_error(self._window, "Cannot run", f"No trial folder could be made: {exc}")
            return False
        self._start_in(project, run_dir, project.name, "trial folder")
        return True

    def _start_in(
        self,
        project: Project,
        run_dir: Path,
        name: str,
        what: str,
        hosts: SshLaunch | None = None,
    ) -> None:
        model = RunModel(total_steps=project.total_steps(), run_dir=run_dir, name=name)
        self.following.emit(model, name)
        self.log.emit(f"{what}: {run_dir}", "info")
        self._controller.start(project, run_dir, model=model, hosts=hosts)

    def project_for_queue(self) -> Project | None:
        """The project as Run would start it, or None after saying why it cannot run."""
        project = self._document.valid_project(
            "Cannot queue", "Only a valid project can run; fix these first."
        )
        plan = cluster_plan(project)
        if project is None or (plan is not None and not plan.runnable):
            if plan is not None:
                dialogs.show_error(self._window, "Cannot queue", plan.summary())
            return None
        project = project.resolve_paths(self._document.base_dir())
        if not self.may_run_custom_code(project, self._document.project_dir()):
            return None
        return project

    def start_queued(self, project: Project) -> Path | None:
        """The queue's Run: asks about custom code again only if the file changed since."""
        if self._controller.active or not self.may_run_custom_code(project, None):
            return None
        self.log.emit(f"queue: starting {project.name}", "info")
        return self.start_new(project)

    def may_run_custom_code(self, project: Project, project_dir: Path | None) -> bool:
        """A project's custom code runs only once the user trusts that file with that content.

        Projects travel, and their code runs with the user's rights, so the user is
        asked once per file and content (the answer is kept in the settings; a changed
        file asks again); the shipped examples' code is Distloop's own. ``project_dir``
        is None for a run folder's copy, whose paths are all absolute.
        """
        if project.custom_code is None:
            return True
        try:
            code = fingerprint(project.custom_code.path, project_dir)
        except UserCodeError as exc:
            dialogs.show_error(self._window, "Cannot run", str(exc))
            return False
        if not (is_shipped(code.path) or settings.trusts_code(code.path, code.sha256)):
            if not dialogs.trust_custom_code(self._window, code):
                self.log.emit(f"not run: {code.path} is not trusted", "warning")
                return False
            settings.trust_code(code.path, code.sha256)
        self.log.emit(f"running custom step code {code.path} (sha256 {code.sha256})", "info")
        return True

    def may_launch(self, project: Project, launch: SshLaunch) -> bool:
        """Whether the user agrees to what ``launch`` runs beyond Distloop (a host's own
        command line, an ssh configuration file): a project or a run folder's settings
        may come from anyone, so each new set is asked about once, like custom code."""
        unusual = launch.unusual(project)
        if not unusual or settings.trusts_launch(unusual):
            return True
        if not dialogs.trust_launch(self._window, unusual):
            self.log.emit("not launched: what it runs on the hosts is not trusted", "warning")
            return False
        settings.trust_launch(unusual)
        return True

    def resume(self, run: RunSummary) -> None:
        """Continues a stopped or failed run in its own folder from its last checkpoint.

        The run's model is loaded from its folder, so the plot first shows the steps
        already in ``metrics.csv``; the engine then reports from the step after its
        checkpoint, and the model drops the steps it redoes, so no step is drawn twice.
        """
        if self._controller.active:
            return
        try:
            resumable = resumable_run(run.path)
        except RunFolderError as exc:
            dialogs.show_error(self._window, "Cannot resume", f"{run.name}: {exc}")
            return
        except ProblemsError as exc:
            dialogs.show_problems(
                self._window,
                "Cannot resume",
                f"{run.name}: its project.json has problems.",
                exc.problems,
            )
            return
        project = resumable.project
        hosts = None
        if resumable.layout is Layout.LAUNCH and resumable.launch is not None:
            hosts = SshLaunch.from_settings(resumable.launch, project)
        refusal = window_refusal(resumable)
        if refusal is not None:
            dialogs.show_error(self._window, "Cannot resume", f"{run.name}: {refusal}")
            return
        if hosts is not None and not self.may_launch(project, hosts):
            hosts.close()
            return
        if not self.may_run_custom_code(project, None):
            return
        over = not has_checkpoint(run.path)
        if over and not dialogs.confirm_start_over(self._window, run.name):
            return
        try:
            model = RunModel.from_folder(run.path)
        except OSError as exc:  # no metrics yet: the plot starts empty, the engine from step 1
            self.log.emit(f"no earlier steps to show: {exc}", "warning")
            model = RunModel(run_dir=run.path, name=run.name)
        model.total_steps = project.total_steps()
        model.resume()
        self.following.emit(model, f"{run.name} (resumed)")
        self.log.emit(
            f"resuming {run.name} from step 1: it has no checkpoint in {run.path}"
            if over
            else f"resuming {run.name} from its last checkpoint in {run.path}",
            "warning" if over else "info",
        )
        self._controller.start(project, run.path, resume=True, model=model, hosts=hosts)
