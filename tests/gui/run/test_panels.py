"""Status panel numbers, the log panel, and device detection in the strategy tab."""

from __future__ import annotations

import pytest
from distloop.engine.devices import DetectedDevices, Device
from distloop.engine.messages import (
    Log,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
)
from distloop.engine.run_events import Logged, Started
from distloop.engine.run_model import RunModel
from distloop.gui.project.strategy_form import logical_device
from distloop.gui.run.log_panel import LEVEL_COLORS, MAX_LINES, LogPanel
from distloop.gui.run.status_panel import StatusPanel, short_device
from distloop.gui.shell.main_window import PROJECT_DOCK_WIDTH, MainWindow
from distloop.gui.widgets.elided_label import ElidedLabel
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel
from support.gui_fakes import FakeEngine, seed_run


def test_status_panel_rate_progress_and_eta(qtbot) -> None:
    panel = StatusPanel()
    qtbot.addWidget(panel)
    model = RunModel(total_steps=1000)
    model.subscribe(lambda message: panel.show_change(model, message))
    panel.follow(model, "/runs/20260101-seed")
    assert panel.values["run_dir"].full_text() == "20260101-seed"
    assert panel.values["elapsed"].text() == "—"  # TensorFlow's start-up is not training
    model.apply(
        RunStarted(
            strategy="MirroredStrategy",
            strategy_kind="mirrored",
            num_replicas=2,
            devices=["/cpu:0", "/cpu:1"],
            tensorflow_version="2.21.0",
        )
    )
    assert panel.values["strategy"].text() == "mirrored"  # the user's name, not the class
    assert "MirroredStrategy" in panel.values["strategy"].toolTip()
    for first in range(1, 201, 50):
        steps = list(range(first, first + 50))
        model.apply(StepMetrics(steps=steps, losses=[0.5] * 50, elapsed_s=[s / 100 for s in steps]))
    assert panel.rate() == pytest.approx(100.0)
    assert panel.values["step"].text() == "200 / 1,000"
    assert panel.values["rate"].text() == "100.0"
    assert panel.values["eta"].text() == "8.0 s"  # 800 steps at 100 steps/s
    assert panel.progress.value() == 200 and panel.progress.maximum() == 1000
    assert panel.values["devices"].full_text() == "/cpu:0, /cpu:1"
    assert panel.values["elapsed"].text() == "2.0 s"  # the engine's clock, not the window's
    model.apply(RunFinished(status="stopped", last_step=200, final_loss=0.5, elapsed_s=2.5))
    assert panel.state.full_text() == "Stopped at step 200, final loss 0.5"
    assert panel.values["eta"].text() == "—"
    # One duration for one run: what the engine reported, as the runs table and log say.
    assert panel.values["elapsed"].text() == "2.5 s"


def test_status_panel_says_saving_after_the_last_step_not_running(qtbot) -> None:
    panel = StatusPanel()
    qtbot.addWidget(panel)
    model = RunModel(total_steps=100)
    model.subscribe(lambda message: panel.show_change(model, message))
    panel.follow(model, "/runs/x")
    model.apply(StepMetrics(steps=[98, 99], losses=[0.5, 0.5], elapsed_s=[9.8, 9.9]))
    assert panel.values["eta"].text() == "0.1 s"
    model.apply(StepMetrics(steps=[100], losses=[0.4], elapsed_s=[10.0]))
    assert panel.state.full_text().startswith("Saving the final checkpoint")
    assert panel.values["eta"].text() == "—" and panel.values["elapsed"].text() == "10.0 s"
    model.apply(RunFinished(status="finished", last_step=100, final_loss=0.4, elapsed_s=10.0))
    assert panel.state.full_text().startswith("Finished at step 100")


def test_status_panel_without_a_known_length(qtbot) -> None:
    panel = StatusPanel()
    qtbot.addWidget(panel)
    model = RunModel()
    model.subscribe(lambda message: panel.show_change(model, message))
    panel.follow(model, "/runs/x")
    assert panel.progress.maximum() == 0  # busy indicator
    model.apply(StepMetrics(steps=[1, 2], losses=[1.0, 0.9], elapsed_s=[0.1, 0.2]))
    assert panel.values["step"].text() == "2"
    model.stopping()
    assert panel.state.full_text().startswith("Stopping")
    model.apply(RunFailed(error_type="EngineDied", message="killed"))
    assert "EngineDied" in panel.state.full_text()
    assert panel.progress.maximum() != 0  # no busy bar moving on after the run failed
    panel.follow(RunModel(), "/runs/y")  # the next run: the last one's model speaks no more
    model.apply(StepMetrics(steps=[3], losses=[0.8], elapsed_s=[0.3]))
    assert panel.values["run_dir"].full_text() == "y" and panel.values["step"].text() == "—"


