"""A study: Optuna asks for each trial's values, a real run trains them, what its run's
model tells answers (and may prune it), and everything persists in the study's folder.

The folder holds ``study.json`` (the base project, the space, the settings: what a
resume needs), Optuna's storage ``study.db`` (SQLite; ``optuna.load_study`` reads
it), and ``trials/trial-NNNN/``, one ordinary run folder per trial, whose
``status.json`` names its study and trial number. A trial runs as any run does
(:func:`engine.run_handle.open_run`: one engine, or a local cluster for a
multi-worker project), so a pruned trial stops through the normal stop path: a
checkpoint, its ``model.keras``, and then the status ``pruned`` with the step and
why. A trial whose loss turns NaN fails; the study goes on. A study stopped (Ctrl-C)
or killed mid-trial resumes: the interrupted trial's values are queued again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import MAX_SEED, Project
from ..engine_handle import EngineHandle
from ..fileio import atomic_write_text
from ..problems import Problem, ProblemsError, parse_json_text, problems_from_validation_error
from ..process import WarmEngines
from ..project_file import load_project_data
from ..run_events import RunEvent
from ..run_folder import (
    STUDY_FILE,
    TRIALS_DIR,
    RunFolderBusy,
    RunFolderLock,
    default_runs_root,
    new_folder,
    update_status,
    write_status,
)
from ..run_handle import open_run
from ..run_model import RunModel
from ..run_session import RunSession
from .hparams import write_experiment, write_trial
from .objective import ObjectiveTracker, direction, objective_problems
from .space import Choices, FloatRange, IntRange, SearchSpace, space_from_data, with_values
from .storage import READ_SECONDS, StudyUnreadable, check_storage

STORAGE_FILE = "study.db"
STUDY_VERSION = 1
"""Of ``study.json``'s layout; a folder written before it had the number is version 1."""
INTERRUPTED = "interrupted"
"""User attribute of a trial stopped with the study: its values run again on resume."""
MAX_GRID_POINTS = 100_000
"""Combinations a grid study may have: ten times the most trials a study runs. Optuna's
grid sampler lists every combination in memory first (10^9 of them: a MemoryError)."""
Sampler = Literal["tpe", "random", "grid", "cmaes"]
Pruner = Literal["none", "median", "asha", "hyperband"]


class StudyBusy(ProblemsError):
    """Another process runs the study in this folder now."""

    def __init__(self, folder: Path, holder: int | None) -> None:
        by = f"process {holder}" if holder else "another process"
        super().__init__(
            [Problem((), f"the study is being run by {by}: stop it there first")], str(folder)
        )


class StudySettings(BaseModel):
    """How the search runs; kept in ``study.json`` so a resume searches the same way."""

    model_config = ConfigDict(extra="forbid", strict=True)

    trials: int = Field(20, ge=1, le=10_000)
    sampler: Sampler = "tpe"
    pruner: Pruner = "median"
    objective: Literal["val_loss", "val_accuracy", "loss"] = "val_loss"
    seed: int = Field(0, ge=0, le=MAX_SEED)
    report_every: int | None = Field(
        None, ge=1, description="Steps between pruning reports of the loss (None: a tenth)."
    )
    warmup_steps: int = Field(0, ge=0, description="Steps before a trial may be pruned.")


@dataclass(frozen=True)
class TrialResult:
    number: int
    params: dict[str, Any]
    state: str
    """``complete``, ``pruned`` or ``failed``."""
    value: float | None
    run_dir: Path
    steps: int
    note: str = ""


@dataclass(frozen=True)
class StudyPlan:
    """What a study folder holds about its search, read back on resume."""

    project: Project
    space: SearchSpace
    settings: StudySettings

    def planned_trials(self) -> int:
        """The trials the study runs: a grid no more than its combinations."""
        if self.settings.sampler == "grid":
            return min(self.settings.trials, self.space.grid_size())
        return self.settings.trials

    def problems(self) -> list[Problem]:
        found = objective_problems(self.project, self.settings.objective)
        if self.settings.sampler == "grid" and not self.space.is_grid():
            found.append(
                Problem(("sampler",), "grid needs every field as values or choices, not ranges")
            )
        elif self.settings.sampler == "grid" and self.space.grid_size() > MAX_GRID_POINTS:
            found.append(
                Problem(
                    ("sampler",),
                    f"the grid has {self.space.grid_size()} combinations; at most "
                    f"{MAX_GRID_POINTS}: search fewer values, or with tpe or random",
                )
            )
        if self.settings.sampler == "cmaes" and any(
            isinstance(axis, Choices) for axis in self.space.axes.values()
        ):
            found.append(Problem(("sampler",), "cmaes searches number ranges only: no choices"))
        if self.settings.sampler == "grid" and self.settings.pruner == "hyperband":
            found.append(
                Problem(("pruner",), "hyperband draws its own brackets: use median, asha or none")
            )
        return found


