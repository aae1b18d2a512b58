"""Check Cluster, Run on Hosts and Dump Stacks in the window (GUI unit tests: the pre-flight,
the hosts and the cluster are stand-ins here; tests/gui/run/test_hosts_end_to_end.py runs them
for real on network-namespace hosts)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from distloop.engine.cluster.preflight import Finding
from distloop.engine.cluster.ssh import SshLaunch
from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.run_folder import read_status, write_status
from distloop.engine.run_history import summarize
from distloop.engine.stack_dumps import TaskStack
from distloop.gui.common import dialogs
from distloop.gui.run import host_runs
from distloop.gui.run.host_runs import HostRuns
from distloop.gui.shell.main_window import MainWindow
from support.gui_fakes import FakeCluster, cluster_window, seed_run

REMOTE = {"worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}


def on_hosts(window: MainWindow, cluster: dict[str, list[str]] = REMOTE) -> None:
    """The window's project as a 2-worker multi_worker_mirrored cluster on ``cluster``."""
    window.editor.strategy.fields.editors["kind"].set_value("multi_worker_mirrored")
    assert window.editor.tf_config.import_text(
        json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    )
    assert window.validation.valid, window.validation.problems


def test_the_actions_apply_to_a_tf_config_naming_other_machines_and_say_why_not(
    window: MainWindow,
) -> None:
    hosts = window.host_runs
    assert not hosts.run_action.isEnabled() and not hosts.check_action.isEnabled()
    assert "strategy mirrored runs in one process" in hosts.run_action.toolTip()
    assert "no cluster is running" in hosts.dump_action.toolTip()

    on_hosts(window, {"worker": ["localhost:2222", "localhost:2223"]})
    assert not hosts.run_action.isEnabled()
    assert "names only this machine" in hosts.run_action.toolTip()
    assert "names only this machine" in window.editor.hosts.note.text()

    on_hosts(window)
    assert hosts.run_action.isEnabled() and hosts.check_action.isEnabled()
    assert hosts.run_action.toolTip().endswith("(Ctrl+Shift+O)")
    table = window.editor.hosts.hosts_table
    rows = [[table.item(r, c).text() for c in range(2)] for r in range(table.rowCount())]
    assert rows == [["10.0.0.2", "worker:0"], ["10.0.0.3", "worker:1"]]
    menu_texts = [a.text() for a in window.menuBar().actions()[1].menu().actions()]
    assert {"&Check Cluster", "Run on &Hosts", "&Dump Stacks"} <= set(menu_texts)


def test_the_ssh_options_are_remembered(make_window) -> None:
    window = make_window()
    panel = window.editor.hosts
    panel.ssh_config_edit.setText("/etc/distloop/ssh_config")
    panel.remote_command_edit.setText("/opt/venv/bin/distloop")
    panel.remote_dir_edit.setText("/scratch/runs")
    panel.remote_dir_edit.editingFinished.emit()
    again = make_window().editor.hosts
    assert again.options() == {
        "ssh_config": "/etc/distloop/ssh_config",
        "remote_command": "/opt/venv/bin/distloop",
        "remote_dir": "/scratch/runs",
    }
    on_hosts(again_window := make_window())
    launch = again_window.editor.hosts.launch(again_window._project_to_run(), "r1")
    assert (launch.ssh_config, launch.command("10.0.0.2"), launch.folder("10.0.0.2")) == (
        Path("/etc/distloop/ssh_config"),
        "/opt/venv/bin/distloop",
        "/scratch/runs/r1",
    )


