"""Stop a real run through the window, Resume it, and get one clean trace (TensorFlow)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.examples import load_example
from distloop.engine.run_folder import read_metrics, read_status
from distloop.gui.shell.main_window import MainWindow

pytestmark = pytest.mark.slow
RUN_TIMEOUT_MS = 180_000  # TensorFlow's import alone takes 8-10 s on a quiet machine
STEPS = 3000


def test_stop_then_resume_plots_every_step_once(
    qtbot, window: MainWindow, dialog_recorder, tmp_path: Path
) -> None:
    seed = load_example("seed")
    training = seed.training.model_copy(
        update={"epochs": None, "steps": STEPS, "checkpoint_every": 50}
    )
    project = seed.model_copy(update={"training": training})
    path = tmp_path / "long.json"
    path.write_text(project.to_json(), encoding="utf-8")
    assert window.open_project(path) and window.validation.valid

    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 200, timeout=RUN_TIMEOUT_MS)
    window.stop_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=30_000)
    run_dir = window.last_run_dir
    assert run_dir is not None and read_status(run_dir)["status"] == "stopped"
    stopped_at = int(read_metrics(run_dir)["step"][-1])
    assert 200 <= stopped_at < STEPS
    assert [run.path for run in window.runs_panel.selected_runs()] == [run_dir]
    assert window.resume_action.isEnabled()

    window.resume_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=RUN_TIMEOUT_MS)
    assert dialog_recorder.shown == [], dialog_recorder.shown
    assert read_status(run_dir)["status"] == "finished"
    assert any("resuming after step" in line for line in window.log_panel.lines())
    metrics = read_metrics(run_dir)
    assert metrics["step"] == list(range(1, STEPS + 1))
    assert np.array_equal(window.plot.steps(), np.arange(1, STEPS + 1))  # each step once
    assert np.array_equal(
        window.plot.losses().astype(np.float32), np.asarray(metrics["loss"], dtype=np.float32)
    )
    assert window.status_panel.values["step"].text() == f"{STEPS:,} / {STEPS:,}"
    assert not window.resume_action.isEnabled()  # finished: nothing left to resume
    assert multiprocessing.active_children() == []