def new_study_dir(project_name: str, root: Path | None = None) -> Path:
    """A fresh, empty study folder among the runs (``20261204-173012-seed-study``)."""
    return new_folder(f"{project_name} study", root or default_runs_root())


def write_plan(folder: Path, plan: StudyPlan) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(
        folder / STUDY_FILE,
        json.dumps(
            {
                "study_version": STUDY_VERSION,
                "project": plan.project.model_dump(mode="json"),
                "space": plan.space.to_json(),
                "settings": plan.settings.model_dump(mode="json"),
            },
            indent=2,
        )
        + "\n",
    )


def read_plan(folder: Path) -> StudyPlan:
    """The plan a study folder was started with; ProblemsError when it is not one."""
    path = folder / STUDY_FILE
    try:
        if not path.is_file() or path.is_symlink():
            raise ValueError(f"no {STUDY_FILE}: not a study folder")
        if path.stat().st_size > 16 * 2**20:
            raise ValueError(f"{STUDY_FILE} is too large to be a study's")
        data = parse_json_text(path.read_text(encoding="utf-8"), str(path))
        if not isinstance(data, dict):
            raise ValueError(f"{STUDY_FILE} is not a JSON object: not a study folder")
        _check_version(data.get("study_version", 1))
        project = load_project_data(data["project"], f"{path}: project")
        settings = StudySettings.model_validate(data["settings"])
        return StudyPlan(
            project, space_from_data(data["space"], project, f"{path}: space"), settings
        )
    except ValidationError as exc:
        raise ProblemsError(problems_from_validation_error(exc, ("settings",)), str(path)) from None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        if isinstance(exc, ProblemsError):
            raise
        raise ProblemsError([Problem((), str(exc))], str(folder)) from None


def _check_version(version: object) -> None:
    if version == STUDY_VERSION and not isinstance(version, bool):
        return
    if isinstance(version, int) and not isinstance(version, bool) and version > STUDY_VERSION:
        raise ValueError(
            f"{STUDY_FILE} is study_version {version}, written by a newer Distloop; this one "
            f"reads version {STUDY_VERSION}"
        )
    raise ValueError(f"{STUDY_FILE}: study_version must be {STUDY_VERSION}, not {version!r}")


