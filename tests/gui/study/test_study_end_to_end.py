"""A study in the window with real engines: trials train, one is pruned through the normal
stop path, the window is closed mid-trial and a reopened one continues the study; the
SQLite study, read by Optuna itself, agrees with the trial folders."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from distloop.engine.config import Project
from distloop.engine.run_folder import read_metrics, read_status
from distloop.engine.study.folders import StudyEntry
from distloop.gui.common import dialogs
from distloop.gui.shell.main_window import MainWindow
from distloop.gui.study import study_flow
from distloop.gui.study.study_dialog import StudyDialog, StudyRequest
from support.distloop_testing import synthetic_project

pytestmark = pytest.mark.slow
STEPS = 1000
"""The third trial is judged at its first rung (step 250) and must get the stop before it
ends: with 400 steps and the rung at step 100, a busy machine's window heard of the rung
after the engine had run the last steps, and the trial ended complete (as it should when
it trained in full), failing this test."""
WARMUP = STEPS // 4
RATES = "0.5, 0.2, 0.000001, 0.3"
"""A grid the sampler's seed 5 visits in this order: the third (which hardly learns) is
pruned once two trials completed, the fourth runs when the window closes."""


@pytest.mark.timeout(900)  # beyond its waits: one that runs out fails with its own line
def test_a_study_in_the_window_prunes_a_trial_and_a_reopened_window_continues_it(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dialog_recorder
) -> None:
    data = synthetic_project(1, steps=STEPS)
    data["name"] = "window study"
    path = tmp_path / "project.json"
    path.write_text(json.dumps(data))
    window: MainWindow = make_window()
    assert window.open_project(path)

    def ask(_parent: object, base: Project) -> StudyRequest | None:
        """The real dialog, filled in as a user would."""
        dialog = StudyDialog(base)
        qtbot.addWidget(dialog)
        (row,) = dialog.rows
        row.kind.setCurrentIndex(row.kind.findData("values"))
        row.values.setText(RATES)
        dialog.sampler.setCurrentIndex(dialog.sampler.findData("grid"))
        dialog.pruner.setCurrentIndex(dialog.pruner.findData("median"))
        dialog.seed.setValue(5)
        dialog.warmup.setValue(WARMUP)  # judged once the good rates have learned
        assert dialog.problem.text().startswith("Ready: 4 trials over 1 field (4 combinations)")
        return dialog.request()

    monkeypatch.setattr(study_flow, "ask_study", ask)
    window.add_sweep_action.trigger()
    assert window.study_session.running
    folder = window.study_session.folder
    assert folder is not None and folder.parent == window.runs_panel.runs_root
    fourth = folder / "trials" / "trial-0003" / "metrics.csv"
    qtbot.waitUntil(fourth.exists, timeout=300_000)
    monkeypatch.setattr(dialogs, "confirm_stop_study", lambda _parent: True)
    window.show()
    window.close()  # mid-trial: the trial stops with a checkpoint, the study stays resumable
    qtbot.waitUntil(lambda: not window.study_session.running, timeout=60_000)
    assert not window.isVisible() and dialog_recorder.kinds() == []

    offered: list[StudyEntry] = []

    def confirm(_parent: object, entry: StudyEntry) -> bool:
        offered.append(entry)
        return True

    monkeypatch.setattr(dialogs, "confirm_continue_study", confirm)
    reopened: MainWindow = make_window()
    ended: list[str] = []
    reopened.study_session.ended.connect(ended.append)
    reopened.show()
    qtbot.waitUntil(lambda: ended == ["complete"], timeout=300_000)
    assert [(e.folder, e.ended, e.planned, e.waiting) for e in offered] == [(folder, 3, 4, 1)]

    trials = optuna.load_study(study_name="distloop", storage=f"sqlite:///{folder}/study.db").trials
    states = [t.state.name for t in trials]
    assert states == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL", "COMPLETE"], states
    assert trials[3].user_attrs["interrupted"] and trials[4].params == trials[3].params
    for trial in trials:
        run_dir = Path(trial.user_attrs["run_dir"])
        assert run_dir == folder / "trials" / f"trial-{trial.number:04d}"
        status = read_status(run_dir)
        project = json.loads((run_dir / "project.json").read_text())
        assert project["optimizer"]["learning_rate"] == trial.params["optimizer.learning_rate"]
        assert status["study_trial"] == trial.number and status["study"] == str(folder)
        steps = read_metrics(run_dir)["step"]
        if trial.state.name == "PRUNED":
            assert status["status"] == "pruned" and (run_dir / "model.keras").is_file()
            assert status["pruned_reason"].startswith(f"pruned at step {status['pruned_at']} ")
            assert status["pruned_at"] >= WARMUP and len(steps) < STEPS
        elif trial.state.name == "COMPLETE":
            assert status["status"] == "finished" and len(steps) == STEPS
        else:  # stopped with the window: a checkpoint, and its values ran again
            assert status["status"] == "stopped" and len(steps) < STEPS
    assert trials[2].params["optimizer.learning_rate"] == 1e-6
    runs = {run.path: run.status for run in reopened.runs_panel.runs()}
    assert runs[folder / "trials" / "trial-0002"] == "pruned"
    listed = reopened.studies_panel
    qtbot.waitUntil(
        lambda: not listed.listing and [e.state for e in listed.entries] == ["complete"],
        timeout=30_000,
    )
    assert dialog_recorder.kinds() == []
