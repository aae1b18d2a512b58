"""Studies in the window: the Add Sweep dialog checks a study as the engine does, and the
engine's own Study runs it trial after trial through the window's Run path (scripted
engines here; test_study_end_to_end.py trains real ones)."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.messages import Message, RunFinished, RunStarted, StepMetrics
from distloop.engine.run_folder import METRICS_FILE, PROJECT_FILE, STATUS_FILE, read_status
from distloop.engine.run_model import RunModel
from distloop.engine.study.folders import StudyEntry
from distloop.engine.study.runner import StudyPlan, StudySettings, write_plan
from distloop.engine.study.space import parse_space, with_values
from distloop.gui.common import dialogs
from distloop.gui.shell.main_window import MainWindow
from distloop.gui.study import study_flow
from distloop.gui.study.study_dialog import StudyDialog, StudyRequest, field_paths, parse_values
from distloop.gui.study.study_flow import UNFINISHED_STUDY_KEY
from PySide6.QtCore import QSettings
from support.gui_fakes import FakeEngine

STEPS = 20


class TrialEngines:
    """One scripted engine per trial, each leaving the files an engine writes; the n-th
    trial to start trains at ``losses[n]`` (None: it trains until it is stopped)."""

    def __init__(self, losses: list[float | None]) -> None:
        self.losses = losses
        self.made: list[tuple[Project, Path, FakeEngine]] = []

    def __call__(self, project: Project, run_dir: Path, *, resume: bool = False) -> FakeEngine:
        loss = self.losses[len(self.made)]
        endless = loss is None
        value = 0.5 if loss is None else loss
        (run_dir / PROJECT_FILE).write_text(project.to_json(), encoding="utf-8")
        rows = "".join(f"{step},{value},{0.01 * step}\n" for step in range(1, STEPS + 1))
        (run_dir / METRICS_FILE).write_text("step,loss,elapsed_s\n" + rows, encoding="utf-8")
        ended = "stopped" if endless else "finished"  # as the engine leaves it
        (run_dir / STATUS_FILE).write_text(json.dumps({"status": ended}), encoding="utf-8")
        batches: list[list[Message]] = [
            [
                RunStarted(
                    strategy="MirroredStrategy",
                    strategy_kind="mirrored",
                    num_replicas=1,
                    devices=["/cpu:0"],
                    tensorflow_version="2.99.0-fake",
                    total_steps=STEPS,
                )
            ]
        ]
        for first in range(1, STEPS + 1, 5):
            steps = list(range(first, first + 5))
            batches.append(
                [StepMetrics(steps=steps, losses=[value] * 5, elapsed_s=[0.01 * s for s in steps])]
            )
        if endless:
            batches = batches[:2]
        else:
            batches.append(
                [RunFinished(status="finished", last_step=STEPS, final_loss=value, elapsed_s=0.2)]
            )
        engine = FakeEngine(batches, endless=endless)
        self.made.append((project, run_dir, engine))
        return engine


def _plan(base: Project, trials: int, pruner: str = "median") -> StudyPlan:
    project = with_values(base, {"training.steps": STEPS, "training.epochs": None}, base.name)
    space = parse_space('{"optimizer.learning_rate": {"low": 0.001, "high": 0.1}}', project)
    settings = StudySettings(
        trials=trials, sampler="random", pruner=pruner, objective="loss", seed=1
    )
    return StudyPlan(project, space, settings)


def _start(window: MainWindow, monkeypatch: pytest.MonkeyPatch, trials: int, **kwargs) -> None:
    """Add Sweep… with the dialog answered by a study of ``trials`` over the window's project."""
    asked: list[Project] = []

    def ask(_parent: object, base: Project) -> StudyRequest:
        asked.append(base)
        return StudyRequest(_plan(base, trials, **kwargs), None)

    monkeypatch.setattr(study_flow, "ask_study", ask)
    window.add_sweep_action.trigger()
    assert asked and asked[0].name == window.validation.project.name


def _wait_listed(qtbot, window: MainWindow, *states: str) -> None:
    """Until the Studies tab's listing (made in its own thread) has studies in ``states``."""
    panel = window.studies_panel
    qtbot.waitUntil(
        lambda: not panel.listing and [e.state for e in panel.entries] == list(states),
        timeout=20_000,
    )


def _trials(folder: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name="distloop", storage=f"sqlite:///{folder}/study.db").trials


