"""The scaling rule in the forms: the batch's split is said, the linear-scaling offer
appears when the replicas change, and nothing changes until it is taken."""

from __future__ import annotations

from distloop.engine.examples import load_example
from distloop.gui.project.project_editor import ProjectEditor


def test_changed_replicas_offer_linear_scaling_and_apply_it_only_when_asked(qtbot) -> None:
    editor = ProjectEditor()
    qtbot.addWidget(editor)
    editor.set_project(load_example("digits"))  # adam at 0.01, global batch 64, 2 replicas
    note = editor.scaling
    assert note.text.text().startswith(
        "The global batch of 64 is split over 2 replica(s): 32 examples each"
    )
    assert note.apply.isHidden()

    editor.strategy.fields.editors["cpu_replicas"].set_value(4)
    assert not note.apply.isHidden()
    assert "Replicas changed from 2 to 4" in note.text.text()
    assert "scales the rate by 2x, 0.01 to 0.02, which needs a warm-up" in note.text.text()
    assert note.apply.text() == "Use global batch 128 and rate 0.02"
    # Offered, never applied silently.
    assert editor.data()["data"]["global_batch_size"] == 64
    assert editor.data()["optimizer"]["learning_rate"] == 0.01

    note.apply.click()
    assert editor.data()["data"]["global_batch_size"] == 128
    assert editor.data()["optimizer"]["learning_rate"] == 0.02
    assert note.apply.isHidden()
    assert note.text.text().startswith("The global batch of 128 is split over 4 replica(s): 32")
