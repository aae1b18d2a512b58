"""Defaults a practitioner would pick, and the window saying what a setting will cost
(issue 21, item 7)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.run_folder import CHECKPOINT_DIR, CHECKPOINT_INDEX_FILE, write_status
from distloop.engine.run_history import summarize
from distloop.gui.shell.main_window import MainWindow
from support.gui_fakes import FakeEngine, seed_run


def test_a_folder_source_is_shuffled_and_unshuffled_folder_data_is_pointed_out(
    window: MainWindow, tmp_path: Path
) -> None:
    form = window.editor.data_form
    shuffle = form.batching.editors["shuffle_buffer"]
    assert shuffle.value() == 0  # the seed's constant data: the guide's numbers
    form.source.set_value("image_folder")
    assert shuffle.value() == 10_000

    project = {
        "schema_version": 1,
        "name": "pics",
        "model": {"input_shape": [8, 8, 1], "layers": [{"kind": "dense", "units": 2}]},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": {"source": "image_folder", "path": "pics", "global_batch_size": 2},
        "training": {"steps": 2},
    }
    (tmp_path / "p.json").write_text(json.dumps(project))
    assert window.open_project(tmp_path / "p.json")
    assert window.editor.data()["data"]["shuffle_buffer"] == 0  # the file's value is kept
    assert any(
        note.startswith("data.shuffle_buffer is 0: the folder's files are read class by class")
        for note in window.validation.notes
    )
    shuffle.set_value(512)
    assert not any("shuffle_buffer" in note for note in window.validation.notes)


def test_a_long_run_without_periodic_checkpoints_is_pointed_out(window: MainWindow) -> None:
    assert window.validation.notes == []  # the seed's 100 steps
    training = window.editor.training
    training.steps_radio.setChecked(True)
    training.steps.set_value(50_000)
    (advice,) = window.validation.notes
    assert advice.startswith("training.checkpoint_every is off: a run that is interrupted")
    training.rest.editors["checkpoint_every"].set_value(1000)
    assert window.validation.notes == []


def test_a_new_kind_of_layer_starts_from_its_own_defaults(window: MainWindow) -> None:
    card = window.editor.model.cards[0]  # the seed's dense layer: linear, L2 1e-4
    assert window.editor.data()["model"]["layers"][0]["kernel_regularizer"] == {
        "l1": 0.0,
        "l2": 0.0001,
    }
    card.initializer.editors["kind"].set_value("zeros")
    card.kind.set_value("conv2d")
    layer = window.editor.data()["model"]["layers"][0]
    assert layer["activation"] == "relu"
    assert layer["kernel_regularizer"] is None
    assert layer["kernel_initializer"]["kind"] == "glorot_uniform"


def _stopped_run(tmp_path: Path, checkpoint: bool) -> Path:
    run_dir = tmp_path / "runs" / ("saved" if checkpoint else "unsaved")
    run_dir.mkdir(parents=True)
    (run_dir / "project.json").write_text(load_example("seed").to_json())
    write_status(run_dir, "failed", last_step=40)
    if checkpoint:
        (run_dir / CHECKPOINT_DIR).mkdir()
        (run_dir / CHECKPOINT_DIR / CHECKPOINT_INDEX_FILE).write_text(
            'model_checkpoint_path: "ckpt-40"\n'
        )
    return run_dir


def test_resuming_a_run_without_a_checkpoint_says_it_starts_over(
    qtbot,
    make_window: Callable[..., MainWindow],
    dialog_recorder: Any,
    tmp_path: Path,
) -> None:
    resumed: list[Path] = []

    def engines(_project: Project, folder: Path, *, resume: bool = False) -> FakeEngine:
        resumed.append(folder)
        return FakeEngine(seed_run(4, 2))

    window = make_window(engine_factory=engines)
    unsaved = _stopped_run(tmp_path, checkpoint=False)
    dialog_recorder.start_over = False
    window.resume_run(summarize(unsaved))
    assert dialog_recorder.shown == [("start_over", summarize(unsaved).name, "")]
    assert resumed == []  # the user said no

    dialog_recorder.start_over = True
    window.resume_run(summarize(unsaved))
    assert resumed == [unsaved]
    logged = "\n".join(window.log_panel.lines())
    assert f"resuming {summarize(unsaved).name} from step 1: it has no checkpoint" in logged
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)

    window.resume_run(summarize(_stopped_run(tmp_path, checkpoint=True)))
    assert [kind for kind, _, _ in dialog_recorder.shown] == ["start_over", "start_over"]
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
