"""Local clusters in the window: the Run choice, the task table, task logs, failures, Stop."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.cluster import LocalCluster
from distloop.engine.cluster.run_plans import cluster_plan
from distloop.engine.cluster_layout import ports as cluster_ports
from distloop.engine.config import Project
from distloop.engine.engine_handle import TaskInfo
from distloop.engine.examples import load_example
from distloop.engine.messages import (
    Log,
    Message,
    Resources,
    RunFailed,
    RunFinished,
    StepMetrics,
)
from distloop.engine.project_file import load_project_data
from distloop.engine.run_events import RunEvent, TasksChanged
from distloop.engine.run_folder import MetricsWriter, read_metrics, read_status, write_status
from distloop.engine.run_model import RunModel
from distloop.gui.files.log_file_window import read_tail
from distloop.gui.run.run_controller import RunController
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtGui import QDesktopServices
from support.gui_fakes import (
    TASKS,
    FakeCluster,
    FakeEngine,
    cluster_window,
    factory,
    seed_run,
    told_steps,
)

RUN_TIMEOUT_MS = 180_000


def cluster_run(steps: int = 20, batch: int = 5) -> list[list[Message]]:
    """seed_run's messages with every task's log lines, as LocalCluster merges them."""
    batches = seed_run(steps, batch)
    return [
        [Log(text="engine starting", task="worker:0"), Log(text="serving", task="worker:1")],
        *batches[1:-1],
        [Log(text="worker:1 finished", task="worker:1")],
        batches[-1],
    ]


def multi_worker(project: Project | None = None) -> Project:
    project = project or load_example("seed")
    return project.model_copy(
        update={"strategy": project.strategy.model_copy(update={"kind": "multi_worker_mirrored"})}
    )


# --- which runs are clusters ------------------------------------------------------------


def test_plan_follows_the_strategy_and_the_tf_config() -> None:
    assert cluster_plan(None) is None
    assert cluster_plan(load_example("seed")) is None
    plan = cluster_plan(multi_worker())
    assert plan is not None and plan.runnable and plan.tasks == list(TASKS)
    assert "worker:0, worker:1" in plan.describe() and "127.0.0.1" in plan.describe()
    data = multi_worker().model_dump(mode="json")
    data["tf_config"] = {
        "cluster": {"worker": ["a.example:2222", "b.example:2222", "c.example:2222"]},
        "task": {"type": "worker", "index": 0},
    }
    three = cluster_plan(load_project_data(data))
    assert three is not None and three.tasks == ["worker:0", "worker:1", "worker:2"]
    data["tf_config"]["cluster"]["evaluator"] = ["d.example:2222"]
    refused = cluster_plan(load_project_data(data))
    assert refused is not None and not refused.runnable
    assert "evaluator" in refused.describe()
    assert refused.summary() == "Cannot run as a local cluster: 1 problem"


def test_run_becomes_run_cluster_and_says_what_it_starts(make_window) -> None:
    window, _ = cluster_window(make_window, [])
    assert window.run_action.text() == "&Run Cluster" and window.run_action.isEnabled()
    assert "worker:0, worker:1" in window.run_action.toolTip()
    assert window.validity.text() == "Ready to run a local cluster: worker:0, worker:1"
    window.editor.strategy.fields.editors["kind"].set_value("mirrored")
    assert window.run_action.text() == "&Run"
    assert window.run_action.toolTip() == "Train the project (Ctrl+R)"


def test_editing_a_cluster_project_binds_no_port_and_run_still_gets_ports(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Port choice binds loopback sockets: the window leaves it to the cluster's start."""
    chosen: list[list[int]] = []
    choose = cluster_ports.free_local_ports

    def counted(count: int) -> list[int]:
        chosen.append(choose(count))
        return chosen[-1]

    monkeypatch.setattr(cluster_ports, "free_local_ports", counted)
    laid_out: list[LocalCluster] = []

    def make_cluster(project: Project, run_dir: Path, *, resume: bool = False) -> FakeCluster:
        laid_out.append(LocalCluster(project, run_dir))
        laid_out[-1].close()
        return FakeCluster(cluster_run(4, 2), run_dir)

    window: MainWindow = make_window(cluster_factory=make_cluster)
    window.editor.strategy.fields.editors["kind"].set_value("multi_worker_mirrored")
    window.editor.training.steps_radio.setChecked(True)
    for steps in (4, 5, 6, 4):
        window.editor.training.steps.setValue(steps)
    window.editor.strategy.fields.editors["kind"].set_value("parameter_server")
    window.editor.strategy.fields.editors["kind"].set_value("multi_worker_mirrored")
    assert window.validation.project is not None
    assert window.validation.project.training.steps == 4
    assert window.validity.text() == "Ready to run a local cluster: worker:0, worker:1"
    assert "127.0.0.1 port of this machine, chosen when it starts" in window.run_action.toolTip()
    assert chosen == []

    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    (cluster,) = laid_out
    assert len(chosen) == 1 and len(set(chosen[0])) == 2
    assert cluster.tf_config.cluster["worker"] == [f"127.0.0.1:{port}" for port in chosen[0]]


