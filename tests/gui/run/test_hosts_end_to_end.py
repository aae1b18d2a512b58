"""Check Cluster, Run on Hosts and Dump Stacks in the window, for real: two hosts as network
namespaces with their own key-only sshd (tests/support/ssh_hosts.py), Distloop started there over
ssh, a real pre-flight and a real 2-worker MultiWorkerMirrored run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.run_folder import read_metrics, read_status
from distloop.gui.common import dialogs
from distloop.gui.shell.main_window import MainWindow
from support.clusters import multi_worker
from support.ssh_hosts import ssh_hosts

pytestmark = pytest.mark.slow

STEPS = 1500
"""Long enough for a stack dump to come back over ssh while the workers train."""
RUN_TIMEOUT_MS = 150_000
"""Each wait; the test's own limit is longer, so a wait that runs out fails with its line
instead of pytest-timeout ending the worker (a crash that names nothing)."""


@pytest.mark.sshd
@pytest.mark.timeout(600)
def test_check_cluster_finds_a_dropped_port_then_run_on_hosts_trains_to_the_end(
    qtbot, make_window, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = shutil.which("iptables") is None and "no iptables"
    if reason:
        pytest.skip(str(reason))
    stacks: list[tuple[list[str], list[str]]] = []
    monkeypatch.setattr(
        dialogs, "show_stacks", lambda _w, blame, files: stacks.append((blame, files))
    )
    asked: list[object] = []
    monkeypatch.setattr(dialogs, "confirm_run_despite_findings", lambda *a: asked.append(a))
    with ssh_hosts(tmp_path / "hosts", 2) as hosts:
        cluster = {"worker": [f"{address}:2222" for address in hosts.addresses]}
        path = tmp_path / "project.json"
        path.write_text(
            json.dumps(multi_worker(STEPS, {"cluster": cluster, "task": {"type": "worker"}}))
        )
        window: MainWindow = make_window()
        assert window.open_project(path)
        panel = window.editor.hosts
        panel.ssh_config_edit.setText(str(hosts.ssh_config))
        panel.remote_command_edit.setText(f"{sys.executable} -m distloop.gui.launcher")
        panel.remote_dir_edit.setText(str(tmp_path / "remote"))
        panel.remote_dir_edit.editingFinished.emit()

        rule = ["INPUT", "-p", "tcp", "--dport", "2222", "-j", "DROP"]
        firewall = ["ip", "netns", "exec", hosts.namespaces[1], "iptables"]
        subprocess.run([*firewall, "-A", *rule], check=True, timeout=30)
        try:
            window.host_runs.check_action.trigger()
            qtbot.waitUntil(lambda: not window.host_runs.checking, timeout=RUN_TIMEOUT_MS)
        finally:
            subprocess.run([*firewall, "-D", *rule], timeout=30)
        table = panel.findings_table
        rows = [[table.item(r, c).text() for c in range(4)] for r in range(table.rowCount())]
        assert rows == [
            [
                hosts.addresses[0],
                "tf_config",
                f"worker:0 cannot reach worker:1 at {hosts.addresses[1]}:2222: timed out (a "
                "firewall drops it?)",
                "open that port on its host for this one",
            ]
        ], panel.check_status.text()

        window.host_runs.run_action.trigger()  # the port is open again: the check passes
        qtbot.waitUntil(lambda: len(window.plot.steps()) >= 10, timeout=RUN_TIMEOUT_MS)
        assert not asked and "✓ Ready: 2 host(s), 2 task(s)" in panel.check_status.text()
        window.host_runs.dump_action.trigger()
        qtbot.waitUntil(lambda: bool(stacks), timeout=60_000)
        qtbot.waitUntil(lambda: not window.controller.active, timeout=RUN_TIMEOUT_MS)

    blame, files = stacks[0]
    assert [file.split(": ", 1)[0] for file in files] == ["worker:0", "worker:1"]
    assert [file.split(": ", 1)[1].split(":")[0] for file in files] == hosts.addresses
    assert all(file.endswith("stacks.txt") for file in files)
    assert blame and not any("did not answer" in line for line in blame), blame
    run_dir = window.last_run_dir
    assert run_dir is not None and read_status(run_dir)["status"] == "finished"
    assert np.array_equal(window.plot.steps(), np.arange(1, STEPS + 1))
    np.testing.assert_allclose(
        window.plot.losses().astype(np.float32), np.float32(read_metrics(run_dir)["loss"])
    )
    chief = run_dir / "tasks" / "worker-0"
    assert (chief / "model.keras").is_file(), "the chief's folder came back"
    assert "stacks.txt" in {p.name for p in chief.iterdir()}
    listed = {run.path: run for run in window.runs_panel.runs()}
    assert listed[run_dir].status == "finished"
    assert "worker:0's run folder copied into" in window.log_panel.text.toPlainText()
