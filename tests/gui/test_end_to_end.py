"""The real thing: Run and Stop in the window with a real engine process (TensorFlow)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.examples import load_example
from distloop.engine.run_events import Logged, StepsAdded
from distloop.engine.run_folder import (
    CHECKPOINT_DIR,
    MODEL_FILE,
    read_eval,
    read_metrics,
    read_status,
)
from distloop.gui.run.run_controller import RunController
from distloop.gui.shell.main_window import MainWindow
from support.data_folders import image_project, write_linked_folder
from support.gui_fakes import told_steps

pytestmark = pytest.mark.slow
RUN_TIMEOUT_MS = 180_000  # TensorFlow's import alone takes 8-10 s on a quiet machine


def _reported(window: MainWindow) -> list[StepsAdded]:
    return told_steps(window.controller)


def test_seed_run_plots_exactly_what_the_engine_reported(
    qtbot, window: MainWindow, dialog_recorder
) -> None:
    reported = _reported(window)
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=RUN_TIMEOUT_MS)
    assert dialog_recorder.shown == [], dialog_recorder.shown

    run_dir = window.last_run_dir
    assert run_dir is not None and read_status(run_dir)["status"] == "finished"
    metrics = read_metrics(run_dir)
    steps = [step for message in reported for step in message.steps]
    losses = [loss for message in reported for loss in message.losses]
    assert steps == list(range(1, 101))
    assert np.array_equal(window.plot.steps(), np.arange(1, 101))
    assert np.array_equal(window.plot.losses(), losses)  # exactly what the engine sent
    assert np.array_equal(
        window.plot.losses().astype(np.float32), np.asarray(metrics["loss"], dtype=np.float32)
    )
    assert window.status_panel.values["step"].text() == "100 / 100"
    assert window.status_panel.values["strategy"].text() == "mirrored"
    assert window.status_panel.values["tensorflow"].text()[0].isdigit()
    assert multiprocessing.active_children() == []


def test_stop_ends_a_long_run_cleanly(qtbot, window: MainWindow, dialog_recorder) -> None:
    window.editor.training.steps_radio.setChecked(True)
    window.editor.training.steps.setValue(1_000_000)
    assert window.validation.valid
    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 50, timeout=RUN_TIMEOUT_MS)
    window.stop_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=30_000)
    assert dialog_recorder.shown == [] and not window.controller.killed

    run_dir = window.last_run_dir
    assert run_dir is not None and read_status(run_dir)["status"] == "stopped"
    metrics = read_metrics(run_dir)
    last = int(metrics["step"][-1])
    assert 50 <= last < 1_000_000
    assert np.array_equal(window.plot.steps(), np.arange(1, last + 1))
    assert np.array_equal(
        window.plot.losses().astype(np.float32), np.asarray(metrics["loss"], dtype=np.float32)
    )
    assert window.status_panel.state.full_text().startswith(f"Stopped at step {last}")
    assert multiprocessing.active_children() == []


def test_evaluation_markers_match_the_run_folder(qtbot, window: MainWindow, dialog_recorder):
    window.open_example("regression")
    window.editor.evaluation.enabled.setChecked(True)
    window.editor.evaluation.every.set_value(40)
    assert window.validation.valid, window.validation.problems
    window.run()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=RUN_TIMEOUT_MS)
    assert dialog_recorder.shown == []
    assert window.last_run_dir is not None
    evaluations = read_eval(window.last_run_dir)
    steps, losses = window.plot.evaluations()
    assert list(steps) == evaluations["step"] == [40.0, 80.0]
    assert np.array_equal(losses.astype(np.float32), np.float32(evaluations["val_loss"]))
    assert window.status_panel.values["validation"].full_text().endswith("(step 80)")


def test_a_stop_that_saves_is_waited_for_not_killed(qtbot, qloop, tmp_path: Path) -> None:
    """Stop waits for the step under way (here an execution of 300 steps, seconds long) and
    the saves after it, then says what took the time. The window killed an engine that did
    not end within 5 s of Stop (0.3 s here) though it was finishing its step and saving:
    "the engine did not stop within 5 s; killing it"."""
    project = load_example("digits")
    training = project.training.model_copy(update={"steps": 1_000_000, "steps_per_execution": 300})
    project = project.model_copy(update={"training": training, "evaluation": None})
    controller = RunController(kill_after_s=0.3)
    logged: list[str] = []
    controller.changed.connect(
        lambda _model, event: logged.append(event.text) if isinstance(event, Logged) else None
    )
    run_dir = tmp_path / "run"
    controller.start(project, run_dir)
    model = controller.model
    assert model is not None
    # two executions reported: the run's pace (seconds an execution) is known
    qtbot.waitUntil(lambda: model.rate() is not None, timeout=RUN_TIMEOUT_MS)
    controller.stop()
    qtbot.waitUntil(lambda: not controller.active, timeout=RUN_TIMEOUT_MS)
    assert not controller.killed, logged
    assert not any("killing it" in text for text in logged), logged
    status = read_status(run_dir)
    assert status["status"] == "stopped" and not status.get("killed")
    last = status["last_step"]
    assert last % 300 == 0  # whole executions, then the stop
    assert (run_dir / MODEL_FILE).is_file() and any((run_dir / CHECKPOINT_DIR).iterdir())
    stopped = [text for text in logged if text.startswith(f"stopped after step {last:,}, ")]
    assert stopped and stopped[0].endswith("; saving the checkpoint and the model"), logged
    assert any(text.startswith("saving the checkpoint and the model took ") for text in logged)
    assert multiprocessing.active_children() == []


def test_the_status_panel_says_each_phase_of_a_run_on_a_big_folder(
    qtbot, window: MainWindow, dialog_recorder, tmp_path
) -> None:
    """From Run to Finished the headline says what the engine does: 38 s of "TensorFlow
    loads" while it checked 100,000 images, then "Running" at step - while it traced and
    saved, looked hung. The check's progress is counted in the bar."""
    files = 20_000
    folder = write_linked_folder(tmp_path / "images", files // 4)
    project = image_project(folder, training={"steps": 6, "seed": 1, "checkpoint_every": 3})
    project["model"]["layers"][-1]["units"] = 4
    path = tmp_path / "big.json"
    path.write_text(json.dumps(project), encoding="utf-8")
    assert window.open_project(path)
    qtbot.waitUntil(lambda: window.validation.valid, timeout=RUN_TIMEOUT_MS)
    headlines: list[str] = []
    counted: list[str] = []

    def seen(*_: object) -> None:  # after the status panel took the change (connected first)
        text = window.status_panel.state.full_text()
        if not headlines or headlines[-1] != text:
            headlines.append(text)
        if window.status_panel.progress.format().endswith(f" of {files:,}"):
            counted.append(window.status_panel.progress.format())

    window.controller.changed.connect(seen)
    window.run()
    assert window.status_panel.state.full_text() == "Starting…"
    qtbot.waitUntil(lambda: not window.controller.active, timeout=RUN_TIMEOUT_MS)
    assert dialog_recorder.shown == [], dialog_recorder.shown
    expected = [
        "Building the model…",
        "Preparing the data…",
        "Listing data.path's images…",
        f"Checking {files:,} images…",
        f"Decoding {files:,} images once…",
        "Building the input pipeline…",
        "Tracing the step…",
        "First step…",
        "Running",
        "Writing the checkpoint of step 3…",
        "Running",
        "Writing the checkpoint of step 6…",
        "Saving the model…",
    ]
    shown = [text for text in headlines if text in expected]
    assert shown == expected, "\n".join(headlines)
    assert headlines[-1].startswith("Finished at step 6")
    assert counted, "the check's progress was never counted in the bar"
