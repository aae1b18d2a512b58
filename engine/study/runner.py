"""A study: Optuna asks for each trial's values, a real run trains them, its live
messages answer (and may prune it), and everything persists in the study's folder.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import MAX_SEED, Project, load_project_data
from ..fileio import atomic_write_text
from ..messages import RunFailed, RunFinished
from ..problems import Problem, ProblemsError, problems_from_validation_error
from ..process import WarmEngines
from ..run_folder import update_status, write_status
from ..run_handle import EngineHandle, open_run
from .objective import ObjectiveTracker, direction, objective_problems
from .space import Choices, FloatRange, IntRange, SearchSpace, space_from_data, with_values

STUDY_FILE = "study.json"
STORAGE_FILE = "study.db"
TRIALS_DIR = "trials"
STUDY_VERSION = 1
"""Of ``study.json``'s layout; a folder written before it had the number is version 1."""
INTERRUPTED = "interrupted"
"""User attribute of a trial stopped with the study: its values run again on resume."""
Sampler = Literal["tpe", "random", "grid", "cmaes"]
Pruner = Literal["none", "median", "asha", "hyperband"]


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

    def problems(self) -> list[Problem]:
        found = objective_problems(self.project, self.settings.objective)
        if self.settings.sampler == "grid" and not self.space.is_grid():
            found.append(
                Problem(("sampler",), "grid needs every field as values or choices, not ranges")
            )
        if self.settings.sampler == "cmaes":
            if any(isinstance(axis, Choices) for axis in self.space.axes.values()):
                found.append(Problem(("sampler",), "cmaes searches number ranges only: no choices"))
            try:
                import cmaes  # noqa: F401  (Optuna's CmaEsSampler needs it)
            except ImportError:
                found.append(
                    Problem(("sampler",), "cmaes needs the cmaes package: pip install cmaes")
                )
        if self.settings.sampler == "grid" and self.settings.pruner == "hyperband":
            found.append(
                Problem(("pruner",), "hyperband draws its own brackets: use median, asha or none")
            )
        return found


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
        data = json.loads(path.read_text(encoding="utf-8"))
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
    """One study folder; :meth:`run` trains trials until the plan's number is reached."""

    def __init__(self, folder: Path, plan: StudyPlan) -> None:
        import optuna

        optuna.logging.set_verbosity(logging.WARNING)
        self.folder = folder
        self.plan = plan
        settings = plan.settings
        self._optuna = optuna
        self._warm = WarmEngines()
        self.study = optuna.create_study(
            study_name="distloop",
            storage=f"sqlite:///{folder / STORAGE_FILE}",
            sampler=self._sampler(),
            pruner=self._pruner(),
            direction=direction(settings.objective),
            load_if_exists=True,
        )

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
        """Random trials before TPE models the results: a quarter of the budget, 2 to 10."""
        return max(2, min(10, self.plan.settings.trials // 4))

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

    def requeue_interrupted(self) -> list[int]:
        """Trials a killed or stopped study left running: failed, their values queued again."""
        states = self._optuna.trial.TrialState
        requeued = []
        for trial in self.study.get_trials(deepcopy=False):
            if trial.state == states.RUNNING:
                self._optuna.trial.Trial(self.study, trial._trial_id).set_user_attr(
                    INTERRUPTED, True
                )
                self.study.tell(trial.number, state=states.FAIL)
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
        """Runs trials until the plan has its number; False when ``stopping`` ended it early."""
        try:
            while self.finished_trials() < self.plan.settings.trials:
                if stopping():
                    return False
                result = self._run_trial(stopping, on_poll)
                if result is None:
                    return False
                on_trial(result)
            return True
        finally:
            self._warm.close()

    def _run_trial(
        self, stopping: Callable[[], bool], on_poll: Callable[[EngineHandle], None] | None
    ) -> TrialResult | None:
        states = self._optuna.trial.TrialState
        trial = self.study.ask()
        params = {
            path: self._suggest(trial, path, axis) for path, axis in self.plan.space.axes.items()
        }
        run_dir = self.folder / TRIALS_DIR / f"trial-{trial.number:04d}"
        trial.set_user_attr("run_dir", str(run_dir))
        try:
            project = trial_project(self.plan, trial.number, params)
        except ProblemsError as exc:
            self.study.tell(trial, state=states.FAIL)
            return TrialResult(trial.number, params, "failed", None, run_dir, 0, str(exc))
        tracker = ObjectiveTracker(
            self.plan.settings.objective, self.report_every(), self.plan.settings.warmup_steps
        )
        engine = open_run(project, run_dir, warm_engines=self._warm)
        engine.start()
        # The next trial's engine imports TensorFlow while this one trains.
        self._warm.prepare()
        pruned_at: int | None = None
        stopped = False
        ending: RunFinished | RunFailed | None = None
        while not engine.done:
            for message in engine.poll(0.2):
                tracker.apply(message)
                if isinstance(message, RunFinished | RunFailed):
                    ending = message
            for step, value in tracker.take_reports():
                if pruned_at is not None or stopped:
                    continue
                trial.report(value, step)
                if trial.should_prune():
                    pruned_at = step
                    engine.request_stop()
            if stopping() and not stopped and pruned_at is None:
                stopped = True
                engine.request_stop()
            if on_poll is not None:
                on_poll(engine)
        engine.close()
        # Written once the engine is done with status.json, so neither write loses the other.
        update_status(run_dir, study=str(self.folder.resolve()), study_trial=trial.number)
        steps = tracker.last_step
        if stopped:
            trial.set_user_attr(INTERRUPTED, True)
            self.study.tell(trial, state=states.FAIL)
            self.study.enqueue_trial(params, skip_if_exists=False)
            return None
        if isinstance(ending, RunFailed) or ending is None:
            self.study.tell(trial, state=states.FAIL)
            note = ending.message if ending is not None else "the run ended without a word"
            return TrialResult(trial.number, params, "failed", None, run_dir, steps, note)
        if pruned_at is not None:
            reason = (
                f"pruned at step {pruned_at} by the {self.plan.settings.pruner} pruner: "
                f"{self.plan.settings.objective} was not promising"
            )
            write_status(run_dir, "pruned", pruned_at=pruned_at, pruned_reason=reason)
            self.study.tell(trial, state=states.PRUNED)
            return TrialResult(trial.number, params, "pruned", None, run_dir, steps, reason)
        value = tracker.value()
        if value is None:
            self.study.tell(trial, state=states.FAIL)
            return TrialResult(
                trial.number, params, "failed", None, run_dir, steps, "no finite objective"
            )
        self.study.tell(trial, value)
        return TrialResult(trial.number, params, "complete", value, run_dir, steps)

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


def _short(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
