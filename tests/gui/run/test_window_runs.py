"""Run, Stop, failures and closing, with a scripted engine behind the real window."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from distloop.engine.examples import load_example
from distloop.engine.messages import (
    EvalMetrics,
    Message,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
)
from distloop.engine.problems import Problem
from distloop.gui.run.run_controller import RunState
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtCore import Qt
from support.gui_fakes import FakeEngine, factory, seed_run


def test_run_fills_plot_status_and_log(qtbot, make_window, tmp_path: Path) -> None:
    made: list = []
    window: MainWindow = make_window(engine_factory=factory(FakeEngine(seed_run(20, 5)), made))
    assert window.run_action.isEnabled()
    window.run_action.trigger()
    assert not window.run_action.isEnabled() and window.stop_action.isEnabled()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    window.plot.redraw()
    assert np.array_equal(window.plot.steps(), np.arange(1, 21))
    assert np.array_equal(window.plot.losses(), [1.0 / n for n in range(1, 21)])
    values = window.status_panel.values
    assert values["step"].text() == "20 / 20"
    assert values["strategy"].text() == "mirrored"
    assert values["tensorflow"].text() == "2.99.0-fake"
    assert window.status_panel.progress.value() == window.status_panel.progress.maximum()
    assert window.status_panel.state.full_text().startswith("Finished at step 20")
    assert any("run finished at step 20" in line for line in window.log_panel.lines())
    assert "2.99.0-fake" in window.about_text()
    ((project, run_dir),) = made
    assert project == load_example("seed") and run_dir.parent == tmp_path / "runs"
    assert window.run_action.isEnabled() and not window.stop_action.isEnabled()


def test_failure_is_shown_and_the_window_stays_usable(qtbot, make_window, dialog_recorder) -> None:
    failure = RunFailed(
        error_type="InvalidArgumentError", message="shapes differ", traceback="Traceback: here"
    )
    engine = FakeEngine([*seed_run(20, 5)[:3], [failure]])
    window: MainWindow = make_window(engine_factory=factory(engine))
    window.run()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    assert dialog_recorder.kinds() == ["error"]
    _, _, text = dialog_recorder.shown[0]
    assert "InvalidArgumentError: shapes differ" in text and "Traceback: here" in text
    assert any("Traceback: here" in line for line in window.log_panel.lines())
    assert "Failed" in window.status_panel.state.full_text()
    assert window.run_action.isEnabled()
    window.editor.data_form.batching.editors["global_batch_size"].set_value(20)
    assert window.validation.valid


def test_a_known_failure_stays_in_the_status_without_a_traceback(
    qtbot, make_window, dialog_recorder
) -> None:
    """Bad data names the file and what to do; that line stays in view after the dialog,
    and its traceback (engine.log has it) is nowhere in the window."""
    failure = RunFailed(
        error_type="DataError",
        message="data.path: /data/cats/<1>.png is empty; replace or remove it",
        traceback="Traceback: here",
        known=True,
    )
    engines = iter([FakeEngine([*seed_run(20, 5)[:1], [failure]]), FakeEngine(seed_run(20, 5))])
    window: MainWindow = make_window(engine_factory=lambda *_, **__: next(engines))
    window.run()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    _, _, text = dialog_recorder.shown[0]
    assert "Traceback" not in text
    assert not any("Traceback" in line for line in window.log_panel.lines())
    state = window.status_panel.state
    # plain text, never markup: the path's "<1>" is shown as it is
    assert "data.path: /data/cats/<1>.png is empty; replace or remove it" in state.full_text()
    assert state.textFormat() == Qt.TextFormat.PlainText
    (problem,) = window.problems_panel.problems()  # first in the list, it leads to the field
    assert problem == Problem(("data", "path"), "/data/cats/<1>.png is empty; replace or remove it")
    window.problems_panel.problem_activated.emit(problem)
    assert window.editor.currentIndex() == window.editor.tab_of(problem)
    assert window.run_action.isEnabled()  # the file may be fixed outside the window
    window.run()  # the next run clears it
    assert window.problems_panel.problems() == []
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)


def test_stop_button_stops_the_run(qtbot, make_window) -> None:
    engine = FakeEngine(seed_run()[:2], endless=True)
    window: MainWindow = make_window(engine_factory=factory(engine))
    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 3, timeout=5000)
    window.stop_action.trigger()
    assert window.controller.state is RunState.STOPPING
    assert not window.stop_action.isEnabled()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=5000)
    assert window.status_panel.state.full_text().startswith("Stopped at step")


def test_an_engine_killed_after_stop_is_stopped_killed_on_request(
    qtbot, make_window, dialog_recorder
) -> None:
    engine = FakeEngine(seed_run()[:2], endless=True, stubborn=True)
    window: MainWindow = make_window(engine_factory=factory(engine))
    window.controller._kill_after_s = 0.2  # the window's 5 s, shortened (its next run's session)
    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 3, timeout=5000)
    window.stop_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=5000)
    assert engine.killed and dialog_recorder.shown == []
    said = "run stopped (killed on request) at step"
    assert any(said in line for line in window.log_panel.lines())
    assert window.status_panel.state.full_text().startswith("Stopped at step")


def test_closing_during_a_run_asks_then_stops_then_closes(
    qtbot, make_window, dialog_recorder
) -> None:
    engine = FakeEngine(seed_run()[:2], endless=True)
    window: MainWindow = make_window(engine_factory=factory(engine))
    window.show()
    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 2, timeout=5000)
    dialog_recorder.confirm_stop = False
    assert not window.close()
    assert window.controller.active and not engine.stop_requested
    dialog_recorder.confirm_stop = True
    window.close()
    assert engine.stop_requested
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
    assert not window.controller.active and engine.closed
    assert dialog_recorder.kinds() == ["confirm_stop", "confirm_stop"]


def test_ctrl_c_stops_the_run_without_asking_and_a_second_one_kills_it(
    qtbot, make_window, dialog_recorder
) -> None:
    engine = FakeEngine(seed_run()[:2], endless=True, stubborn=True)
    window: MainWindow = make_window(engine_factory=factory(engine))
    window.show()
    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 2, timeout=5000)
    window.interrupt()
    assert engine.stop_requested and not engine.killed and window.isVisible()
    assert dialog_recorder.kinds() == []  # the interrupt was the user's word on the run
    window.interrupt()  # a stop that does not come: the second one kills
    assert engine.killed
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
    assert not window.controller.active and engine.closed


def test_opening_another_project_takes_the_last_runs_plot_and_numbers_away(
    qtbot, make_window
) -> None:
    window: MainWindow = make_window(engine_factory=factory(FakeEngine(seed_run(20, 5))))
    window.run()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    assert len(window.plot.steps()) == 20 and window.status_panel.values["step"].text() != "—"
    window.open_example("classification")  # another project: the seed's run is not its own
    assert len(window.plot.steps()) == 0 and window.plot.caption() == ""
    panel = window.status_panel
    assert panel.state.full_text() == "Idle" and panel.values["step"].text() == "—"
    assert panel.values["run_dir"].full_text() == "—" and panel.progress.value() == 0


def test_run_is_refused_while_invalid(make_window) -> None:
    made: list = []
    window: MainWindow = make_window(engine_factory=factory(FakeEngine(seed_run()), made))
    window.editor.data_form.pages["constant"].editors["labels"].setText("1, 2")
    assert not window.run_action.isEnabled()
    assert window.run_action.toolTip() == "Cannot run: 1 problem"
    window.run()
    assert made == [] and not window.controller.active


def test_named_losses_and_evaluations_reach_plot_status_and_log(qtbot, make_window) -> None:
    batches = [
        *seed_run(4, 4)[:2],
        [
            StepMetrics(
                steps=[1, 2],
                losses=[2.0, 1.5],
                elapsed_s=[0.1, 0.2],
                named_losses={"generator": [1.2, 0.9], "discriminator": [0.8, 0.6]},
            )
        ],
        [EvalMetrics(step=2, metrics={"val_loss": 1.25, "val_mae": 0.5}, examples=64)],
        [RunFinished(status="finished", last_step=2, final_loss=1.5, elapsed_s=0.3)],
    ]
    window: MainWindow = make_window(engine_factory=factory(FakeEngine(batches)))
    window.run()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    assert np.array_equal(window.plot.named_losses()["discriminator"], [0.8, 0.6])
    assert np.array_equal(window.plot.evaluations()[1], [1.25])
    assert (
        window.status_panel.values["validation"].full_text()
        == "val_loss 1.25, val_mae 0.5 (step 2)"
    )
    assert any(
        "evaluation after step 2 on 64 examples" in line for line in window.log_panel.lines()
    )


def long_run() -> list[list[Message]]:
    """999,999,999 steps at 100 steps/s for 10 s of training: an ETA of about 116 days."""
    started, *_ = seed_run()[1]
    assert isinstance(started, RunStarted)
    steps = list(range(1, 1001))
    return [
        [started.model_copy(update={"total_steps": 999_999_999})],
        [StepMetrics(steps=steps, losses=[0.5] * 1000, elapsed_s=[0.01 * n for n in steps])],
    ]


def test_a_run_of_over_a_day_is_asked_about_once(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch
) -> None:
    """999,999,999 steps started without a word (its ETA read "2964 h")."""
    from distloop.gui.common import dialogs, settings

    asked: list[tuple[str, int]] = []

    def confirm_long_run(_parent, eta: str, steps: int, _rate: float) -> tuple[bool, bool]:
        asked.append((eta, steps))
        return False, False  # Stop the Run, and don't ask again

    monkeypatch.setattr(dialogs, "confirm_long_run", confirm_long_run)
    engine = FakeEngine(long_run(), endless=True)
    window: MainWindow = make_window(engine_factory=factory(engine))
    window.run()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    assert engine.stop_requested
    [(eta, steps)] = asked
    assert steps == 999_999_999 and " h" in eta
    assert not settings.asks_about_long_runs()  # remembered

    again = FakeEngine(long_run(), endless=True)
    window.controller._engine_factory = factory(again)
    window.run()
    qtbot.waitUntil(lambda: window.plot.steps().size and window.plot.steps()[-1] > 1000)
    assert len(asked) == 1 and not again.stop_requested
    window.stop()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
