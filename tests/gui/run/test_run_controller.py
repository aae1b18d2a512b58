"""The run session logic with a scripted engine: signals, stop, kill, failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from distloop.engine.examples import load_example
from distloop.engine.messages import RunFailed
from distloop.engine.run_events import (
    Logged,
    RunEvent,
    RunFailure,
    RunOutcome,
    Started,
    StatusChanged,
    StepsAdded,
)
from distloop.engine.run_model import RunModel, outcome_of
from distloop.gui.run.run_controller import RunController, RunState
from support.gui_fakes import FakeEngine, factory, seed_run


class Recorder:
    """The controller's lifecycle signals and its run model's events, named by kind."""

    def __init__(self, controller: RunController) -> None:
        self.events: list[tuple[str, object]] = []
        controller.state_changed.connect(lambda state: self.events.append(("state_changed", state)))
        controller.changed.connect(self._told)
        controller.idle.connect(lambda: self.events.append(("idle", None)))

    def _told(self, _model: RunModel, event: RunEvent) -> None:
        match event:
            case Logged() as line:
                self.events.append(("log", line))
            case Started() as started:
                self.events.append(("started", started))
            case StepsAdded() as steps:
                self.events.append(("metrics", steps))
            case StatusChanged(outcome=RunOutcome(failure=None) as finished):
                self.events.append(("finished", finished))
            case StatusChanged(outcome=RunOutcome(failure=RunFailure() as failed)):
                self.events.append(("failed", failed))

    def names(self) -> list[str]:
        return [name for name, _ in self.events if name != "state_changed"]

    def of(self, name: str) -> list[object]:
        return [value for n, value in self.events if n == name]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "run"


def _run(qtbot, controller: RunController, run_dir: Path) -> None:
    controller.start(load_example("seed"), run_dir)
    qtbot.waitUntil(lambda: not controller.active, timeout=10_000)


def test_a_run_reports_every_message_in_order(qtbot, qloop, run_dir: Path) -> None:
    engine = FakeEngine(seed_run(steps=20, batch=5))
    made: list = []
    controller = RunController(factory(engine, made))
    events = Recorder(controller)
    _run(qtbot, controller, run_dir)
    assert events.names() == ["log", "started"] + ["metrics"] * 4 + ["finished", "idle"]
    steps = [s for m in events.of("metrics") for s in m.steps]  # type: ignore[attr-defined]
    assert steps == list(range(1, 21))
    assert events.of("state_changed") == [RunState.STARTING, RunState.RUNNING, RunState.IDLE]
    assert made == [(load_example("seed"), run_dir)]
    assert engine.started and engine.closed and controller.engine is None


def test_stop_asks_and_the_engine_stops(qtbot, qloop, run_dir: Path) -> None:
    engine = FakeEngine(seed_run()[:3], endless=True)
    controller = RunController(factory(engine), kill_after_s=5)
    events = Recorder(controller)
    controller.start(load_example("seed"), run_dir)
    qtbot.waitUntil(lambda: len(events.of("metrics")) >= 3, timeout=5000)
    controller.stop()
    assert controller.state is RunState.STOPPING
    qtbot.waitUntil(lambda: not controller.active, timeout=5000)
    finished = events.of("finished")
    assert len(finished) == 1 and isinstance(finished[0], RunOutcome)
    assert finished[0].status == "stopped"
    assert engine.stop_requested and not engine.killed and not controller.killed


def test_an_engine_that_ignores_stop_is_killed(qtbot, qloop, run_dir: Path) -> None:
    engine = FakeEngine([], endless=True, stubborn=True)
    controller = RunController(factory(engine), kill_after_s=0.3)
    events = Recorder(controller)
    controller.start(load_example("seed"), run_dir)
    qtbot.waitUntil(lambda: len(events.of("metrics")) >= 2, timeout=5000)
    controller.stop()
    qtbot.waitUntil(lambda: not controller.active, timeout=5000)
    assert engine.killed and controller.killed and controller.stop_requested
    (finished,) = events.of("finished")
    assert isinstance(finished, RunOutcome) and finished.status == "stopped" and finished.killed
    assert events.of("failed") == []
    assert any(
        "did not finish its step within 0.3 s of Stop" in log.text for log in events.of("log")
    )  # type: ignore[attr-defined]


def test_engine_failure_is_one_failed_signal(qtbot, qloop, run_dir: Path) -> None:
    failure = RunFailed(error_type="ValueError", message="bad shape", traceback="Traceback...")
    engine = FakeEngine([*seed_run()[:3], [failure]])
    controller = RunController(factory(engine))
    events = Recorder(controller)
    _run(qtbot, controller, run_dir)
    assert events.of("failed") == [outcome_of(failure).failure]
    assert events.names()[-2:] == ["failed", "idle"]


def test_an_engine_that_cannot_start(qtbot, qloop, run_dir: Path) -> None:
    engine = FakeEngine([], start_error=OSError("no more processes"))
    controller = RunController(factory(engine))
    events = Recorder(controller)
    controller.start(load_example("seed"), run_dir)
    assert not controller.active
    failed = events.of("failed")
    assert len(failed) == 1 and "no more processes" in failed[0].message  # type: ignore[attr-defined]
    assert events.names()[-1] == "idle"


def test_a_broken_queue_ends_the_run_and_kills_the_engine(qtbot, qloop, run_dir: Path) -> None:
    engine = FakeEngine(seed_run()[:2], poll_error=EOFError("queue closed"))
    controller = RunController(factory(engine))
    events = Recorder(controller)
    _run(qtbot, controller, run_dir)
    failed = events.of("failed")
    assert len(failed) == 1 and "lost contact" in failed[0].message  # type: ignore[attr-defined]
    assert engine.killed and engine.closed


def test_one_run_at_a_time_and_shutdown(qtbot, qloop, run_dir: Path) -> None:
    engine = FakeEngine([], endless=True, stubborn=True)
    controller = RunController(factory(engine))
    controller.start(load_example("seed"), run_dir)
    with pytest.raises(RuntimeError):
        controller.start(load_example("seed"), run_dir)
    controller.shutdown()
    assert engine.killed and engine.done
    qtbot.waitUntil(lambda: not controller.active, timeout=5000)


def test_metrics_are_the_engines_own_values(qtbot, qloop, run_dir: Path) -> None:
    engine = FakeEngine(seed_run(steps=3, batch=3))
    controller = RunController(factory(engine))
    events = Recorder(controller)
    _run(qtbot, controller, run_dir)
    (metrics,) = events.of("metrics")
    assert isinstance(metrics, StepsAdded) and metrics.losses == (1.0, 0.5, 1.0 / 3)


def test_an_engine_with_its_own_stop_grace_gets_it(qtbot, qloop, run_dir: Path) -> None:
    """A local cluster first saves an agreed checkpoint, then kills its own stragglers."""
    engine = FakeEngine([], endless=True, stubborn=True)
    engine.stop_grace_s = 1.0  # type: ignore[attr-defined]
    controller = RunController(factory(engine), kill_after_s=0.3)
    events = Recorder(controller)
    controller.start(load_example("seed"), run_dir)
    qtbot.waitUntil(lambda: len(events.of("metrics")) >= 2, timeout=5000)
    controller.stop()
    qtbot.wait(1000)
    assert not engine.killed
    qtbot.waitUntil(lambda: not controller.active, timeout=5000)
    assert engine.killed
    assert any(
        "did not finish its step within 3.0 s of Stop" in log.text for log in events.of("log")
    )  # type: ignore[attr-defined]