class HeldCheck:
    """A pre-flight that reports a step, then waits to be let go: the window must answer
    meanwhile."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        self.release = threading.Event()
        self.calls: list[SshLaunch] = []

    def __call__(self, project: Project, config: object, launch: SshLaunch, progress) -> list:
        self.calls.append(launch)
        progress(1, 4, "10.0.0.2 answered")
        assert self.release.wait(30)
        return self.findings


DROPPED = Finding(
    "10.0.0.2",
    "tf_config",
    "worker:0 cannot reach worker:1 at 10.0.0.3:2222: timed out (a firewall drops it?); "
    "open that port on its host for this one",
    "open that port on its host for this one",
)


def test_check_cluster_runs_off_the_window_thread_and_lists_each_finding(
    qtbot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = HeldCheck([DROPPED])
    monkeypatch.setattr(host_runs, "preflight", check)
    on_hosts(window)
    panel = window.editor.hosts
    window.host_runs.check_action.trigger()
    qtbot.waitUntil(lambda: "1 of 4" in panel.check_status.text(), timeout=30_000)
    assert panel.progress.isVisibleTo(window) and panel.progress.value() == 1
    assert not window.host_runs.check_action.isEnabled()  # one check at a time
    assert window.host_runs.check_action.toolTip() == "Not now: a check is running"
    check.release.set()
    qtbot.waitUntil(lambda: panel.findings_table.rowCount() == 1, timeout=30_000)
    table = panel.findings_table
    assert [table.item(0, c).text() for c in range(4)] == [
        "10.0.0.2",
        "tf_config",
        "worker:0 cannot reach worker:1 at 10.0.0.3:2222: timed out (a firewall drops it?)",
        "open that port on its host for this one",
    ]
    assert "1 problem(s)" in panel.check_status.text() and not panel.progress.isVisibleTo(window)
    assert window.host_runs.check_action.isEnabled()
    assert check.calls[0].run_name == "preflight"


def test_run_on_hosts_is_refused_on_a_finding_unless_run_anyway(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    check = HeldCheck([DROPPED])
    check.release.set()
    monkeypatch.setattr(host_runs, "preflight", check)
    answers: list[bool] = [False, True]
    asked: list[list[Finding]] = []

    def confirm(_parent: object, findings: list[Finding]) -> bool:
        asked.append(findings)
        return answers.pop(0)

    monkeypatch.setattr(dialogs, "confirm_run_despite_findings", confirm)
    brought_back: list[Path] = []
    monkeypatch.setattr(
        SshLaunch, "bring_back", lambda _self, _p, run_dir: brought_back.append(run_dir) or "ok"
    )
    window, clusters = cluster_window(make_window, seed_run())
    on_hosts(window)
    window.editor.hosts.remote_command_edit.setText("/opt/venv/bin/distloop")

    window.host_runs.run_action.trigger()
    qtbot.waitUntil(lambda: bool(asked) and not window.host_runs.checking, timeout=30_000)
    assert asked == [[DROPPED]] and not clusters and not window.controller.active
    assert "not started (Check Cluster found problems)" in window.log_panel.text.toPlainText()

    window.host_runs.run_action.trigger()
    qtbot.waitUntil(lambda: len(asked) == 2 and window.controller.active, timeout=30_000)
    hosts = window.controller.hosts
    assert hosts is not None and hosts.remote_command == "/opt/venv/bin/distloop"
    run_dir = window.last_run_dir
    assert run_dir is not None and hosts.run_name == run_dir.name
    assert not window.host_runs.run_action.isEnabled()
    assert "a run is in progress" in window.host_runs.run_action.toolTip()
    assert window.cluster_panel.hint.text().startswith("Cluster on its hosts")
    qtbot.waitUntil(lambda: not window.controller.active, timeout=30_000)
    assert clusters and clusters[0].started
    assert brought_back == [run_dir]  # the chief's folder comes back at the end
    launch = read_status(run_dir)["launch"]
    assert launch["remote_command"] == "/opt/venv/bin/distloop"
    assert launch["run_name"] == run_dir.name


class DumpingCluster(FakeCluster):
    def dump_stacks(self) -> list[TaskStack]:
        return [
            TaskStack("worker:0", "training.py:90 in run_loop", "h1:/runs/a/worker-0/stacks.txt"),
            TaskStack("worker:1", None, "h2:/runs/a/worker-1/stacks.txt"),
        ]


def test_dump_stacks_names_the_odd_task_and_where_the_stacks_are(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[tuple[list[str], list[str]]] = []
    monkeypatch.setattr(
        dialogs, "show_stacks", lambda _parent, blame, files: shown.append((blame, files))
    )
    made: list[DumpingCluster] = []

    def make_cluster(project: Project, run_dir: Path, *, resume: bool = False) -> DumpingCluster:
        made.append(DumpingCluster(seed_run(), run_dir, endless=True))
        return made[-1]

    window: MainWindow = make_window(cluster_factory=make_cluster)
    on_hosts(window, {"worker": ["localhost:2222", "localhost:2223"]})
    dump = window.host_runs.dump_action
    window.run()
    qtbot.waitUntil(dump.isEnabled, timeout=30_000)
    dump.trigger()
    qtbot.waitUntil(lambda: bool(shown), timeout=30_000)
    blame, files = shown[0]
    assert blame[0] == (
        "worker:1 did not answer: it is stopped, or stuck outside Python (in TensorFlow's own "
        "code, or the kernel's)"
    )
    assert all(line.startswith("the cluster took steps meanwhile") for line in blame[1:])
    assert files == [
        "worker:0: h1:/runs/a/worker-0/stacks.txt",
        "worker:1: h2:/runs/a/worker-1/stacks.txt",
    ]
    assert "Dump Stacks: worker:1 did not answer" in window.log_panel.text.toPlainText()
    window.stop()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=30_000)
    assert not dump.isEnabled() and "no cluster is running" in dump.toolTip()


def test_the_background_work_never_runs_on_the_window_thread(qtbot, window: MainWindow) -> None:
    seen: list[bool] = []
    worker = host_runs.Background(window)
    worker.done.connect(lambda _key, result: seen.append(result))
    assert worker.start(lambda _progress: threading.current_thread() is threading.main_thread())
    qtbot.waitUntil(lambda: bool(seen), timeout=30_000)
    assert seen == [False]
    assert isinstance(window.host_runs, HostRuns)


def test_the_projects_ways_into_its_hosts_are_listed_and_used(make_window, tmp_path: Path) -> None:
    """A host mapped in the project's launch.hosts is listed with its ssh destination and
    port, and reached that way; the panel's remote command wins over the host's own."""
    data = json.loads(load_example("seed").to_json())
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {"cluster": REMOTE, "task": {"type": "worker", "index": 0}}
    data["launch"] = {
        "hosts": {"10.0.0.3": {"destination": "me@gpu3", "port": 2200, "command": "/v/distloop"}}
    }
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(data))
    window = make_window()
    assert window.open_project(path) and window.validation.valid
    table = window.editor.hosts.hosts_table
    assert [table.item(r, 2).text() for r in range(2)] == ["ssh 10.0.0.2", "ssh me@gpu3 -p 2200"]
    assert "runs /v/distloop" in table.item(1, 2).toolTip()
    panel = window.editor.hosts
    launch = panel.launch(window._project_to_run(), "r2")
    assert launch.ssh("10.0.0.3", "true")[-6:] == ["-p", "2200", "-T", "me@gpu3", "--", "true"]
    assert launch.command("10.0.0.3") == "/v/distloop"
    panel.remote_command_edit.setText("/opt/distloop")
    assert panel.launch(window._project_to_run(), "r2").command("10.0.0.3") == "/opt/distloop"


def test_a_run_on_hosts_resumes_on_its_hosts(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Resume of a launched run reaches the same hosts and folders (status.json's launch
    settings, the project's launch.hosts), not a local cluster; the chief comes back."""
    monkeypatch.setattr(SshLaunch, "bring_back", lambda _self, _p, run_dir: "ok")
    window, clusters = cluster_window(make_window, seed_run())
    run_dir = tmp_path / "runs" / "launched"
    (run_dir / "tasks").mkdir(parents=True)
    data = json.loads(load_example("seed").to_json())
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {"cluster": REMOTE, "task": {"type": "worker", "index": 0}}
    data["launch"] = {"hosts": {"10.0.0.3": {"destination": "me@gpu3"}}}
    (run_dir / "project.json").write_text(json.dumps(data))
    settings = {"run_name": "launched", "ssh_config": "/etc/ssh_config",
                "remote_command": "/v/distloop", "remote_dir": "/scratch"}  # fmt: skip
    write_status(run_dir, "stopped", launch=settings)
    window.resume_run(summarize(run_dir))
    qtbot.waitUntil(lambda: window.controller.active, timeout=30_000)
    hosts = window.controller.hosts
    assert hosts is not None
    assert (hosts.run_name, str(hosts.ssh_config), hosts.remote_command, hosts.remote_dir) == (
        "launched", "/etc/ssh_config", "/v/distloop", "/scratch"
    )  # fmt: skip
    assert hosts.ssh("10.0.0.3", "true")[-4:] == ["-T", "me@gpu3", "--", "true"]
    qtbot.waitUntil(lambda: not window.controller.active, timeout=30_000)
    assert clusters, "resumed as the cluster it was"