def test_a_study_runs_its_trials_in_the_window_and_marks_the_pruned_one(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch, dialog_recorder
) -> None:
    engines = TrialEngines([1.0, 2.0, 5.0, 0.5])
    window: MainWindow = make_window(engine_factory=engines)
    followed: list[RunModel] = []
    window.starter.following.connect(lambda model, _caption: followed.append(model))
    ended: list[str] = []
    window.study_session.ended.connect(ended.append)
    _start(window, monkeypatch, trials=4)
    assert window.study_session.running and window.studies_dock.isVisibleTo(window)
    assert not window.run_action.isEnabled() and window.stop_action.isEnabled()
    qtbot.waitUntil(lambda: ended == ["complete"], timeout=20_000)
    _wait_listed(qtbot, window, "complete")

    (folder,) = [entry.folder for entry in window.studies_panel.entries]
    trials = _trials(folder)
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE", "PRUNED", "COMPLETE"]
    assert [run_dir for _, run_dir, _ in engines.made] == [
        folder / "trials" / f"trial-{n:04d}" for n in range(4)
    ]
    pruned_dir = folder / "trials" / "trial-0002"
    status = read_status(pruned_dir)
    assert status["status"] == "pruned" and status["pruned_at"] == 2
    assert status["pruned_reason"].startswith("pruned at step 2 by the median pruner: loss 5 was")
    # Each trial was a run of the window: the plot followed it, and the pruned one says so.
    assert [model.run_dir for model in followed] == [run_dir for _, run_dir, _ in engines.made]
    assert followed[2].status == "pruned" and followed[2].pruned == (2, status["pruned_reason"])
    assert [m.status for m in followed if m is not followed[2]] == ["finished"] * 3
    runs = {run.path: run for run in window.runs_panel.runs()}
    assert runs[pruned_dir].status == "pruned"
    assert [runs[d].status for _, d, _ in engines.made].count("finished") == 3
    window.runs_panel.select_paths([pruned_dir])
    window.runs_panel.show_selected()
    qtbot.waitUntil(lambda: window.plot.pruned_mark is not None, timeout=60_000)
    assert window.plot.pruned_mark is not None and window.plot.pruned_mark.value() == 2
    mark = window.plot.pruned_mark
    assert mark.label.toPlainText() == "pruned at step 2\nby the median pruner"
    assert mark.toolTip() == status["pruned_reason"]
    assert status["pruned_reason"].partition(": ")[2] in window.plot.caption()
    assert "trial 2 pruned at step 2" in window.log_panel.text.toPlainText()
    (entry,) = window.studies_panel.entries
    assert (entry.state, entry.ended, entry.pruned) == ("complete", 4, 1)
    assert window.studies_panel.table.item(0, 2).text() == "4 of 4"
    assert window.run_action.isEnabled() and not window.study_session.running
    assert QSettings().value(UNFINISHED_STUDY_KEY) is None
    assert dialog_recorder.kinds() == []


def test_stop_leaves_the_study_resumable_and_a_reopened_window_continues_it(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch, dialog_recorder
) -> None:
    engines = TrialEngines([1.0, None, None, 2.0, 3.0])
    window: MainWindow = make_window(engine_factory=engines)
    _start(window, monkeypatch, trials=3, pruner="none")
    qtbot.waitUntil(lambda: len(engines.made) == 2 and window.controller.active, timeout=10_000)
    window.stop_action.trigger()  # Stop stops the trial and the study with it
    qtbot.waitUntil(lambda: not window.study_session.running, timeout=10_000)
    _wait_listed(qtbot, window, "stopped")
    (entry,) = window.studies_panel.entries
    assert (entry.state, entry.ended, entry.interrupted, entry.waiting) == ("stopped", 1, 1, 1)
    assert engines.made[1][2].stop_requested and not window.controller.active
    assert QSettings().value(UNFINISHED_STUDY_KEY) is None  # the user's own Stop: no prompt

    window.studies_panel.select(entry.folder)
    assert window.studies_panel.continue_action.isEnabled()
    window.studies_panel.continue_action.trigger()
    qtbot.waitUntil(lambda: len(engines.made) == 3 and window.controller.active, timeout=10_000)
    trials = _trials(entry.folder)
    assert trials[2].params == trials[1].params  # the stopped trial's values run again
    asked: list[str] = []

    def confirm_stop_study(_parent: object) -> bool:
        asked.append("study")
        return True

    monkeypatch.setattr(dialogs, "confirm_stop_study", confirm_stop_study)
    window.show()
    window.close()  # mid-trial: asked, stopped, then closed
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=10_000)
    assert not window.study_session.running and not window.controller.active
    assert asked == ["study"] and dialog_recorder.kinds() == []  # the study's own question
    assert QSettings().value(UNFINISHED_STUDY_KEY) == str(entry.folder)

    offered: list[StudyEntry] = []

    def confirm(_parent: object, shown: StudyEntry) -> bool:
        offered.append(shown)
        return True

    monkeypatch.setattr(dialogs, "confirm_continue_study", confirm)
    reopened: MainWindow = make_window(engine_factory=engines)
    ended: list[str] = []
    reopened.study_session.ended.connect(ended.append)
    reopened.show()
    qtbot.waitUntil(lambda: ended == ["complete"], timeout=20_000)
    assert [(o.folder, o.ended, o.planned, o.waiting) for o in offered] == [(entry.folder, 1, 3, 1)]
    states = [t.state.name for t in _trials(entry.folder)]
    assert states == ["COMPLETE", "FAIL", "FAIL", "COMPLETE", "COMPLETE"]
    assert _trials(entry.folder)[3].params == trials[1].params
    assert QSettings().value(UNFINISHED_STUDY_KEY) is None