def test_log_panel_levels_and_limit(qtbot) -> None:
    panel = LogPanel()
    qtbot.addWidget(panel)
    panel.add_message(Log(level="warning", source="tensorflow", text="W0000 slow\nsecond line"))
    panel.add_message(Log(level="error", text="boom", task="worker:1"))
    lines = panel.lines()
    assert lines[0].endswith("WARNING [tf] W0000 slow")
    assert lines[1].endswith("WARNING [tf] second line")
    assert lines[2].endswith("ERROR   [engine worker:1] boom")
    block = panel.text.document().findBlockByNumber(2)
    color = block.begin().fragment().charFormat().foreground().color()
    assert color == LEVEL_COLORS["error"]
    assert panel.text.maximumBlockCount() == MAX_LINES
    for index in range(MAX_LINES + 50):
        panel.add(f"line {index}")
    assert len(panel.lines()) == MAX_LINES
    assert panel.lines()[-1].endswith(f"line {MAX_LINES + 49}")


FOUND = DetectedDevices(
    devices=(
        Device(name="/physical_device:CPU:0", device_type="CPU"),
        Device(name="/physical_device:GPU:0", device_type="GPU"),
        Device(name="/physical_device:GPU:1", device_type="GPU"),
    ),
    tensorflow_version="2.21.0",
)


def test_logical_device_names() -> None:
    assert logical_device("/physical_device:GPU:1") == "/gpu:1"
    assert logical_device("/physical_device:CPU:0") == "/cpu:0"


def test_detect_devices_runs_in_the_background(qtbot, make_window) -> None:
    calls: list[float] = []

    def detect(timeout_s: float) -> DetectedDevices:
        calls.append(timeout_s)
        return FOUND

    window: MainWindow = make_window(detect=detect)
    strategy = window.editor.strategy
    window.detect_action.trigger()
    assert not strategy.detect_button.isEnabled()
    qtbot.waitUntil(lambda: not strategy.detection_running(), timeout=5000)
    assert strategy.detect_button.isEnabled() and calls
    assert strategy.device_list.count() == 3
    assert strategy.detect_status.text() == "TensorFlow 2.21.0 sees 1 CPU, 2 GPU."
    assert window.status_panel.values["tensorflow"].text() == "2.21.0"
    assert "2.21.0" in window.about_text()
    for row in (1, 2):
        strategy.device_list.item(row).setSelected(True)
    strategy.use_button.click()
    assert window.editor.data()["strategy"]["devices"] == ["/gpu:0", "/gpu:1"]
    assert window.validation.valid  # mirrored over two named devices


def test_detection_failure_is_reported_in_place(qtbot, make_window) -> None:
    def detect(timeout_s: float) -> DetectedDevices:
        raise TimeoutError("device detection took longer than 120 s")

    window: MainWindow = make_window(detect=detect)
    strategy = window.editor.strategy
    strategy.start_detection()
    qtbot.waitUntil(lambda: not strategy.detection_running(), timeout=5000)
    assert "took longer than 120 s" in strategy.detect_status.text()
    assert strategy.detect_button.isEnabled()


BANNER = [
    "I0000 00:00:1764739200.000000 1 port.cc:153] oneDNN custom operations are on.",
    "I0000 00:00:1764739200.100000 1 cpu_feature_guard.cc:210] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
]


def test_log_hides_tensorflow_start_up_banner_until_asked(qtbot) -> None:
    panel = LogPanel()
    qtbot.addWidget(panel)
    panel.run_starting()
    for line in BANNER:
        panel.add_message(Log(source="tensorflow", text=line))
    panel.add_message(Log(source="tensorflow", level="warning", text="W0000 no GPU"))
    panel.add_message(Log(text="building the model"))
    panel.run_started()
    panel.add_message(Log(source="tensorflow", text="I0000 after the start: not a banner"))
    shown = panel.lines()
    assert len(shown) == 3 and not any("oneDNN" in line for line in shown)
    assert shown[0].endswith("[tf] W0000 no GPU")  # warnings are never hidden
    assert panel.startup_checkbox.text() == "Show TensorFlow start-up messages (2 hidden)"
    panel.startup_checkbox.setChecked(True)  # one click shows them, in their place
    assert [line.split("] ", 1)[1] for line in panel.lines()] == [
        *BANNER,
        "W0000 no GPU",
        "building the model",
        "I0000 after the start: not a banner",
    ]
    assert panel.startup_checkbox.text() == "Show TensorFlow start-up messages"
    panel.startup_checkbox.setChecked(False)
    assert len(panel.lines()) == 3
    panel.clear()
    panel.startup_checkbox.setChecked(True)
    assert panel.lines() == [] and panel.hidden_lines() == 0