def test_a_launch_that_runs_more_than_distloop_is_asked_about_once(
    qtbot, window: MainWindow, dialog_recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's launch.hosts command line runs on its host as written, and an ssh
    configuration file's ProxyCommand runs here: a project from anyone must not run
    them unasked. A no starts nothing; a yes is remembered for exactly these."""
    check = HeldCheck([])
    check.release.set()
    monkeypatch.setattr(host_runs, "preflight", check)
    on_hosts(window)
    window.editor.hosts.ssh_config_edit.setText("/tmp/someone's ssh_config")
    dialog_recorder.trust_launch = False
    window.host_runs.check_action.trigger()
    asked = [text for kind, _, text in dialog_recorder.shown if kind == "trust_launch"]
    assert asked == ["ssh reads /tmp/someone's ssh_config: a ProxyCommand or LocalCommand there "
                     "runs here"]  # fmt: skip
    assert check.calls == []  # nothing ran
    dialog_recorder.trust_launch = True
    window.host_runs.check_action.trigger()
    qtbot.waitUntil(lambda: len(check.calls) == 1, timeout=30_000)
    qtbot.waitUntil(lambda: window.host_runs.check_action.isEnabled(), timeout=30_000)
    window.host_runs.check_action.trigger()  # the same again: not asked again
    qtbot.waitUntil(lambda: len(check.calls) == 2, timeout=30_000)
    assert [kind for kind, _, _ in dialog_recorder.shown].count("trust_launch") == 2