def test_a_tf_config_the_launcher_refuses_disables_run(make_window) -> None:
    window, _ = cluster_window(make_window, [])
    window.editor.tf_config.import_text(
        '{"cluster": {"worker": ["127.0.0.1:23001", "127.0.0.1:23002"], '
        '"evaluator": ["127.0.0.1:23003"]}, "task": {"type": "worker", "index": 0}}'
    )
    assert window.validation.valid
    assert not window.run_action.isEnabled()
    assert "evaluator" in window.run_action.toolTip()
    assert window.validity.text().startswith("Cannot run as a local cluster")


# --- the controller ---------------------------------------------------------------------


def test_controller_picks_the_engine_and_follows_the_tasks(qtbot, qloop, tmp_path: Path) -> None:
    single = FakeEngine(seed_run())
    clusters: list[FakeCluster] = []

    def make_cluster(project: Project, run_dir: Path, *, resume: bool = False) -> FakeCluster:
        clusters.append(FakeCluster(cluster_run(), run_dir))
        return clusters[-1]

    runs = RunController(factory(single), make_cluster, refresh_ms=20)
    updates: list[list[TaskInfo]] = []
    started: list[list[TaskInfo]] = []  # each run's first tasks, as its cluster opened
    models: list[RunModel] = []

    def keep(model: RunModel, event: RunEvent) -> None:
        if isinstance(event, TasksChanged) and model in models:
            updates.append(list(event.tasks))
        elif isinstance(event, TasksChanged):
            models.append(model)
            started.append(list(event.tasks))

    runs.changed.connect(keep)
    runs.start(load_example("seed"), tmp_path / "a")
    assert runs.engine is single and runs.cluster is None and started == []
    qtbot.waitUntil(lambda: not runs.active, timeout=10_000)

    runs.start(multi_worker(), tmp_path / "b")
    (cluster,) = clusters
    assert runs.cluster is cluster and runs.model is not None
    assert [t.state for t in runs.model.tasks] == ["starting", "starting"]
    assert [[t.state for t in tasks] for tasks in started] == [["starting", "starting"]]
    qtbot.waitUntil(lambda: not runs.active, timeout=10_000)
    qtbot.waitUntil(lambda: [t.state for t in updates[-1]] == ["finished"] * 2, timeout=5_000)
    assert [t.last_step for t in updates[-1]] == [20, 20]
    assert updates[-1][1].last_line == "worker:1 finished"
    assert runs.model.tasks == updates[-1]  # the run's model holds the cluster's tasks
    seen = len(updates)
    qtbot.wait(100)
    assert len(updates) == seen  # no refreshes once the cluster is done


# --- the window -------------------------------------------------------------------------