def test_log_wraps_long_lines(qtbot) -> None:
    panel = LogPanel()
    panel.resize(400, 300)
    qtbot.addWidget(panel)
    panel.show()
    panel.add("/a/path/without/any/spaces/" * 20)
    layout = panel.text.document().firstBlock().layout()
    assert layout.lineCount() > 1
    assert panel.text.horizontalScrollBar().maximum() == 0  # nothing to scroll sideways to


def test_the_window_hides_the_banner_of_each_run(qtbot, make_window) -> None:
    banner = [[Log(source="tensorflow", text=BANNER[0])]]
    runs = [FakeEngine(banner + seed_run(4, 2)), FakeEngine(banner + seed_run(4, 2))]
    window = make_window(engine_factory=lambda *_args, **_kwargs: runs.pop(0))
    for _run in range(2):
        window.run_action.trigger()
        qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    assert not any("oneDNN" in line for line in window.log_panel.lines())
    assert window.log_panel.hidden_lines() == 2
    window.clear_log_action.trigger()
    window.log_panel.startup_checkbox.setChecked(True)
    assert window.log_panel.lines() == []


def test_devices_are_short_and_a_clusters_name_their_task() -> None:
    assert short_device("/job:localhost/replica:0/task:0/device:CPU:1") == "CPU:1"
    assert short_device("/job:worker/replica:0/task:1/device:GPU:0") == "worker:1 GPU:0"
    assert short_device("/job:worker/replica:0/task:1") == "worker:1"
    assert short_device("/cpu:0") == "/cpu:0"


def test_a_run_start_warning_is_logged_once(qtbot) -> None:
    """The engine logs each warning (a skipped file) and lists it in RunStarted: the
    window showed the skipped-file warning twice."""
    panel = LogPanel()
    qtbot.addWidget(panel)
    warning = "data.path: skipped 1 unreadable image(s) (data.on_bad_file is skip): a.png"
    panel.run_starting()
    panel.add_message(Logged(warning, "warning"))
    started = Started(
        strategy="MirroredStrategy",
        strategy_kind=None,
        num_replicas=1,
        devices=("/cpu:0",),
        tensorflow_version="2.21.0",
        warnings=(warning,),
    )
    panel.show_change(RunModel(), started)
    assert sum(warning in line for line in panel.lines()) == 1


def test_the_status_panel_keeps_its_run_and_devices_in_view_at_1024_px(qtbot, make_window) -> None:
    """A billion-step cluster run at 1024x700: ``499,999,999 / 999,999,999`` and
    ``multi_worker_mirrored`` took the width, and Devices and Run showed nothing."""
    window: MainWindow = make_window()
    window.show()
    window.resize(1024, 700)
    qtbot.waitExposed(window)
    # the forms' dock as wide as a first start makes it
    window.resizeDocks([window.project_dock], [PROJECT_DOCK_WIDTH], Qt.Orientation.Horizontal)
    panel = window.status_panel
    total = 999_999_999
    model = RunModel(total_steps=total)
    model.subscribe(lambda event: panel.show_change(model, event))
    panel.follow(model, "/runs/x", "Digits: a project with a long name #3")
    model.apply(
        RunStarted(
            strategy="MultiWorkerMirroredStrategy",
            strategy_kind="multi_worker_mirrored",
            num_replicas=2,
            devices=[f"/job:worker/replica:0/task:{task}/device:CPU:0" for task in (0, 1)],
            tensorflow_version="2.21.0",
            total_steps=total,
        )
    )
    model.apply(StepMetrics(steps=[499_999_999], losses=[0.5], elapsed_s=[3000.0]))
    step = panel.values["step"]
    assert step.text() == "500M / 1.00B"
    assert step.toolTip() == "step 499,999,999 of 999,999,999"
    qtbot.waitUntil(lambda: step.width() >= step.sizeHint().width(), timeout=5_000)
    assert panel.values["devices"].text().startswith("worker:0 CPU:0")
    assert panel.values["run_dir"].text().startswith("Digits")
    assert panel.values["run_dir"].text().endswith("#3")
    for label in panel.findChildren(QLabel):
        assert label.geometry().right() <= panel.width(), label.text()
        if not isinstance(label, ElidedLabel):  # the long texts are elided, the others whole
            assert label.width() >= label.sizeHint().width(), label.text()
    assert panel.width() <= window.width() <= 1024
