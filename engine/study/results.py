"""What a study found, read back from its folder for the window's views (Qt-free).

A study folder may be one a sweep is still writing (in another process), one copied
from another machine, or no study at all, so it is read, never written: Optuna's
``study.db`` is opened read-only (a SQLite URI with ``mode=ro``; Optuna's own
storage would create its tables in any file it is pointed at), and each trial's run
folder is the one under the study's ``trials/`` (the ``run_dir`` a trial recorded
may be relative to where the sweep ran, or to another machine). Anything that makes
the folder unreadable is one line (:class:`StudyUnreadable`).

What the views show is computed here too, from the trials alone: the optimization
history (each complete trial's objective and the best so far), parallel coordinates
(each parameter's range, log or categorical, mapped onto ``[0, 1]``), and parameter
importances by Optuna's default evaluator, computed only when enough trials
completed to say anything.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Project
from ..problems import Problem, ProblemsError
from ..run_folder import TRIALS_DIR, load_json
from ..run_history import RunSummary, is_run_folder, summarize
from .objective import direction
from .runner import INTERRUPTED, STORAGE_FILE, StudyPlan, read_plan, trial_project
from .space import Axis, Choices, FloatRange, IntRange
from .storage import (
    READ_SECONDS,
    StudyUnreadable,
    bounded_connection,
    check_storage,
    unreadable,
)

STUDY_NAME = "distloop"
MIN_TRIALS_FOR_IMPORTANCE = 5
"""Complete trials below which importances would rank noise: Optuna's evaluator then
splits the trials into a top tenth of one trial against the rest."""
FINISHED_STATES = ("complete", "pruned", "failed", INTERRUPTED)
"""Trials whose run folder no longer changes: read once, then kept."""


@dataclass(frozen=True)
class TrialRow:
    number: int
    state: str
    """``complete``, ``pruned``, ``failed``, ``interrupted`` (stopped with the study; its
    values run again), ``running`` or ``queued``."""
    value: float | None
    params: dict[str, Any]
    run: RunSummary | None
    """The trial's run folder, summarized; None when it has none (yet)."""
    steps: int
    duration_s: float | None
    """Wall time from the trial's start to its end (to now while it runs)."""
    note: str = ""
    """Why it was pruned or failed."""
    reported: tuple[int, float] | None = None
    """(step, value) of the objective the trial last reported to the pruner: a pruned
    trial has no final value, but this is the one it was judged by."""


@dataclass(frozen=True)
class Importance:
    values: dict[str, float]
    """Each parameter's share (they sum to 1), most important first; empty when none."""
    note: str
    """What the numbers are, or plainly why there are none."""
    basis: tuple[int, ...] = ()
    """The complete trials they were computed from (a refresh with the same reuses them)."""


@dataclass(frozen=True)
class StudyResults:
    folder: Path
    plan: StudyPlan
    trials: tuple[TrialRow, ...]
    importance: Importance
    axes: dict[str, Axis] = field(default_factory=dict)
    """Each parameter's range, as the trials' distributions give it (the space's order)."""
    stored: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    """Optuna's trials as read, kept while the storage's files stay as they were."""
    storage_stamp: tuple[object, ...] = field(default=(), repr=False, compare=False)

    @property
    def objective(self) -> str:
        return self.plan.settings.objective

    @property
    def direction(self) -> str:
        return direction(self.objective)

    def best(self) -> TrialRow | None:
        return best_trial(self.trials, self.direction)

    def best_project(self) -> Project:
        """The best trial's project, as the study trained it; ProblemsError when none
        completed or its values no longer make a valid project."""
        best = self.best()
        if best is None:
            raise ProblemsError([Problem((), "no trial of the study completed")], str(self.folder))
        return trial_project(self.plan, best.number, best.params)


def best_trial(trials: Sequence[TrialRow], goal: str) -> TrialRow | None:
    """The complete trial with the best objective (the first of equals)."""
    complete = [t for t in trials if t.state == "complete" and t.value is not None]
    if not complete:
        return None
    sign = -1.0 if goal == "maximize" else 1.0
    return min(complete, key=lambda t: (sign * t.value, t.number))  # type: ignore[operator]


# --- reading a study folder -------------------------------------------------------------


