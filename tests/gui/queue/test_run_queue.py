"""The run queue, with scripted engines that write small run folders."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from distloop.engine import csv_summary
from distloop.engine.config import Project
from distloop.engine.examples import example_text, load_example
from distloop.engine.messages import RunFailed
from distloop.engine.run_folder import METRICS_FILE, PROJECT_FILE, STATUS_FILE
from distloop.engine.run_queue import ItemState
from distloop.engine.user_code import Fingerprint
from distloop.gui.common import dialogs
from distloop.gui.queue.queue_model import Column
from distloop.gui.queue.run_queue import RunQueue
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtCore import Qt
from support.gui_fakes import FakeEngine, seed_run


def _write_run(run_dir: Path, project: Project, losses: list[float], status: str) -> None:
    """What an engine leaves in its folder, enough for the queue's results."""
    (run_dir / PROJECT_FILE).write_text(project.to_json(), encoding="utf-8")
    rows = "".join(f"{step},{loss},{0.01 * step}\n" for step, loss in enumerate(losses, 1))
    (run_dir / METRICS_FILE).write_text("step,loss,elapsed_s\n" + rows, encoding="utf-8")
    (run_dir / STATUS_FILE).write_text(json.dumps({"status": status}), encoding="utf-8")


class Engines:
    """An engine factory: one scripted engine per run, each run's folder written as it starts.

    The losses depend on the learning rate (best = lr, final = 2 * lr) so sorting is checkable;
    ``fail`` names the learning rates whose run fails, ``endless`` makes every run wait for Stop.
    """

    def __init__(self, fail: tuple[float, ...] = (), endless: bool = False) -> None:
        self.fail = fail
        self.endless = endless
        self.made: list[tuple[Project, Path, FakeEngine]] = []

    def __call__(self, project: Project, run_dir: Path, *, resume: bool = False) -> FakeEngine:
        assert all(engine.closed for _, _, engine in self.made), "two runs at once"
        rate = project.optimizer.learning_rate
        if rate in self.fail:
            failure = RunFailed(error_type="DataError", message=f"lr {rate} diverged", known=True)
            engine = FakeEngine([*seed_run(5, 5)[:3], [failure]])
            _write_run(run_dir, project, [rate * 3], "failed")
        else:
            batches = seed_run(5, 5)[:3] if self.endless else seed_run(5, 5)
            engine = FakeEngine(batches, endless=self.endless)
            _write_run(run_dir, project, [rate * 4, rate, rate * 2], "finished")
        self.made.append((project, run_dir, engine))
        return engine

    def names(self) -> list[str]:
        return [project.name for project, _, _ in self.made]


def _sweep(rates: list[float]) -> list[Project]:
    """The seed once per learning rate, named after it (``seed lr=0.01``)."""
    seed = load_example("seed")
    return [
        seed.model_copy(
            update={
                "name": f"seed lr={rate:g}",
                "optimizer": seed.optimizer.model_copy(update={"learning_rate": rate}),
            }
        )
        for rate in rates
    ]


def _states(window: MainWindow) -> list[str]:
    return [item.state.value for item in window.run_queue.items]


def _wait_until_done(qtbot, window: MainWindow) -> None:
    qtbot.waitUntil(
        lambda: not window.run_queue.running and not window.controller.active, timeout=10_000
    )


def test_queued_runs_run_in_order_each_in_its_own_folder_and_results_sort(
    qtbot, make_window
) -> None:
    engines = Engines()
    window: MainWindow = make_window(engine_factory=engines)
    window.run_queue.add(_sweep([0.03, 0.01, 0.04, 0.02]))
    assert _states(window) == ["queued"] * 4
    assert window.queue_panel.start_action.isEnabled()

    window.queue_panel.start_action.trigger()
    _wait_until_done(qtbot, window)

    assert engines.names() == [f"seed lr={rate}" for rate in (0.03, 0.01, 0.04, 0.02)]
    folders = [run_dir for _, run_dir, _ in engines.made]
    root = window.starter.runs_root
    assert len(set(folders)) == 4 and all(folder.parent == root for folder in folders)
    assert [item.run_dir for item in window.run_queue.items] == folders
    assert _states(window) == ["finished"] * 4
    panel = window.queue_panel
    assert [item.project.name for item in panel.results()] == [
        "seed lr=0.01",
        "seed lr=0.02",
        "seed lr=0.03",
        "seed lr=0.04",
    ]
    assert [item.summary.smoothed_loss for item in panel.results()] == [0.02, 0.04, 0.06, 0.08]
    panel.results_table.sortByColumn(Column.FINAL_LOSS, Qt.SortOrder.DescendingOrder)
    assert [item.summary.final_loss for item in panel.results()] == [0.08, 0.06, 0.04, 0.02]
    shown = panel.results_proxy.index(0, Column.FINAL_LOSS).data()
    assert shown == "0.08"
    assert window.last_run_dir == folders[-1]
    assert not panel.start_action.isEnabled() and panel.clear_action.isEnabled()
    panel.clear_action.trigger()
    assert window.run_queue.items == [] and panel.results() == []