def test_the_dialog_checks_each_field_and_the_study_in_one_line(qtbot, tmp_path: Path) -> None:
    base = with_values(load_example("seed"), {}, "seed")
    dialog = StudyDialog(base)
    qtbot.addWidget(dialog)
    (row,) = dialog.rows
    assert row.field_path() == "optimizer.learning_rate" and row.kind.currentData() == "log"
    assert dialog.ok.isEnabled() and dialog.problem.text().startswith("Ready: 20 trials over 1")
    request = dialog.request()
    assert request is not None and request.folder is None and not request.resume
    assert request.plan.space.to_json()["optimizer.learning_rate"]["log"] is True
    assert {"optimizer.learning_rate", "optimizer.kind", "training.epochs"} <= set(
        field_paths(base)
    )

    row.low.setText("0.1")
    row.high.setText("0.1")  # an empty range
    assert not dialog.ok.isEnabled() and dialog.request() is None
    assert row.problem.text() == (
        "optimizer.learning_rate: the range [0.1, 0.1] is empty: low must be below high"
    )
    assert dialog.problem.text() == "Fix the fields marked above first."
    row.high.setText("1")
    assert not row.problem.isVisible() and dialog.ok.isEnabled()

    kind = dialog.add_row()
    kind.path.setCurrentText("optimizer.kind")  # a word: searched by choices
    assert kind.kind.currentData() == "choices" and 'now "sgd"' in kind.values.placeholderText()
    kind.values.setText("adam")
    assert (
        kind.problem.text()
        == "optimizer.kind: choices has one value: set it in the project instead"
    )
    kind.values.setText("adam, nadam")
    assert kind.problem.text().startswith("optimizer.kind: 'nadam': optimizer: Input tag 'nadam'")
    kind.values.setText("adam, sgd")
    typo = dialog.add_row()
    typo.path.setCurrentText("optimizer.lr")
    assert typo.problem.text() == "optimizer.lr: optimizer has no field 'lr'"
    typo.remove.click()
    qtbot.waitUntil(lambda: len(dialog.rows) == 2)
    assert dialog.ok.isEnabled()

    dialog.sampler.setCurrentIndex(dialog.sampler.findData("grid"))
    assert (
        dialog.problem.text() == "sampler: grid needs every field as values or choices, not ranges"
    )
    row.kind.setCurrentIndex(row.kind.findData("values"))
    row.values.setText("0.1, 0.01")
    kind.kind.setCurrentIndex(kind.kind.findData("values"))
    assert dialog.ok.isEnabled() and "Ready: 4 trials over 2 fields (4 combinations)" in (
        dialog.problem.text()
    )
    dialog.pruner.setCurrentIndex(dialog.pruner.findData("hyperband"))
    assert dialog.problem.text() == (
        "pruner: hyperband draws its own brackets: use median, asha or none"
    )
    assert not dialog.ok.isEnabled()
    dialog.pruner.setCurrentIndex(dialog.pruner.findData("median"))
    dialog.objective.setCurrentIndex(dialog.objective.findData("val_loss"))
    assert dialog.problem.text().startswith("objective: val_loss needs evaluation")

    # The study folder: another project's study is refused, this project's is continued.
    dialog.objective.setCurrentIndex(dialog.objective.findData("loss"))
    other = tmp_path / "other"
    write_plan(other, _plan(with_values(base, {}, "another project"), 3))
    dialog.folder.setText(str(other))
    assert dialog.problem.text() == (
        f"{other} holds a study of another project (another project): choose an empty "
        "folder, or continue it from the Studies tab"
    )
    assert not dialog.ok.isEnabled() and not dialog.sampler.isEnabled()
    same = tmp_path / "same"
    plan = StudyPlan(base, parse_space('{"optimizer.kind": {"choices": ["adam", "sgd"]}}', base),
                     StudySettings(trials=3, objective="loss"))  # fmt: skip
    write_plan(same, plan)
    dialog.folder.setText(str(same))
    assert dialog.ok.isEnabled() and dialog.ok.text() == "Continue Study"
    assert dialog.request() == StudyRequest(dialog.request().plan, same, resume=True)
    assert dialog.request().plan.space == plan.space
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    dialog.folder.setText(str(tmp_path / "full"))
    assert dialog.problem.text().endswith("is not empty and holds no study: choose an empty folder")
    dialog.folder.setText(str(tmp_path / "new"))
    assert dialog.ok.isEnabled() and dialog.request().folder == tmp_path / "new"
    assert (tmp_path / "full" / "notes.txt").read_text() == "mine"


def test_values_are_typed_as_the_space_file_would_have_them() -> None:
    assert parse_values('16, 32,0.5, adam, true, null, "x y"') == [
        16, 32, 0.5, "adam", True, None, "x y",
    ]  # fmt: skip
