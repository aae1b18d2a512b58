"""The queue's results rank runs by what they learned, with their validation metrics, and the
metrics export carries the evaluations too (issue 21, item 8)."""

from __future__ import annotations

import json
from pathlib import Path

from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.run_folder import EVAL_FILE, METRICS_FILE, PROJECT_FILE, STATUS_FILE
from distloop.gui.files.exports import copy_metrics
from distloop.gui.queue.queue_model import Column
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtCore import Qt
from support.gui_fakes import FakeEngine, seed_run

# lr 0.01 had one lucky batch (the lowest loss of all) but ends high; lr 0.02 learned more.
LOSSES = {0.01: [3.0, 0.001, *[3.0] * 8], 0.02: [2.0] * 10}
EVALUATIONS = {0.01: "5,0.5,0.9\n10,0.4,0.91\n", 0.02: "5,0.8,0.7\n10,0.7,0.75\n"}


class Engines:
    """Scripted engines that leave the files a run writes: metrics.csv, and eval.csv when
    ``evaluate``."""

    def __init__(self, evaluate: bool) -> None:
        self.evaluate = evaluate

    def __call__(self, project: Project, run_dir: Path, *, resume: bool = False) -> FakeEngine:
        rate = project.optimizer.learning_rate
        (run_dir / PROJECT_FILE).write_text(project.to_json(), encoding="utf-8")
        rows = "".join(f"{step},{loss},{step}\n" for step, loss in enumerate(LOSSES[rate], 1))
        (run_dir / METRICS_FILE).write_text("step,loss,elapsed_s\n" + rows, encoding="utf-8")
        if self.evaluate:
            (run_dir / EVAL_FILE).write_text(
                "step,val_loss,val_accuracy\n" + EVALUATIONS[rate], encoding="utf-8"
            )
        (run_dir / STATUS_FILE).write_text(json.dumps({"status": "finished"}), encoding="utf-8")
        return FakeEngine(seed_run(5, 5))


def _run_sweep(qtbot, window: MainWindow) -> list[str]:
    seed = load_example("seed")
    window.run_queue.add(
        [
            seed.model_copy(
                update={
                    "name": f"seed lr={rate}",
                    "optimizer": seed.optimizer.model_copy(update={"learning_rate": rate}),
                }
            )
            for rate in (0.01, 0.02)
        ]
    )
    window.run_queue.start()
    qtbot.waitUntil(
        lambda: not window.run_queue.running and not window.controller.active, timeout=10_000
    )
    return [item.project.name for item in window.queue_panel.results()]


def test_results_rank_by_the_late_loss_not_one_lucky_batch(qtbot, make_window) -> None:
    window: MainWindow = make_window(engine_factory=Engines(evaluate=False))
    assert _run_sweep(qtbot, window) == ["seed lr=0.02", "seed lr=0.01"]
    panel = window.queue_panel
    assert panel.results_proxy.headerData(Column.LATE_LOSS, Qt.Orientation.Horizontal) == (
        "Loss, last 10%"
    )
    assert [panel.results_proxy.index(row, Column.LATE_LOSS).data() for row in (0, 1)] == [
        "2",
        "3",
    ]
    assert panel.results_proxy.index(0, Column.VAL_LOSS).data() == "—"


def test_results_rank_by_validation_loss_and_show_the_validation_metrics(
    qtbot, make_window
) -> None:
    window: MainWindow = make_window(engine_factory=Engines(evaluate=True))
    assert _run_sweep(qtbot, window) == ["seed lr=0.01", "seed lr=0.02"]
    panel = window.queue_panel
    assert [panel.results_proxy.index(row, Column.VAL_LOSS).data() for row in (0, 1)] == [
        "0.4",
        "0.7",
    ]
    assert panel.results_proxy.index(0, Column.VALIDATION).data() == "val_accuracy 0.91"
    shown = [column for column in Column if not panel.results_table.isColumnHidden(column)]
    assert Column.VAL_LOSS in shown and Column.VALIDATION in shown


def test_the_metrics_export_joins_the_evaluations_at_their_steps(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / METRICS_FILE).write_text("step,loss,elapsed_s\n1,0.9,0.1\n2,0.8,0.2\n3,0.7,0.3\n")
    (run_dir / EVAL_FILE).write_text("step,val_loss,val_accuracy\n2,0.85,0.6\n")
    copy_metrics(run_dir, tmp_path / "out.csv")
    assert (tmp_path / "out.csv").read_text() == (
        "step,loss,elapsed_s,val_loss,val_accuracy\n1,0.9,0.1,,\n2,0.8,0.2,0.85,0.6\n3,0.7,0.3,,\n"
    )