def read_results(folder: Path, previous: StudyResults | None = None) -> StudyResults:
    """The study in ``folder`` as it stands; StudyUnreadable says why there is none.

    ``previous`` (an earlier read of the same folder) spares what cannot have changed:
    the storage while its files are as they were (a trial that trains writes to its run
    folder, and to the storage only at its pruning reports), the run folders of ended
    trials, and the importances while the same trials are complete. Reading 300 trials
    from SQLite holds the interpreter for a few tenths of a second, which the window's
    thread feels; read again each second while a trial runs, it would all the time.
    """
    if not folder.is_dir():
        raise StudyUnreadable(f"{folder} is not a folder")
    try:
        plan = read_plan(folder)
    except ProblemsError as exc:
        raise StudyUnreadable(_one_line(exc)) from None
    if previous is not None and previous.folder != folder:
        previous = None
    stamp = storage_stamp(folder)  # before the read: a write during it is read next time
    if previous is not None and previous.storage_stamp == stamp and previous.stored:
        frozen = list(previous.stored)
    else:
        frozen = _read_trials(folder)
    known = {t.number: t for t in previous.trials} if previous else {}
    rows = tuple(_row(folder, trial, known.get(trial.number)) for trial in frozen)
    axes = axes_of(frozen, list(plan.space.axes))
    complete = tuple(t.number for t in rows if t.state == "complete")
    if previous is not None and previous.importance.basis == complete:
        found = previous.importance
    else:
        found = importance(
            [t for t in frozen if t.number in set(complete)], direction(plan.settings.objective)
        )
    return StudyResults(folder, plan, rows, found, axes, tuple(frozen), stamp)


