"""The window keeps one warm engine ready for single-process runs, and ends it on closing."""

from __future__ import annotations

from pathlib import Path

from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.process import WarmEngines
from distloop.engine.run_events import StepsAdded
from distloop.engine.run_folder import write_status
from distloop.engine.run_history import summarize
from distloop.gui.shell.main_window import MainWindow
from support.gui_fakes import FakeEngine, seed_run

TIMEOUT_MS = 10_000


class FakeWarmEngines:
    """Records what the window asks of its warm engines; its engines are scripted."""

    def __init__(self) -> None:
        self.prepared = 0
        self.taken: list[tuple[Path, bool]] = []
        self.closed = False

    def prepare(self) -> None:
        self.prepared += 1

    def engine(self, project: Project, run_dir: Path, *, resume: bool = False) -> FakeEngine:
        self.taken.append((run_dir, resume))
        return FakeEngine(seed_run())

    def close(self) -> None:
        self.closed = True


def test_runs_take_the_warm_engine_and_the_next_one_warms_up(qtbot, make_window) -> None:
    warm = FakeWarmEngines()
    window: MainWindow = make_window(warm_engines=warm)
    assert warm.prepared == 0  # not before the window shows itself
    window.show()
    qtbot.waitUntil(lambda: warm.prepared == 1, timeout=TIMEOUT_MS)
    first_step_prepared: list[int] = []
    window.controller.changed.connect(
        lambda _model, event: (
            isinstance(event, StepsAdded) and first_step_prepared.append(warm.prepared)
        )
    )
    window.run()
    assert warm.taken == [(window.last_run_dir, False)] and warm.prepared == 1
    qtbot.waitUntil(lambda: not window.controller.active, timeout=TIMEOUT_MS)
    assert window.plot.steps()[-1] == 20
    assert first_step_prepared[0] == 2 and warm.prepared == 2  # at its first step, once

    run_dir = window.last_run_dir
    assert run_dir is not None
    (run_dir / "project.json").write_text(load_example("seed").to_json(), encoding="utf-8")
    write_status(run_dir, "stopped", last_step=10)  # what an engine leaves (the fake left none)
    window.resume_run(summarize(run_dir))
    assert warm.taken[-1] == (run_dir, True)
    qtbot.waitUntil(lambda: not window.controller.active, timeout=TIMEOUT_MS)
    window.close()
    assert warm.closed
    prepared = warm.prepared
    qtbot.wait(50)
    assert warm.prepared == prepared  # nothing warms up after the window closed


def test_closing_the_window_ends_the_idle_warm_engine(qtbot, make_window) -> None:
    warm = WarmEngines()
    window: MainWindow = make_window(warm_engines=warm)
    window.show()
    qtbot.waitUntil(lambda: warm.warm is not None, timeout=TIMEOUT_MS)
    assert warm.warm is not None
    process = warm.warm.child
    assert process.is_alive()
    window.close()
    assert not process.is_alive() and warm.warm is None


def test_no_warm_engine_starts_while_the_window_closes_after_its_run(qtbot, make_window) -> None:
    warm = FakeWarmEngines()
    window: MainWindow = make_window(warm_engines=warm)
    window.show()
    qtbot.waitUntil(lambda: warm.prepared == 1, timeout=TIMEOUT_MS)
    window.run()
    window.close()  # asks (answered yes), stops the run, closes once it ended
    qtbot.waitUntil(lambda: warm.closed, timeout=TIMEOUT_MS)
    assert warm.prepared == 1