def test_cluster_run_fills_the_table_the_task_logs_and_the_plot(qtbot, make_window) -> None:
    window, made = cluster_window(make_window, cluster_run(20, 5))
    panel = window.cluster_panel
    assert not panel.isVisible()
    window.show()
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    qtbot.waitUntil(
        lambda: [panel.cell(name, "State") for name in TASKS] == ["finished", "finished"],
        timeout=5_000,
    )
    (cluster,) = made
    assert cluster.started and cluster.closed
    assert panel.isVisible() and panel.table.rowCount() == 2
    assert panel.cell("worker:0", "State") == "finished"
    assert panel.cell("worker:0", "Address") == "127.0.0.1:23000"
    assert panel.cell("worker:1", "PID") == "4001"
    assert panel.cell("worker:1", "Last step") == "20"
    assert panel.cell("worker:1", "Last log line") == "worker:1 finished"
    assert panel.hint.text() == "The cluster run finished at step 20."

    selected = panel.selected_task()
    assert selected is not None and selected.name == "worker:0"  # the chief, selected
    assert panel.task_log.toPlainText().endswith("engine starting")
    panel.table.selectRow(1)
    assert panel.log_title.text() == "Log of worker:1 (pid 4001)"
    lines = panel.task_log.toPlainText().splitlines()
    assert [line.split(maxsplit=2)[-1] for line in lines] == ["serving", "worker:1 finished"]
    assert any("[engine worker:1] serving" in line for line in window.log_panel.lines())

    window.plot.redraw()
    assert np.array_equal(window.plot.steps(), np.arange(1, 21))
    assert window.status_panel.state.full_text().startswith("Finished at step 20")


def straggling_samples(at: float) -> list[Message]:
    """A second of both workers: worker:1 waits for its input most of each 10 ms step."""
    return [
        Resources(
            task=task,
            time=at,
            interval_s=1.0,
            step=int(at) * 2,
            cpu_percent=cpu,
            rss_bytes=rss << 20,
            steps=100,
            step_s=1.0,
            input_wait_s=wait,
        )
        for task, cpu, rss, wait in (("worker:0", 95.0, 700, 0.02), ("worker:1", 40.0, 900, 0.5))
    ]


def test_each_task_s_resources_show_in_its_row_the_resources_view_and_the_findings(
    qtbot, make_window
) -> None:
    batches = cluster_run(20, 5)
    samples = [straggling_samples(float(at)) for at in range(1, 6)]
    window, _ = cluster_window(make_window, [*batches[:-1], *samples, batches[-1]])
    panel = window.cluster_panel
    window.show()
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    qtbot.waitUntil(lambda: panel.cell("worker:1", "CPU") == "40%", timeout=5_000)
    assert panel.cell("worker:1", "Memory") == "900 MiB"
    assert panel.cell("worker:1", "Input wait") == "50%"
    assert panel.cell("worker:0", "Input wait") == "2%"
    assert panel.cell("worker:0", "GPU") == ""  # no NVML, no GPU: nothing, not zeros

    view = window.resources_plot
    series = view.series()
    assert list(series) == ["worker:0", "worker:1"]
    steps, cpu = series["worker:1"]
    assert list(steps) == [2, 4, 6, 8, 10] and set(cpu) == {40.0}
    view.measure.setCurrentText("Input wait (% of each step)")
    assert view.series()["worker:1"][1][0] == 50.0
    view.show_readout(6)
    assert "worker:1: 50 (step 6)" in view.readout.text()

    findings = window.status_panel.findings.full_text()
    assert findings.startswith("worker:1 is input-bound: 50% of each step waits for data")
    assert "worker:1 is the straggler: its steps take 1.9x the others'" in findings
    assert any("worker:1 is the straggler" in line for line in window.log_panel.lines())


