"""MLflow in the window: Log to MLflow… on the Runs list (off the window's thread, one line
back) and the preference that logs each run as it trains, against a real SQLite store."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from distloop.engine.examples import load_example
from distloop.engine.mlflow_log import LiveSettings, flat_params
from distloop.engine.run_folder import load_json
from distloop.gui.common import dialogs, settings
from distloop.gui.run.run_controller import RunController
from distloop.gui.runs.runs_panel import RunsPanel
from distloop.gui.shell.main_window import MainWindow
from support.gui_fakes import FakeEngine, factory, seed_run
from support.runs_list import fake_run

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

LONG_S = 240_000  # ms: a first SQLite store makes its tables (seconds on a busy machine)


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow keeps a SQLite store's artifacts in ``./mlruns``: the test's folder, never the
    checkout."""
    monkeypatch.chdir(tmp_path)


def sqlite_uri(folder: Path) -> str:
    return f"sqlite:///{folder / 'mlflow.db'}"


def answer_mlflow(monkeypatch: pytest.MonkeyPatch, uri: str, live: bool = False) -> list[str]:
    """Answers the MLflow dialog with ``uri``; returns the titles it was opened with."""
    asked: list[str] = []
    chosen = live

    def ask(_parent, title: str, _uri: str, _experiment: str, live: bool | None):
        asked.append(title)
        return dialogs.MlflowChoice(uri, "window runs", chosen if live is not None else False)

    monkeypatch.setattr(dialogs, "ask_mlflow", ask)
    return asked


def two_runs(root: Path) -> list[Path]:
    return [
        fake_run(root, "a", name="first", started=1.7e9, losses=[1.0, 0.5, 0.25]),
        fake_run(root, "b", name="second", started=1.7e9 + 60, losses=[0.9, 0.8]),
    ]


def test_log_to_mlflow_logs_each_selected_run_as_one_run(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = two_runs(tmp_path / "runs")
    uri = sqlite_uri(tmp_path)
    asked = answer_mlflow(monkeypatch, uri)
    window = MainWindow(runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    panel: RunsPanel = window.runs_panel
    panel.refresh()
    panel.select_paths(runs)
    assert panel.mlflow_action.isEnabled()

    with qtbot.waitSignal(panel.reported, timeout=LONG_S) as said:
        panel.mlflow_action.trigger()
    assert said.args == ["Logging 2 runs to MLflow…"]
    with qtbot.waitSignal(panel.reported, timeout=LONG_S) as said:
        pass
    assert said.args == [
        f"Logged 2 runs to MLflow at {uri}, experiment window runs: 2 MLflow run(s), "
        "5 metric values"
    ]
    assert asked == ["Log to MLflow"]
    assert settings.mlflow_store() == (uri, "window runs")  # asked again next time
    client = MlflowClient(uri)
    found = client.search_runs([client.get_experiment_by_name("window runs").experiment_id])
    by_name = {run.info.run_name: run for run in found}
    assert set(by_name) == {"first", "second"}
    steps = client.get_metric_history(by_name["first"].info.run_id, "loss")
    assert sorted(metric.step for metric in steps) == [1, 2, 3]
    assert by_name["first"].data.params == flat_params(load_json(runs[0] / "project.json"))
    assert panel.mlflow_action.isEnabled()


def test_an_unreachable_store_is_one_line_in_the_status_bar(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = two_runs(tmp_path / "runs")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    answer_mlflow(monkeypatch, uri)
    window = MainWindow(runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.runs_panel.refresh()
    window.runs_panel.select_paths(runs[:1])
    window.runs_panel.mlflow_action.trigger()
    expected = (
        f"Not logged to MLflow: MLflow at {uri}: the tracking server does not answer "
        "([Errno 111] Connection refused)"
    )
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == expected, timeout=LONG_S)


def test_the_preference_logs_each_run_as_it_trains(
    qtbot, qloop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow Logging… turns live logging on; the controller then logs its run's messages
    (a scripted engine's, here) as one MLflow run, every step, ended as the run ended."""
    uri = sqlite_uri(tmp_path)
    answer_mlflow(monkeypatch, uri, live=True)
    window = MainWindow(runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.mlflow_settings_action.trigger()
    assert settings.live_mlflow() == LiveSettings(uri, "window runs")

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    project = load_example("seed")
    (run_dir / "project.json").write_text(project.to_json())
    (run_dir / "status.json").write_text(json.dumps({"status": "running", "name": "live one"}))
    controller = RunController(factory(FakeEngine(seed_run(steps=20))))
    controller.live_mlflow = window.controller.live_mlflow
    logged: list[str] = []
    controller.changed.connect(lambda _model, event: logged.append(getattr(event, "text", "")))
    controller.start(project, run_dir)
    qtbot.waitUntil(lambda: not controller.active, timeout=LONG_S)

    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("window runs").experiment_id])
    steps = client.get_metric_history(run.info.run_id, "loss")
    assert sorted(metric.step for metric in steps) == list(range(1, 21))
    assert run.data.params == flat_params(load_json(run_dir / "project.json"))
    assert run.info.run_name == "live one"
    assert f"MLflow run {run.info.run_id}: 20 metric values logged" in logged


def test_without_the_preference_nothing_is_logged(qtbot, qloop, tmp_path: Path) -> None:
    window = MainWindow(runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    assert settings.live_mlflow() is None
    assert window.controller.live_mlflow() is None