class Study:
    """One study folder, held (locked) while it runs: Optuna's study in it, and the
    trials it asks for, each a :class:`TrialRun` whose run someone else drives.

    :meth:`run` drives them itself, one process after another (the command line); the
    window drives each trial's run through its own run path, whose model the trial hears.
    A second process that opens the folder while one runs it is refused
    (:class:`StudyBusy`): two could never agree on which trial runs next.
    """

    def __init__(self, folder: Path, plan: StudyPlan) -> None:
        import optuna

        optuna.logging.set_verbosity(logging.WARNING)
        try:
            self._lock = RunFolderLock.acquire(folder)
        except RunFolderBusy as exc:
            raise StudyBusy(folder, exc.holder) from None
        self.folder = folder
        self.plan = plan
        settings = plan.settings
        self._optuna = optuna
        try:
            _check_existing_storage(folder / STORAGE_FILE)
            self.study = optuna.create_study(
                study_name="distloop",
                storage=f"sqlite:///{folder / STORAGE_FILE}",
                sampler=self._sampler(),
                pruner=self._pruner(),
                direction=direction(settings.objective),
                load_if_exists=True,
            )
            write_experiment(folder, plan.space, settings.objective, plan.project.name)
        except BaseException:
            self._lock.release()
            raise

    def close(self) -> None:
        """Lets go of the folder: another process may run the study now."""
        self._lock.release()

    def _sampler(self) -> Any:
        samplers = self._optuna.samplers
        settings, space = self.plan.settings, self.plan.space
        if settings.sampler == "grid":
            grid = {path: list(axis.values) for path, axis in space.axes.items()}  # type: ignore[union-attr]
            return samplers.GridSampler(grid, seed=settings.seed)
        if settings.sampler == "random":
            return samplers.RandomSampler(seed=settings.seed)
        if settings.sampler == "cmaes":
            return samplers.CmaEsSampler(seed=settings.seed)
        return samplers.TPESampler(seed=settings.seed, n_startup_trials=self._startup_trials())

    def _startup_trials(self) -> int:
        """Trials before TPE models the results and the median pruner judges: a quarter
        of those planned (a grid's are its combinations, however many were asked), 2 to 10."""
        return max(2, min(10, self.plan.planned_trials() // 4))

    def _pruner(self) -> Any:
        pruners = self._optuna.pruners
        settings = self.plan.settings
        total = self.plan.project.total_steps() or 1
        every = self.report_every()
        if settings.pruner == "median":
            return pruners.MedianPruner(
                n_startup_trials=self._startup_trials(), n_warmup_steps=settings.warmup_steps
            )
        if settings.pruner == "asha":
            return pruners.SuccessiveHalvingPruner(min_resource=max(every, settings.warmup_steps))
        if settings.pruner == "hyperband":
            return pruners.HyperbandPruner(min_resource=every, max_resource=total)
        return pruners.NopPruner()

    def report_every(self) -> int:
        settings = self.plan.settings
        evaluation = self.plan.project.evaluation
        if settings.objective != "loss" and evaluation is not None:
            return evaluation.every
        return settings.report_every or max(1, (self.plan.project.total_steps() or 10) // 10)

    # --- the trials ----------------------------------------------------------------------

    def finished_trials(self) -> int:
        """Trials that count towards the plan: ended, and not queued to run again."""
        states = self._optuna.trial.TrialState
        return sum(
            1
            for t in self.study.get_trials(deepcopy=False)
            if t.state in (states.COMPLETE, states.PRUNED)
            or (t.state == states.FAIL and not t.user_attrs.get(INTERRUPTED))
        )

    def is_complete(self) -> bool:
        """The plan has its number of trials."""
        return self.finished_trials() >= self.plan.planned_trials()

    def requeue_interrupted(self) -> list[int]:
        """Trials a killed or stopped study left running: failed, their values queued again."""
        states = self._optuna.trial.TrialState
        requeued = []
        for trial in self.study.get_trials(deepcopy=False):
            if trial.state == states.RUNNING:
                self._optuna.trial.Trial(self.study, trial._trial_id).set_user_attr(
                    INTERRUPTED, True
                )
                _tell(self.study, trial.number, state=states.FAIL)
                self.study.enqueue_trial(trial.params, skip_if_exists=False)
                requeued.append(trial.number)
        return requeued

    def run(
        self,
        *,
        on_trial: Callable[[TrialResult], None],
        stopping: Callable[[], bool],
        on_poll: Callable[[EngineHandle], None] | None = None,
    ) -> bool:
        """Runs trials until the plan has its number; False when ``stopping`` ended it early.

        Each trial's run is opened here, as ``distloop run`` opens one, and its messages
        go through a :class:`RunModel` the trial listens to, as the window's does; the next
        trial's engine imports TensorFlow while one trains.
        """
        warm = WarmEngines()
        try:
            while not self.is_complete():
                if stopping():
                    return False
                trial = self.ask()
                result = trial if isinstance(trial, TrialResult) else None
                if isinstance(trial, TrialRun):
                    result = self._drive(trial, warm, stopping, on_poll)
                if result is None:
                    return False
                on_trial(result)
            return True
        finally:
            warm.close()

    def _drive(
        self,
        trial: TrialRun,
        warm: WarmEngines,
        stopping: Callable[[], bool],
        on_poll: Callable[[EngineHandle], None] | None,
    ) -> TrialResult | None:
        """Runs one trial to its end. Its stop, the pruner's or the study's, is the run
        session's, as the window's and ``distloop run``'s are: an engine stuck in its step
        (a hung data read, custom code that never returns) is killed once the stop's wait
        runs out, instead of holding the study for ever."""
        project = trial.project
        engine = open_run(project, trial.run_dir, warm_engines=warm)
        model = RunModel(total_steps=project.total_steps(), run_dir=trial.run_dir)
        session = RunSession(model, steps_per_execution=project.training.steps_per_execution)

        def judge(event: RunEvent) -> None:
            if trial.apply(event):
                session.request_stop()

        model.subscribe(judge)
        try:
            session.start(engine)
            warm.prepare()
            while not session.done:
                for message in session.poll(0.2):
                    session.take(message)
                if stopping() and trial.interrupt():
                    session.request_stop()
                session.tick()
                if on_poll is not None:
                    on_poll(engine)
        finally:
            engine.close()
        return trial.end()

    def ask(self) -> TrialRun | TrialResult:
        """The next trial: its values from the sampler, its project and run folder; a
        failed :class:`TrialResult` at once when the values make no valid project."""
        trial = self.study.ask()
        params = {
            path: self._suggest(trial, path, axis) for path, axis in self.plan.space.axes.items()
        }
        run_dir = self.folder / TRIALS_DIR / f"trial-{trial.number:04d}"
        trial.set_user_attr("run_dir", str(run_dir))
        try:
            project = trial_project(self.plan, trial.number, params)
        except ProblemsError as exc:
            _tell(self.study, trial, state=self._optuna.trial.TrialState.FAIL)
            return TrialResult(trial.number, params, "failed", None, run_dir, 0, str(exc))
        return TrialRun(self, trial, params, run_dir, project)

    def _suggest(self, trial: Any, path: str, axis: Any) -> Any:
        if isinstance(axis, FloatRange):
            return trial.suggest_float(path, axis.low, axis.high, log=axis.log)
        if isinstance(axis, IntRange):
            return trial.suggest_int(path, axis.low, axis.high, log=axis.log)
        return trial.suggest_categorical(path, list(axis.values))

    def best(self) -> TrialResult | None:
        """The best complete trial, or None when none completed."""
        states = self._optuna.trial.TrialState
        complete = [t for t in self.study.get_trials(deepcopy=False) if t.state == states.COMPLETE]
        if not complete:
            return None
        best = self.study.best_trial
        return TrialResult(
            best.number,
            best.params,
            "complete",
            best.value,
            Path(best.user_attrs.get("run_dir", "")),
            int(best.last_step or 0),
        )


def trial_project(plan: StudyPlan, number: int, params: dict[str, Any]) -> Project:
    """The project trial ``number`` trains: the study's, with the trial's values, named after
    them (``seed #3 learning_rate=0.01 kind=adam``); ProblemsError when they make no valid
    project."""
    label = " ".join(f"{path.rsplit('.', 1)[-1]}={_short(v)}" for path, v in params.items())
    name = f"{plan.project.name[:120]} #{number} {label}"[:200]
    return with_values(plan.project, params, name)


PRUNER_RULES = {
    "median": "worse than the median of the earlier trials at that step",
    "asha": "not among the best of the trials that reached that rung",
    "hyperband": "not among the best of its bracket's trials at that rung",
}
"""Why each pruner stops a trial, in the words the trial's status and the plot give."""


class TrialRun:
    """One trial from Optuna's ask to its tell: the project it trains in its folder, and
    what its run makes of it (reports at rungs, pruning, the objective).

    Whoever drives the run feeds its messages to a :class:`RunModel` and subscribes
    :meth:`apply` to it (the trial reads the run's plain events, as every view does, never
    the engine's messages); it asks the run to stop when :meth:`apply` answers True
    (pruned) or when :meth:`interrupt` does (the study stops); once the run is closed,
    :meth:`end` tells Optuna and writes the trial's status.
    """

    def __init__(
        self, study: Study, trial: Any, params: dict[str, Any], run_dir: Path, project: Project
    ) -> None:
        self._study = study
        self._trial = trial
        self.number: int = trial.number
        self.params = params
        self.run_dir = run_dir
        self.project = project
        settings = study.plan.settings
        self.tracker = ObjectiveTracker(
            settings.objective, study.report_every(), settings.warmup_steps
        )
        self.pruned_at: int | None = None
        self.pruned_reason = ""
        self.reported: float | None = None
        """The last value reported to the pruner (what a pruned trial's session shows)."""
        self.started = time.time()
        self.interrupted = False

    def apply(self, event: RunEvent) -> bool:
        """Takes one event of the trial's run; True once, when the pruner stops it."""
        self.tracker.apply(event)
        prune = False
        for step, value in self.tracker.take_reports():
            if self.pruned_at is not None or self.interrupted:
                continue
            self._trial.report(value, step)
            self.reported = value
            if self._trial.should_prune():
                settings = self._study.plan.settings
                self.pruned_at = step
                self.pruned_reason = (
                    f"pruned at step {step} by the {settings.pruner} pruner: "
                    f"{settings.objective} {value:.4g} was "
                    f"{PRUNER_RULES.get(settings.pruner, 'not promising')}"
                )
                prune = True
        return prune

    def interrupt(self) -> bool:
        """The study stops with this trial: True when its run is to be asked to stop (a
        pruned one is stopping already, and ends pruned)."""
        if self.interrupted or self.pruned_at is not None:
            return False
        self.interrupted = True
        return True

    def end(self) -> TrialResult | None:
        """Tells Optuna how the trial ended, once its run is closed; None when the study
        stopped it: it counts as interrupted, and its values run again on resume."""
        states = self._study._optuna.trial.TrialState
        study, trial, params, run_dir = self._study.study, self._trial, self.params, self.run_dir
        # Written once the engine is done with status.json, so neither write loses the other.
        update_status(run_dir, study=str(self._study.folder.resolve()), study_trial=self.number)
        steps = self.tracker.last_step
        if self.interrupted:
            trial.set_user_attr(INTERRUPTED, True)
            _tell(study, trial, state=states.FAIL)
            study.enqueue_trial(params, skip_if_exists=False)
            return None
        result = self._told()
        if run_dir.is_dir():  # an engine that never started made no folder
            write_trial(
                run_dir,
                self._study.plan.space,
                params,
                self._study.plan.settings.objective,
                state=result.state,
                value=self.reported if result.state == "pruned" else result.value,
                step=steps,
                started=self.started,
            )
        return result

    def _told(self) -> TrialResult:
        """Tells Optuna how the trial's run ended (not stopped with the study)."""
        states = self._study._optuna.trial.TrialState
        study, trial, params, run_dir = self._study.study, self._trial, self.params, self.run_dir
        steps = self.tracker.last_step
        ending = self.tracker.outcome
        failure = ending.failure if ending is not None else None
        if ending is None or failure is not None:
            _tell(study, trial, state=states.FAIL)
            note = failure.message if failure is not None else "the run ended without a word"
            return TrialResult(self.number, params, "failed", None, run_dir, steps, note)
        # A short trial may reach its last step before the stop the pruner asked for: it
        # trained in full, so it is complete, with its objective, not pruned.
        if self.pruned_at is not None and ending.status == "stopped":
            write_status(
                run_dir, "pruned", pruned_at=self.pruned_at, pruned_reason=self.pruned_reason
            )
            _tell(study, trial, state=states.PRUNED)
            return TrialResult(
                self.number, params, "pruned", None, run_dir, steps, self.pruned_reason
            )
        value = self.tracker.value()
        if value is None:
            _tell(study, trial, state=states.FAIL)
            return TrialResult(
                self.number, params, "failed", None, run_dir, steps, "no finite objective"
            )
        _tell(study, trial, value)
        return TrialResult(self.number, params, "complete", value, run_dir, steps)


def _check_existing_storage(database: Path) -> None:
    """Refuses a ``study.db`` that is no plain Optuna storage before Optuna opens it to
    write (:mod:`engine.study.storage`): whoever continues a study, the window or the
    command line, never runs what a crafted file's views or triggers say."""
    if not database.exists() and not database.is_symlink():
        return  # a new study: Optuna makes the file
    if database.is_symlink() or not database.is_file():
        raise ProblemsError([Problem((), f"{database} is not a regular file")], str(database))
    try:
        check_storage(database, time.monotonic() + READ_SECONDS)
    except StudyUnreadable as exc:
        raise ProblemsError([Problem((), str(exc))], str(database.parent)) from None


def _tell(study: Any, trial: Any, value: float | None = None, state: Any = None) -> None:
    """``study.tell``, which at a grid's last point raises after storing the trial's end.

    Optuna's GridSampler then asks the study to stop, which it allows only inside
    ``study.optimize`` (RuntimeError "`Study.stop` is supposed to be invoked inside an
    objective function"): the study is complete anyway, as a grid's study plans no more
    trials than its combinations (:meth:`StudyPlan.planned_trials`).
    """
    try:
        study.tell(trial, value, state=state)
    except RuntimeError as exc:
        if "Study.stop" not in str(exc):
            raise


def _short(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