def _sampled_run(run: Path, cpu_by_task: dict[str, str]) -> Path:
    """A past cluster run's folder with each task's system_metrics.csv."""
    for task, cpu in cpu_by_task.items():
        folder = run / "tasks" / task
        folder.mkdir(parents=True)
        (folder / "system_metrics.csv").write_text(
            "time,step,cpu_percent,rss_mb,steps,step_s,input_wait_s,input_wait_share,"
            "gpu0_util_percent,gpu0_memory_mb\n"
            f"1.0,,{cpu},700,0,0,0,,,\n1.5,10,{cpu},710,10,1.0,0.1,0.1,80,2048\n"
            "2.0,20,not a number,720,10,1.0,0.1,0.1,81,2048\n",
            encoding="utf-8",
        )
    return run


def test_a_past_run_s_samples_are_drawn_from_its_files(qtbot, make_window, tmp_path) -> None:
    window = make_window()
    run = _sampled_run(tmp_path / "past", {"worker-0": "90.0", "worker-1": "45.0"})
    window.resources_plot.show_past(run)
    qtbot.waitUntil(lambda: not window.resources_plot.reading, timeout=10_000)
    series = window.resources_plot.series()
    assert {name: list(values) for name, (_, values) in series.items()} == {
        "worker:0": [90.0],
        "worker:1": [45.0],
    }
    window.resources_plot.measure.setCurrentText("GPU (%)")
    assert list(window.resources_plot.series()) == ["worker:0 gpu0", "worker:1 gpu0"]


def test_a_failed_task_fails_the_run_visibly(qtbot, make_window, dialog_recorder) -> None:
    failure = RunFailed(
        error_type="EngineDied",
        message="worker:1 failed: the engine process was killed by SIGKILL",
        task="worker:1",
        exit_code=-9,
    )
    window, _ = cluster_window(make_window, [*cluster_run()[:3], [failure]])
    window.run()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    panel = window.cluster_panel
    qtbot.waitUntil(lambda: panel.cell("worker:1", "State") == "failed", timeout=5_000)
    assert panel.cell("worker:0", "State") == "stopped"
    assert panel.hint.text().startswith("worker:1 failed: EngineDied: the engine process was")
    assert "Failed: EngineDied in worker:1" in window.status_panel.state.full_text()
    assert dialog_recorder.kinds() == ["error"]
    assert "worker:1 failed" in dialog_recorder.shown[0][2]
    assert any("worker:1 failed" in line for line in window.log_panel.lines())
    assert window.run_action.isEnabled()


def test_stop_stops_every_task(qtbot, make_window, dialog_recorder) -> None:
    window, made = cluster_window(make_window, cluster_run()[:3], endless=True)
    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 10, timeout=10_000)
    window.stop_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    panel = window.cluster_panel
    qtbot.waitUntil(lambda: panel.cell("worker:1", "State") == "stopped", timeout=5_000)
    (cluster,) = made
    assert cluster.stop_requested and not cluster.killed and cluster.closed
    assert panel.cell("worker:0", "State") == "stopped"
    assert dialog_recorder.shown == []


def test_a_cluster_that_ignores_stop_is_killed(qtbot, qloop, tmp_path: Path) -> None:
    clusters: list[FakeCluster] = []

    def make_cluster(project: Project, run_dir: Path, *, resume: bool = False) -> FakeCluster:
        clusters.append(FakeCluster([], run_dir, endless=True, stubborn=True))
        return clusters[-1]

    runs = RunController(cluster_factory=make_cluster, kill_after_s=0.3, refresh_ms=20)
    runs.start(multi_worker(), tmp_path / "run")
    qtbot.wait(100)
    runs.stop()
    qtbot.waitUntil(lambda: not runs.active, timeout=5_000)
    (cluster,) = clusters
    assert cluster.stop_requested and cluster.killed and runs.killed


def test_closing_during_a_cluster_run_asks_then_stops_everything(
    qtbot, make_window, dialog_recorder
) -> None:
    window, made = cluster_window(make_window, cluster_run()[:3], endless=True)
    window.show()
    window.run()
    qtbot.waitUntil(lambda: window.controller.engine is not None, timeout=5_000)
    dialog_recorder.confirm_stop = False
    window.close()
    assert dialog_recorder.kinds() == ["unsaved", "confirm_stop"]
    assert window.isVisible() and window.controller.active
    dialog_recorder.confirm_stop = True
    window.close()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    (cluster,) = made
    assert cluster.stop_requested and cluster.closed
    assert not window.isVisible()


