"""What the study views compute, from studies made with Optuna directly (no training):
the history and its best so far, parallel coordinates on log and categorical axes,
importances (and plainly too few), and a study folder read back without writing to it,
with one line for a folder that is no study, a damaged study.db or another version."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import optuna
import pytest
from distloop.engine.study import results as results_module
from distloop.engine.study.results import (
    MIN_TRIALS_FOR_IMPORTANCE,
    StudyUnreadable,
    axes_of,
    best_trial,
    history,
    importance,
    parallel_coordinates,
    read_results,
    trial_rows,
)
from support.study_folders import SPACE, objective, optuna_study_folder

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _study(trials: int, direction: str = "minimize", seed: int = 1) -> optuna.Study:
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler(seed))
    sign = -1 if direction == "maximize" else 1
    study.optimize(lambda t: sign * objective(t), n_trials=trials)
    return study


def test_the_history_is_each_complete_trial_and_the_best_so_far() -> None:
    study = optuna.create_study()
    for value in (3.0, 5.0, 1.0, 2.0):
        study.enqueue_trial({})
        study.optimize(lambda _t, v=value: v, n_trials=1)
    pruned = study.ask()
    study.tell(pruned, state=optuna.trial.TrialState.PRUNED)
    rows = trial_rows(study.get_trials())
    found = history(rows, "minimize")
    assert found.numbers == (0, 1, 2, 3)  # the pruned trial has no objective
    assert found.values == (3.0, 5.0, 1.0, 2.0)
    assert found.best_so_far == (3.0, 3.0, 1.0, 1.0)
    assert history(rows, "maximize").best_so_far == (3.0, 5.0, 5.0, 5.0)
    assert best_trial(rows, "minimize").number == 2
    assert best_trial(rows, "maximize").number == 1
    assert [r.state for r in rows] == ["complete"] * 4 + ["pruned"]


def test_parallel_coordinates_space_log_and_categorical_axes() -> None:
    study = _study(12)
    rows = trial_rows(study.get_trials())
    found = parallel_coordinates(rows, axes_of(study.get_trials()), "loss", "minimize")
    by_name = {axis.name: axis for axis in found.axes}
    assert [a.name for a in found.axes] == [*SPACE, "loss"]
    rate, kind, units = (by_name[name] for name in SPACE)
    assert (rate.scale, kind.scale, units.scale) == ("log", "categorical", "linear")
    for line, number in enumerate(found.numbers):
        params = study.trials[number].params
        # 1e-4 .. 1 is four decades: a rate's place is its decade from the bottom, over 4.
        expected = (math.log10(params["optimizer.learning_rate"]) + 4) / 4
        assert rate.positions[line] == pytest.approx(expected)
        assert kind.positions[line] == ["sgd", "adam"].index(params["optimizer.kind"])
        assert units.positions[line] == pytest.approx((params["model.layers.0.units"] - 4) / 60)
    assert [label for _, label in kind.ticks] == ["sgd", "adam"]
    assert [label for _, label in rate.ticks] == ["0.0001", "0.01", "1"]
    best = min(range(len(found.values)), key=lambda i: found.values[i])
    worst = max(range(len(found.values)), key=lambda i: found.values[i])
    assert found.quality[best] == 1.0 and found.quality[worst] == 0.0


def test_importances_name_the_parameter_that_decides() -> None:
    study = _study(60)
    found = importance(study.get_trials(), "minimize")
    assert next(iter(found.values)) == "optimizer.learning_rate", found.values
    assert sum(found.values.values()) == pytest.approx(1.0)
    assert "60 complete trials" in found.note
    maximized = importance(_study(60, "maximize").get_trials(), "maximize")
    assert next(iter(maximized.values)) == "optimizer.learning_rate", maximized.values


def test_too_few_complete_trials_for_importances_is_said_plainly() -> None:
    study = _study(MIN_TRIALS_FOR_IMPORTANCE - 1)
    found = importance(study.get_trials(), "minimize")
    assert found.values == {}
    assert found.note == (
        f"Importances need at least {MIN_TRIALS_FOR_IMPORTANCE} complete trials; "
        f"this study has {MIN_TRIALS_FOR_IMPORTANCE - 1}."
    )


# --- study folders, without training -------------------------------------------------------


def test_a_study_folder_reads_back_with_its_best_trials_project(tmp_path: Path) -> None:
    folder = optuna_study_folder(tmp_path / "study")
    before = (folder / "study.db").read_bytes()
    results = read_results(folder)
    assert [t.state for t in results.trials] == ["complete"] * 6 + ["pruned", "running"]
    stored = optuna.load_study(study_name="distloop", storage=f"sqlite:///{folder / 'study.db'}")
    assert results.best().number == stored.best_trial.number
    project = results.best_project()
    assert project.optimizer.learning_rate == stored.best_trial.params["optimizer.learning_rate"]
    assert project.name.startswith(f"invariance x1 #{stored.best_trial.number} learning_rate=")
    assert list(results.axes) == list(SPACE)
    assert (folder / "study.db").read_bytes() == before  # read, never written
    again = read_results(folder, results)
    assert again.importance is results.importance  # the same complete trials: not recomputed


def test_a_study_is_read_again_only_when_its_storage_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = optuna_study_folder(tmp_path / "study")
    first = read_results(folder)
    monkeypatch.setattr(results_module, "_read_trials", _no_read)
    kept = read_results(folder, first)  # the stored trials kept
    assert kept.trials[:-1] == first.trials[:-1]
    assert kept.trials[-1].state == "running"
    assert kept.trials[-1].duration_s > first.trials[-1].duration_s  # still counting
    monkeypatch.undo()
    study = optuna.load_study(study_name="distloop", storage=f"sqlite:///{folder / 'study.db'}")
    study.optimize(objective, n_trials=1)
    later = read_results(folder, first)
    assert len(later.trials) == len(first.trials) + 1
    assert later.trials[-1].state == "complete"


def _no_read(folder: Path) -> None:
    raise AssertionError(f"{folder / 'study.db'} read again, unchanged")


def _write(path: Path, text: str | bytes) -> None:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda f: (f / "study.json").unlink(), "no study.json: not a study folder"),
        (lambda f: _write(f / "study.db", b"\0garbage" * 100), "study.db is damaged or no Optuna"),
        (lambda f: _write(f / "study.db", b""), "study.db is damaged or no Optuna storage"),
        (lambda f: _sqlite_of_another_kind(f / "study.db"), "study.db is damaged or no Optuna"),
        (lambda f: _versioned(f, 2), "study_version 2, written by a newer Distloop"),
        (lambda f: _versioned(f, "one"), "study_version must be 1, not 'one'"),
        (lambda f: _another_optuna(f / "study.db"), "was written by Optuna 9.9.9, whose storage"),
        (lambda f: _renamed_study(f / "study.db"), "holds no study named 'distloop'"),
    ],
)
def test_what_is_no_readable_study_is_one_line_and_nothing_is_changed(
    tmp_path: Path, damage: Any, says: str
) -> None:
    folder = optuna_study_folder(tmp_path / "study", trials=4)
    damage(folder)
    before = {p: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    with pytest.raises(StudyUnreadable) as raised:
        read_results(folder)
    assert says in str(raised.value)
    assert "\n" not in str(raised.value)
    assert {p: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_a_file_or_a_missing_folder_is_no_study(tmp_path: Path) -> None:
    with pytest.raises(StudyUnreadable, match="is not a folder"):
        read_results(tmp_path / "nowhere")
    (tmp_path / "file").write_text("{}")
    with pytest.raises(StudyUnreadable, match="is not a folder"):
        read_results(tmp_path / "file")


def _sqlite_of_another_kind(path: Path) -> None:
    path.unlink()
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")


def _versioned(folder: Path, version: object) -> None:
    data = json.loads((folder / "study.json").read_text())
    data["study_version"] = version
    (folder / "study.json").write_text(json.dumps(data))


def _another_optuna(path: Path) -> None:
    """A storage whose schema revision this Optuna does not know, as a newer one leaves."""
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE alembic_version SET version_num = 'v9.9.9.z'")
        connection.execute("UPDATE version_info SET library_version = '9.9.9'")


def _renamed_study(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE studies SET study_name = 'other'")