def test_a_failed_run_is_recorded_and_the_queue_goes_on(qtbot, make_window, dialog_recorder):
    engines = Engines(fail=(0.02,))
    window: MainWindow = make_window(engine_factory=engines)
    window.run_queue.add(_sweep([0.01, 0.02, 0.03]))
    window.run_queue.start()
    _wait_until_done(qtbot, window)
    assert _states(window) == ["finished", "failed", "finished"]
    assert window.run_queue.items[1].error == "DataError: lr 0.02 diverged"
    assert "error" not in dialog_recorder.kinds()  # no modal dialog holds the queue up
    assert "DataError: lr 0.02 diverged" in window.log_panel.text.toPlainText()
    # A failed run still has results: the steps it did are in its folder (its last loss,
    # 0.06, ties lr=0.03's last one).
    results = window.queue_panel.results()
    assert results[0].project.name == "seed lr=0.01"
    assert [item.summary.smoothed_loss for item in results] == [0.02, 0.06, 0.06]
    failed = next(item for item in results if item.project.name == "seed lr=0.02")
    assert failed.summary is not None and failed.summary.steps == 1


def test_an_engine_that_cannot_start_fails_its_item_only(qtbot, make_window, dialog_recorder):
    engines = Engines()

    def factory(project: Project, run_dir: Path, *, resume: bool = False) -> FakeEngine:
        if project.optimizer.learning_rate == 0.01:
            return FakeEngine([], start_error=OSError("no more processes"))
        return engines(project, run_dir)

    window: MainWindow = make_window(engine_factory=factory)
    window.run_queue.add(_sweep([0.01, 0.02]))
    window.run_queue.start()
    _wait_until_done(qtbot, window)
    assert _states(window) == ["failed", "finished"]
    assert "no more processes" in (window.run_queue.items[0].error or "")
    assert window.run_queue.items[0].run_dir is not None
    assert engines.names() == ["seed lr=0.02"]


@pytest.mark.parametrize("stop_with", ["window", "queue"])
def test_stop_stops_the_current_run_and_the_queue(qtbot, make_window, stop_with: str) -> None:
    engines = Engines(endless=True)
    window: MainWindow = make_window(engine_factory=engines)
    queue = window.run_queue
    queue.add(_sweep([0.01, 0.02, 0.03]))
    queue.start()
    qtbot.waitUntil(lambda: len(engines.made) == 1, timeout=5000)
    qtbot.waitUntil(lambda: queue.items[0].state is ItemState.RUNNING, timeout=5000)
    assert not window.queue_panel.start_action.isEnabled()
    (window.stop_action if stop_with == "window" else window.queue_panel.stop_action).trigger()
    _wait_until_done(qtbot, window)
    qtbot.wait(50)  # nothing else starts
    assert _states(window) == ["stopped", "queued", "queued"]
    assert len(engines.made) == 1 and engines.made[0][2].stop_requested
    # Start goes on with the items not yet run.
    assert window.queue_panel.start_action.isEnabled()
    engines.endless = False
    queue.start()
    _wait_until_done(qtbot, window)
    assert _states(window) == ["stopped", "finished", "finished"]
    assert engines.names() == ["seed lr=0.01", "seed lr=0.02", "seed lr=0.03"]


def test_queued_items_can_be_removed_but_not_the_running_one(qtbot, make_window) -> None:
    engines = Engines(endless=True)
    window: MainWindow = make_window(engine_factory=engines)
    queue, panel = window.run_queue, window.queue_panel
    queue.add(_sweep([0.01, 0.02, 0.03]))
    panel.queue_table.selectRow(1)
    assert panel.remove_action.isEnabled()
    panel.remove_action.trigger()
    assert [item.project.name for item in queue.items] == ["seed lr=0.01", "seed lr=0.03"]
    queue.start()
    qtbot.waitUntil(lambda: queue.current is not None and window.controller.active, timeout=5000)
    queue.remove(queue.items)
    assert [item.project.name for item in queue.items] == ["seed lr=0.01"]
    queue.stop()
    _wait_until_done(qtbot, window)
    assert engines.names() == ["seed lr=0.01"]


def test_only_a_valid_project_is_queued(make_window, dialog_recorder) -> None:
    window: MainWindow = make_window(engine_factory=Engines())
    window.editor.data_form.pages["constant"].editors["labels"].setText("1, 2")
    window.queue_panel.add_project_action.trigger()
    assert window.run_queue.items == []
    assert dialog_recorder.kinds() == ["problems"]
    assert not window.add_sweep_action.isEnabled()  # a study too needs a valid project
    window.editor.data_form.pages["constant"].editors["labels"].setText("1")
    window.queue_panel.add_project_action.trigger()
    (item,) = window.run_queue.items
    assert item.project == window.validation.project and item.state is ItemState.QUEUED