# --- the real thing ---------------------------------------------------------------------


@pytest.mark.slow
def test_real_two_worker_cluster_from_the_window(qtbot, window: MainWindow, dialog_recorder):
    reported = told_steps(window.controller)
    window.editor.strategy.fields.editors["kind"].set_value("multi_worker_mirrored")
    window.editor.training.steps_radio.setChecked(True)
    window.editor.training.steps.setValue(8)
    assert window.validation.valid and window.run_action.text() == "&Run Cluster"
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=RUN_TIMEOUT_MS)
    panel = window.cluster_panel
    qtbot.waitUntil(
        lambda: [panel.cell(name, "State") for name in TASKS] == ["finished", "finished"],
        timeout=5_000,
    )
    assert dialog_recorder.shown == [], dialog_recorder.shown

    run_dir = window.last_run_dir
    assert run_dir is not None and read_status(run_dir)["status"] == "finished"
    metrics = read_metrics(run_dir)
    assert metrics["step"] == [float(step) for step in range(1, 9)]
    assert np.array_equal(window.plot.steps(), np.arange(1, 9))
    assert np.array_equal(
        window.plot.losses().astype(np.float32), np.asarray(metrics["loss"], dtype=np.float32)
    )
    assert [s for m in reported for s in m.steps] == list(range(1, 9))
    values = window.status_panel.values
    assert values["strategy"].text() == "multi_worker_mirrored"  # as chosen, not the TF class
    assert values["replicas"].text() == "2"
    assert values["devices"].full_text() == "worker:0 CPU:0, worker:1 CPU:0"  # every task's

    assert [t.name for t in panel.tasks()] == list(TASKS)
    assert [panel.cell(name, "State") for name in TASKS] == ["finished", "finished"]
    assert [panel.cell(name, "Last step") for name in TASKS] == ["8", "8"]
    assert all(panel.cell(name, "PID").isdigit() for name in TASKS)
    assert all(panel.cell(name, "Address").startswith("127.0.0.1:") for name in TASKS)
    assert panel.task_lines("worker:1"), "worker:1's log lines reach its log view"
    assert all((task.run_dir / "engine.log").is_file() for task in panel.tasks())
    assert multiprocessing.active_children() == []


def test_resume_of_a_cluster_run_resumes_the_cluster_and_continues_its_trace(
    qtbot, make_window, dialog_recorder, tmp_path: Path
) -> None:
    """The Runs panel's Resume on a local cluster's folder (it has tasks/) makes the
    cluster again with resume=True, as ``distloop cluster --resume`` does."""
    run_dir = tmp_path / "runs" / "20261203-061500-cluster"
    (run_dir / "tasks" / "worker-0" / "checkpoints").mkdir(parents=True)
    (run_dir / "tasks" / "worker-0" / "checkpoints" / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-5"\n'
    )
    project = multi_worker().model_copy(update={"name": "two workers"})
    (run_dir / "project.json").write_text(project.to_json(), encoding="utf-8")
    old = [1.0, 0.875, 0.75, 0.625, 0.5, 0.4375, 0.375, 0.3125]
    writer = MetricsWriter(run_dir / "metrics.csv", None)
    writer.write(list(range(1, 9)), old, [0.1 * step for step in range(1, 9)])
    writer.close()
    write_status(run_dir, "stopped", last_step=8)
    redone = list(range(6, 13))  # the chief's last checkpoint was after step 5
    batches = [
        [seed_run()[1][0].model_copy(update={"first_step": 6, "total_steps": 12})],
        [StepMetrics(steps=redone, losses=[0.01 * s for s in redone], elapsed_s=redone)],
        [RunFinished(status="finished", last_step=12, final_loss=0.12, elapsed_s=1.0)],
    ]
    made: list[tuple[Path, bool]] = []
    clusters: list[FakeCluster] = []

    def make_cluster(project: Project, folder: Path, *, resume: bool = False) -> FakeCluster:
        made.append((folder, resume))
        clusters.append(FakeCluster(batches, folder))
        return clusters[-1]

    single = FakeEngine(seed_run())
    window: MainWindow = make_window(cluster_factory=make_cluster, engine_factory=factory(single))
    window.show()
    window.runs_panel.select_paths([run_dir])
    assert window.resume_action.isEnabled()
    window.resume_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    assert dialog_recorder.shown == [], dialog_recorder.shown
    assert made == [(run_dir, True)] and not single.started
    assert clusters[0].closed and window.cluster_panel.isVisible()
    assert list(window.plot.steps()) == list(range(1, 13))
    assert list(window.plot.losses()) == old[:5] + [0.01 * s for s in redone]
    caption = window.plot.caption()
    assert caption.startswith("two workers") and caption.endswith("(resumed)")