def storage_stamp(folder: Path) -> tuple[object, ...]:
    """What changes when Optuna writes the study: its SQLite file and journals."""
    found: list[object] = []
    for name in (STORAGE_FILE, f"{STORAGE_FILE}-journal", f"{STORAGE_FILE}-wal"):
        try:
            info = os.stat(folder / name)
        except OSError:
            found.append(None)
            continue
        found.append((info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(found)


def _one_line(exc: ProblemsError) -> str:
    return " ".join(str(exc).split())


def _read_trials(folder: Path) -> list[Any]:
    """The study's trials from ``study.db``, checked first (:mod:`engine.study.storage`),
    then read by Optuna through a read-only connection whose queries stop at a deadline."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    database = folder / STORAGE_FILE
    if database.is_symlink() or (database.exists() and not database.is_file()):
        raise StudyUnreadable(f"{database} is not a regular file")
    if not database.exists():
        if (folder / TRIALS_DIR).is_dir():
            raise StudyUnreadable(f"{database} is missing: the study's trials cannot be read")
        return []  # the study was planned and has not asked for a trial yet
    deadline = time.monotonic() + READ_SECONDS
    library = check_storage(database, deadline)
    try:
        storage = optuna.storages.RDBStorage(
            "sqlite://",
            engine_kwargs={"creator": lambda: bounded_connection(database, deadline)},
            skip_table_creation=True,
        )
    except RuntimeError:  # Optuna's schema check
        raise StudyUnreadable(
            f"{database} was written by Optuna {library}, whose storage this Distloop's "
            f"Optuna {optuna.__version__} cannot read"
        ) from None
    except Exception as exc:
        raise unreadable(database, exc) from None
    try:
        study = optuna.load_study(study_name=STUDY_NAME, storage=storage)
        return sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    except KeyError:
        raise StudyUnreadable(f"{database} holds no study named {STUDY_NAME!r}") from None
    except Exception as exc:
        raise unreadable(database, exc) from None
    finally:
        storage.engine.dispose()


def _finite(value: object) -> float | None:
    """A trial's value as a number, or None: a study.db edited by hand or by another tool
    may hold text where Optuna writes a float (SQLite keeps whatever a column is given)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _row(folder: Path, trial: Any, known: TrialRow | None) -> TrialRow:
    state = _state(trial)
    if known is not None and known.state == state and state in FINISHED_STATES:
        return known
    run_dir = folder / TRIALS_DIR / f"trial-{trial.number:04d}"
    run = summarize(run_dir, scan=False) if is_run_folder(run_dir) else None
    value = trial.value if state == "complete" else None
    return TrialRow(
        number=trial.number,
        state=state,
        value=_finite(value),
        params=dict(trial.params),
        run=run,
        steps=run.steps if run is not None else int(trial.last_step or 0),
        duration_s=_duration(trial),
        note=_note(state, run_dir, run),
        reported=_last_reported(trial),
    )


def _last_reported(trial: Any) -> tuple[int, float] | None:
    """The trial's last intermediate value and its step; None when it reported none."""
    reports = {
        step: value for step, value in trial.intermediate_values.items() if math.isfinite(value)
    }
    if not reports:
        return None
    step = max(reports)
    return step, float(reports[step])


def _state(trial: Any) -> str:
    name = trial.state.name
    if name == "FAIL":
        return INTERRUPTED if trial.user_attrs.get(INTERRUPTED) else "failed"
    return {"COMPLETE": "complete", "PRUNED": "pruned", "RUNNING": "running"}.get(name, "queued")


def _duration(trial: Any) -> float | None:
    if trial.datetime_start is None:
        return None
    if trial.datetime_complete is not None:
        return (trial.datetime_complete - trial.datetime_start).total_seconds()
    return max(0.0, time.time() - trial.datetime_start.timestamp())


def _note(state: str, run_dir: Path, run: RunSummary | None) -> str:
    if state == "pruned":
        try:
            status = load_json(run_dir / "status.json")
        except (OSError, ValueError):
            return ""
        reason = status.get("pruned_reason") if isinstance(status, dict) else None
        return reason if isinstance(reason, str) else ""
    if state == "failed" and run is not None and run.error:
        return run.error
    if state == INTERRUPTED:
        return "stopped with the study; its values run again"
    return ""


def axes_of(frozen: Sequence[Any], order: Sequence[str] = ()) -> dict[str, Axis]:
    """Each parameter's range from the trials' distributions (the last one a trial used),
    those in ``order`` first."""
    found: dict[str, Axis] = {}
    for trial in frozen:
        for name, distribution in trial.distributions.items():
            found[name] = _axis(distribution)
    ordered = [name for name in order if name in found]
    rest = [name for name in found if name not in ordered]  # as the trials suggested them
    return {name: found[name] for name in [*ordered, *rest]}


def _axis(distribution: Any) -> Axis:
    kind = type(distribution).__name__
    if kind == "CategoricalDistribution":
        return Choices(tuple(distribution.choices))
    if kind == "IntDistribution":
        return IntRange(int(distribution.low), int(distribution.high), bool(distribution.log))
    return FloatRange(float(distribution.low), float(distribution.high), bool(distribution.log))


# --- what the views show ----------------------------------------------------------------


def trial_rows(frozen: Sequence[Any]) -> tuple[TrialRow, ...]:
    """Rows of trials that have no folder (a study made in memory): state, value, params."""
    return tuple(
        TrialRow(
            number=t.number,
            state=_state(t),
            value=t.value if _state(t) == "complete" else None,
            params=dict(t.params),
            run=None,
            steps=int(t.last_step or 0),
            duration_s=_duration(t),
            reported=_last_reported(t),
        )
        for t in frozen
    )


@dataclass(frozen=True)
class History:
    numbers: tuple[int, ...]
    """The complete trials, in the order they were asked for."""
    values: tuple[float, ...]
    best_so_far: tuple[float, ...]


def history(trials: Sequence[TrialRow], goal: str) -> History:
    """Each complete trial's objective, and the best of it and the ones before."""
    complete = sorted(
        (t for t in trials if t.state == "complete" and t.value is not None),
        key=lambda t: t.number,
    )
    values = [float(t.value) for t in complete]  # type: ignore[arg-type]
    best: list[float] = []
    for value in values:
        if not best:
            best.append(value)
        else:
            best.append(max(best[-1], value) if goal == "maximize" else min(best[-1], value))
    return History(tuple(t.number for t in complete), tuple(values), tuple(best))


@dataclass(frozen=True)
class ParallelAxis:
    name: str
    scale: str
    """``linear``, ``log`` or ``categorical``."""
    ticks: tuple[tuple[float, str], ...]
    """Positions on ``[0, 1]`` and what they read."""
    positions: tuple[float, ...]
    """Where each line crosses the axis, on ``[0, 1]`` (NaN: the trial has no value)."""


@dataclass(frozen=True)
class ParallelCoordinates:
    numbers: tuple[int, ...]
    """The complete trials, one line each."""
    values: tuple[float, ...]
    quality: tuple[float, ...]
    """Each line's objective on ``[0, 1]``, 1 the best: what colours it."""
    axes: tuple[ParallelAxis, ...]
    """The parameters, then the objective."""


def parallel_coordinates(
    trials: Sequence[TrialRow], axes: dict[str, Axis], objective: str, goal: str
) -> ParallelCoordinates:
    """Every complete trial as a line through one axis per parameter and the objective.

    A log range is spaced by its logarithm, a categorical's choices evenly in their
    listed order, each number range over the range searched (not just the values
    tried), so where the tried values sit in the range shows.
    """
    complete = sorted(
        (t for t in trials if t.state == "complete" and t.value is not None),
        key=lambda t: t.number,
    )
    drawn = [
        _parallel_axis(name, axis, [t.params.get(name) for t in complete])
        for name, axis in axes.items()
    ]
    values = [float(t.value) for t in complete]  # type: ignore[arg-type]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    objective_axis = FloatRange(low, high) if high > low else FloatRange(low - 0.5, low + 0.5)
    drawn.append(_parallel_axis(objective, objective_axis, values))
    span = high - low
    quality = [
        1.0 if span == 0 else ((v - low) / span if goal == "maximize" else (high - v) / span)
        for v in values
    ]
    return ParallelCoordinates(
        tuple(t.number for t in complete), tuple(values), tuple(quality), tuple(drawn)
    )


def _parallel_axis(name: str, axis: Axis, values: list[Any]) -> ParallelAxis:
    if isinstance(axis, Choices):
        labels = [str(choice) for choice in axis.values]
        last = max(len(labels) - 1, 1)
        index = {repr(choice): i for i, choice in enumerate(axis.values)}
        positions = tuple(index[repr(v)] / last if repr(v) in index else math.nan for v in values)
        ticks = tuple((i / last, label) for i, label in enumerate(labels))
        return ParallelAxis(name, "categorical", ticks, positions)
    log = axis.log and axis.low > 0
    scale = math.log10 if log else float
    low, high = scale(axis.low), scale(axis.high)
    span = (high - low) or 1.0

    def place(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return math.nan
        if log and value <= 0:
            return math.nan
        return (scale(value) - low) / span

    middle = 10 ** ((low + high) / 2) if log else (axis.low + axis.high) / 2
    ticks = tuple((place(v), _number(v)) for v in (axis.low, middle, axis.high))
    return ParallelAxis(name, "log" if log else "linear", ticks, tuple(place(v) for v in values))


def _number(value: float) -> str:
    return f"{value:.3g}"


def importance(complete: Sequence[Any], goal: str) -> Importance:
    """Each parameter's importance for the objective, by Optuna's default evaluator, over
    the complete trials ``complete`` (Optuna's frozen trials); too few say so instead."""
    import optuna

    basis = tuple(t.number for t in complete)
    if len(complete) < MIN_TRIALS_FOR_IMPORTANCE:
        return Importance(
            {},
            f"Importances need at least {MIN_TRIALS_FOR_IMPORTANCE} complete trials; "
            f"this study has {len(complete)}.",
            basis,
        )
    study = optuna.create_study(direction=goal)
    evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # a study.db edited by another tool may hold trials Optuna itself refuses (a
            # complete trial without its end time): ValueError, said in the line below
            study.add_trials(list(complete))
            values = optuna.importance.get_param_importances(study, evaluator=evaluator)
        except (ValueError, RuntimeError) as exc:
            return Importance({}, f"Optuna could not compute importances: {exc}", basis)
    if any("will be equal" in str(w.message) for w in caught):
        return Importance(
            {},
            f"Optuna cannot tell the parameters apart from these {len(complete)} complete "
            "trials (they score alike); more trials will.",
            basis,
        )
    ranked = dict(sorted(values.items(), key=lambda item: -item[1]))
    return Importance(
        ranked,
        f"Optuna's PED-ANOVA importance over {len(complete)} complete trials: how much each "
        "parameter's values set the best tenth of the trials apart from the rest.",
        basis,
    )