def test_a_queue_that_may_not_start_its_item_stops_and_keeps_it(qtbot, qloop) -> None:
    from distloop.gui.run.run_controller import RunController

    controller = RunController(Engines())
    asked: list[str] = []

    def declined(project: Project) -> None:
        asked.append(project.name)
        return None

    queue = RunQueue(controller, declined)
    queue.add(_sweep([0.01, 0.02]))
    queue.start()
    assert asked == ["seed lr=0.01"]
    assert not queue.running and [i.state for i in queue.items] == [ItemState.QUEUED] * 2


def test_the_windows_own_runs_are_left_alone(qtbot, make_window, dialog_recorder) -> None:
    engines = Engines(fail=(0.01,))  # the seed's own learning rate
    window: MainWindow = make_window(engine_factory=engines)
    window.run_queue.add(_sweep([0.02]))
    window.run()
    assert not window.queue_panel.start_action.isEnabled()
    window.run_queue.start()  # refused: one run at a time
    assert not window.run_queue.running
    qtbot.waitUntil(lambda: not window.controller.active, timeout=5000)
    qtbot.wait(50)
    assert _states(window) == ["queued"] and len(engines.made) == 1
    assert dialog_recorder.kinds() == ["error"]  # a failure of Run is still reported at once
    run_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Run")
    texts = [action.text() for action in run_menu.actions()]
    assert {"Add to &Queue", "Add &Sweep…", "S&tart Queue"} <= set(texts)
    assert window.add_sweep_action.shortcut().toString() == "Ctrl+Shift+W"
    assert window.queue_panel_action.shortcut().toString() == "Ctrl+Shift+U"


def test_custom_code_is_asked_about_when_queued_and_again_only_if_it_changed(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code = tmp_path / "project" / "step.py"
    code.parent.mkdir()
    code.write_text("def train_step(step, inputs):\n    return 0.0\n")
    data = {**json.loads(example_text("seed")), "custom_code": {"path": "step.py"}}
    (code.parent / "project.json").write_text(json.dumps(data))
    asked: list[str] = []
    answers: list[bool] = []

    def trust(_parent: object, fingerprint: Fingerprint) -> bool:
        asked.append(fingerprint.sha256)
        return answers.pop(0)

    monkeypatch.setattr(dialogs, "trust_custom_code", trust)
    engines = Engines()
    window: MainWindow = make_window(engine_factory=engines)
    assert window.open_project(code.parent / "project.json")
    answers[:] = [True]
    window.queue_panel.add_project_action.trigger()
    window.queue_panel.add_project_action.trigger()  # trusted now: not asked again
    assert len(asked) == 1 and len(window.run_queue.items) == 2
    assert window.run_queue.items[0].project.custom_code.path == str(code)
    code.write_text("def train_step(step, inputs):\n    return 1.0\n")
    answers[:] = [False]
    window.run_queue.start()  # the file changed since it was queued: asked, and declined
    assert len(asked) == 2 and engines.made == []
    assert not window.run_queue.running and _states(window) == ["queued", "queued"]
    answers[:] = [True]
    window.run_queue.start()
    _wait_until_done(qtbot, window)
    assert len(asked) == 3 and _states(window) == ["finished", "finished"]


def test_a_long_queued_runs_metrics_are_never_read_whole_on_the_windows_thread(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ending a queued run read its whole metrics.csv on the window's thread (43 s for a run
    of 10^7 steps): its results now come from the file's end at once and from the runs
    list's scanner thread for the rest, as the runs list's own do."""
    rows = 6_000  # 100 kB: more than the tail csv_summary reads on the window's thread
    losses = [2.0] * (rows - rows // 10) + [1.0] * (rows // 10)

    def factory(project: Project, run_dir: Path, *, resume: bool = False) -> FakeEngine:
        _write_run(run_dir, project, losses, "finished")
        return FakeEngine(seed_run(5, 5))

    whole_readers: list[str] = []
    original = csv_summary.scan

    def recorded(path: Path, key: str) -> csv_summary.CsvSummary:
        if os.path.getsize(path) > csv_summary.TAIL_BYTES:
            whole_readers.append(threading.current_thread().name)
        return original(path, key)

    monkeypatch.setattr(csv_summary, "scan", recorded)
    window: MainWindow = make_window(engine_factory=factory)
    window.run_queue.add(_sweep([0.01]))
    window.run_queue.start()
    _wait_until_done(qtbot, window)
    (item,) = window.run_queue.items
    assert item.state is ItemState.FINISHED and item.summary is not None
    assert item.summary.steps == rows  # from the file's end, at once
    results = window.queue_panel.results_proxy
    qtbot.waitUntil(lambda: results.index(0, Column.LATE_LOSS).data() == "1", timeout=10_000)
    assert item.summary.smoothed_loss == 1.0
    assert whole_readers and threading.main_thread().name not in whole_readers