def test_a_task_s_engine_log_is_shown_in_a_window(qtbot, make_window) -> None:
    """It was handed to the desktop's viewer: nothing happened where there was none."""
    window, _ = cluster_window(make_window, cluster_run(4, 2))
    window.show()
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    panel = window.cluster_panel
    panel.table.selectRow(1)
    task = panel.selected_task()
    assert task is not None and task.name == "worker:1"
    log = task.run_dir / "engine.log"
    missing = panel.open_task_log()
    assert missing is not None and "does not exist (yet)" in missing.text.toPlainText()
    missing.close()

    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {n}\n" for n in range(5000)), encoding="utf-8")
    shown = panel.open_task_log()
    assert shown is not None and shown.isVisible()
    assert shown.windowTitle() == "engine.log of worker:1"
    assert shown.text.toPlainText() == log.read_text(encoding="utf-8")
    bar = shown.text.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0  # at the end, where a failure's lines are
    with log.open("a", encoding="utf-8") as file:
        file.write("the last line\n")
    shown.reload()
    assert shown.text.toPlainText().endswith("the last line\n")


def test_a_long_log_shows_its_tail(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("".join(f"line {n}\n" for n in range(1000)), encoding="utf-8")
    tail = read_tail(log, limit=100)
    first, *lines = tail.splitlines()
    size = log.stat().st_size
    assert first.startswith("[the first ") and first.endswith(f"the file has {size:,}]")
    text = log.read_text()
    assert text.endswith("\n" + "\n".join(lines) + "\n")  # whole lines, up to the last
    assert lines[-1] == "line 999" and len(tail) <= 100 + len(first) + 1


def test_open_run_folder_without_a_file_manager_says_where_it_is(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, _ = cluster_window(make_window, cluster_run(4, 2))
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda _url: False))
    window.open_run_folder_action.trigger()
    folder = str(window.last_run_dir)
    assert folder in window.statusBar().currentMessage()
    assert folder in window.log_panel.lines()[-1]


def test_a_task_s_long_log_line_wraps_in_the_pane(qtbot, make_window) -> None:
    """A traceback's long line ran off the task-log pane's right edge, behind a scrollbar."""
    long_line = "tensorflow.python.framework.errors_impl.InvalidArgumentError: " + "shape " * 60
    batches = cluster_run(5, 5)
    batches[0].append(Log(text=long_line, task="worker:0"))
    window, _made = cluster_window(make_window, batches)
    window.resize(1024, 700)
    window.show()
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    panel = window.cluster_panel
    qtbot.waitUntil(lambda: long_line in panel.task_log.toPlainText(), timeout=5_000)
    log = panel.task_log
    qtbot.waitUntil(lambda: log.document().documentLayout().documentSize().width() > 0)
    block = log.document().findBlock(log.toPlainText().index(long_line))
    assert block.layout().lineCount() > 1
    assert not log.horizontalScrollBar().isVisible()
