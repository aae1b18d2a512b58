"""Study folders for tests: one made by Optuna directly (no training, a second or so),
and one made by a real ``distloop sweep`` (TensorFlow, seconds)."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import optuna
from distloop.engine.project_file import load_project_data
from distloop.engine.study.runner import StudyPlan, StudySettings, write_plan
from distloop.engine.study.space import space_from_data

from .distloop_testing import distloop, synthetic_project

SPACE = {
    "optimizer.learning_rate": {"low": 1e-4, "high": 1.0, "log": True},
    "optimizer.kind": {"choices": ["sgd", "adam"]},
    "model.layers.0.units": {"low": 4, "high": 64},
}


def suggest(trial: optuna.Trial) -> tuple[float, str, int]:
    """The values of :data:`SPACE`, as a study of it suggests them."""
    return (
        trial.suggest_float("optimizer.learning_rate", 1e-4, 1.0, log=True),
        trial.suggest_categorical("optimizer.kind", ["sgd", "adam"]),
        trial.suggest_int("model.layers.0.units", 4, 64),
    )


def objective(trial: optuna.Trial) -> float:
    """The rate alone decides (best at 0.01); the optimizer and the units barely matter."""
    rate, kind, units = suggest(trial)
    return (math.log10(rate) + 2) ** 2 + 0.001 * (kind == "adam") + units * 1e-6


def storage_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'study.db'}"


def optuna_study_folder(folder: Path, trials: int = 8, *, planned: int | None = None) -> Path:
    """A study folder as ``distloop sweep`` writes it (study.json, study.db), its trials told
    by Optuna directly instead of trained: all complete but a pruned one and, last, one
    running. ``planned``: the study's number of trials (default ``trials``)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    project = load_project_data(synthetic_project(1, steps=20))
    space = space_from_data(SPACE, project)
    settings = StudySettings(trials=planned or trials, objective="loss")
    write_plan(folder, StudyPlan(project, space, settings))
    study = optuna.create_study(
        study_name="distloop",
        storage=storage_url(folder),
        sampler=optuna.samplers.RandomSampler(0),
    )
    study.optimize(objective, n_trials=trials - 2)
    pruned = study.ask()
    suggest(pruned)
    pruned.report(0.8125, 40)  # as the engine reports its loss to the pruner
    study.tell(pruned, state=optuna.trial.TrialState.PRUNED)
    study.ask()  # a trial running now
    return folder


def swept_study(folder: Path, trials: int = 6, pruner: str = "median") -> Path:
    """A real ``distloop sweep`` of a tiny model over :data:`SPACE` (about 20 s).

    With a pruner, whether a pruned trial's stop lands before its last step depends on the
    machine's speed (its 30 steps take under a second): ``pruner="none"`` for a study
    whose every trial must train in full."""
    data = synthetic_project(1, steps=30)
    data["name"] = "view test"
    project = folder.parent / f"{folder.name}-project.json"
    project.write_text(json.dumps(data))
    space = folder.parent / f"{folder.name}-space.json"
    space.write_text(json.dumps(SPACE))
    done = distloop(
        "sweep", str(project), "--space", str(space), "--trials", str(trials),
        "--seed", "2", "--pruner", pruner, "--out", str(folder), timeout_s=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


ENDLESS_TRIALS = """
DROP TABLE trials;
CREATE VIEW trials AS WITH RECURSIVE endless(
    trial_id, number, study_id, state, datetime_start, datetime_complete
) AS (
    SELECT 1, 0, 1, 'COMPLETE', NULL, NULL
    UNION ALL SELECT trial_id + 1, number + 1, 1, 'COMPLETE', NULL, NULL FROM endless
) SELECT * FROM endless;
"""
"""A ``trials`` table that is a view whose rows never end: reading it fills the memory."""


def crafted_study_folder(folder: Path, sql: str) -> Path:
    """A study folder as ``distloop sweep`` writes it, its ``study.db`` then changed by
    ``sql``, as someone crafting the folder would."""
    optuna_study_folder(folder, trials=4)
    connection = sqlite3.connect(folder / "study.db")
    try:
        connection.executescript(sql)
        connection.commit()
    finally:
        connection.close()
    return folder
