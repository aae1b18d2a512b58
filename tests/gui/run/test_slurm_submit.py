"""Submit to Slurm in the window (GUI unit tests: sbatch and the job are stand-ins here;
tests/engine/cluster/test_slurm.py runs the engine's submit on a real slurmctld and slurmd)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.cluster import slurm_jobs
from distloop.engine.config import Project
from distloop.engine.exports.slurm import SlurmJob
from distloop.engine.run_folder import read_status
from distloop.engine.run_history import RunSummary, slurm_jobs_root
from distloop.gui.common import dialogs
from distloop.gui.run import host_runs, slurm_dialog
from distloop.gui.run.slurm_dialog import SlurmDialog
from distloop.gui.runs.runs_model import Column
from distloop.gui.shell.main_window import MainWindow
from support.clusters import multi_worker as cluster_project
from support.distloop_testing import distloop
from support.gui_fakes import FakeSlurmRun, seed_run
from support.slurm_daemons import consecutive_free_ports, single_node_slurm

WAIT_MS = 30_000


def multi_worker(window: MainWindow) -> None:
    window.editor.strategy.fields.editors["kind"].set_value("multi_worker_mirrored")
    assert window.validation.valid, window.validation.problems


@pytest.fixture
def sbatch_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_runs.shutil, "which", lambda name: f"/usr/bin/{name}")


def test_submit_applies_to_a_cluster_where_sbatch_is_and_says_why_not(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit = window.host_runs.submit_action
    assert not submit.isEnabled() and "runs in one process" in submit.toolTip()
    multi_worker(window)
    monkeypatch.setattr(host_runs.shutil, "which", lambda _name: None)
    window.host_runs.update_actions()
    assert not submit.isEnabled() and "sbatch is not on PATH" in submit.toolTip()
    monkeypatch.setattr(host_runs.shutil, "which", lambda name: f"/usr/bin/{name}")
    window.host_runs.update_actions()
    assert submit.isEnabled() and submit.toolTip().endswith("(Ctrl+Shift+B)")


def test_a_submitted_job_is_followed_like_a_run_and_stop_is_scancel(
    qtbot, window: MainWindow, monkeypatch: pytest.MonkeyPatch, sbatch_here, tmp_path: Path
) -> None:
    asked: list[tuple[str, int, Path]] = []

    def ask(_parent: object, kind: str, tasks: int, folder: Path) -> tuple[SlurmJob, Path]:
        asked.append((kind, tasks, folder))
        return SlurmJob(nodes=2, partition="debug"), tmp_path / "job"

    submitted: list[tuple[SlurmJob, Path]] = []
    runs: list[FakeSlurmRun] = []

    def submit_job(project: Project, folder: Path, job: SlurmJob, **_kw: object) -> FakeSlurmRun:
        submitted.append((job, folder))
        runs.append(FakeSlurmRun(project, folder / "runs" / "42", seed_run()[:2]))
        return runs[-1]

    monkeypatch.setattr(slurm_dialog, "ask_slurm_job", ask)
    monkeypatch.setattr(slurm_jobs, "submit_job", submit_job)
    headlines: list[str] = []
    # After the status panel's own slot (connected first): the headline it set.
    window.host_runs.job_state.connect(
        lambda *_job: headlines.append(window.status_panel.state.full_text())
    )
    multi_worker(window)
    window.host_runs.submit_action.trigger()
    qtbot.waitUntil(lambda: window.controller.active, timeout=WAIT_MS)
    assert asked[0][:2] == ("multi_worker_mirrored", 2)
    assert asked[0][2].parent == tmp_path / "slurm-jobs"  # beside the runs folder
    assert asked[0][2].name.endswith("-seed-the-guide-s-custom-loop")  # no spaces
    assert submitted == [(SlurmJob(nodes=2, partition="debug"), tmp_path / "job")]
    assert window.last_run_dir == tmp_path / "job" / "runs" / "42"
    qtbot.waitUntil(lambda: bool(headlines), timeout=WAIT_MS)
    assert headlines[0] == "Slurm job 42: PENDING (Resources)"  # before the chief reported
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 3, timeout=WAIT_MS)
    assert not window.host_runs.submit_action.isEnabled()
    window.stop()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=WAIT_MS)
    assert runs[0].scancelled and not runs[0].fake.killed
    assert "submitted job 42" in window.log_panel.text.toPlainText()


def test_dump_stacks_of_a_job_names_the_odd_task(
    qtbot, window: MainWindow, monkeypatch: pytest.MonkeyPatch, sbatch_here, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        slurm_dialog, "ask_slurm_job", lambda *_a: (SlurmJob(nodes=2), tmp_path / "job")
    )
    monkeypatch.setattr(
        slurm_jobs,
        "submit_job",
        lambda project, folder, _job, **_kw: FakeSlurmRun(
            project, folder / "runs" / "42", seed_run()[:2]
        ),
    )
    dumped: list[tuple[Path, str]] = []

    def dump_job_stacks(run_dir: Path, job_id: str) -> list[str]:
        dumped.append((run_dir, job_id))
        return ["worker:1 did not answer: it is stopped"]

    monkeypatch.setattr(slurm_jobs, "dump_job_stacks", dump_job_stacks)
    shown: list[tuple[list[str], list[str]]] = []
    monkeypatch.setattr(
        dialogs, "show_stacks", lambda _parent, blame, files: shown.append((blame, files))
    )
    multi_worker(window)
    window.host_runs.submit_action.trigger()
    dump = window.host_runs.dump_action
    qtbot.waitUntil(dump.isEnabled, timeout=WAIT_MS)
    dump.trigger()
    qtbot.waitUntil(lambda: bool(shown), timeout=WAIT_MS)
    run_dir = tmp_path / "job" / "runs" / "42"
    assert dumped == [(run_dir, "42")]
    assert shown[0][0][0] == "worker:1 did not answer: it is stopped"
    assert shown[0][1] == [f"{run_dir}/tasks/*/stacks.txt"]
    window.stop()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=WAIT_MS)


def test_a_refused_submission_is_one_line_and_no_run(
    qtbot,
    window: MainWindow,
    monkeypatch: pytest.MonkeyPatch,
    sbatch_here,
    tmp_path: Path,
    dialog_recorder,
) -> None:
    monkeypatch.setattr(
        slurm_dialog, "ask_slurm_job", lambda *_a: (SlurmJob(nodes=2), tmp_path / "job")
    )

    def refuse(*_args: object, **_kw: object) -> None:
        raise slurm_jobs.SlurmJobError("sbatch refused the job: invalid partition specified")

    monkeypatch.setattr(slurm_jobs, "submit_job", refuse)
    multi_worker(window)
    window.host_runs.submit_action.trigger()
    qtbot.waitUntil(lambda: bool(dialog_recorder.shown), timeout=WAIT_MS)
    assert dialog_recorder.shown[0][:2] == ("error", "Cannot submit")
    assert dialog_recorder.shown[0][2].startswith("sbatch refused the job: invalid partition")
    assert not window.controller.active


def test_the_dialog_offers_submit_only_for_a_job_sbatch_would_take(qtbot, tmp_path) -> None:
    dialog = SlurmDialog("parameter_server", 4, tmp_path / "job")
    qtbot.addWidget(dialog)
    assert dialog.nodes.value() == 4 and dialog.submit_button.isEnabled()
    dialog.nodes.setValue(2)
    assert not dialog.submit_button.isEnabled()
    assert "parameter_server needs 3 tasks" in dialog.problems.text()
    dialog.nodes.setValue(3)
    dialog.time.setText("soon")
    assert not dialog.submit_button.isEnabled() and "is not a Slurm time" in dialog.problems.text()
    dialog.time.setText("1:30:00")
    dialog.partition.setText("gpu")
    assert dialog.submit_button.isEnabled()
    assert dialog.job() == SlurmJob(nodes=3, tasks_per_node=1, time="1:30:00", partition="gpu")
    assert dialog.folder() == tmp_path / "job"


def job_status(window: MainWindow) -> tuple[str, str]:
    """The Runs list's status of the window's last job, and its tooltip ("" when unlisted)."""
    model = window.runs_panel.model
    row = model.row_of(window.last_run_dir) if window.last_run_dir is not None else None
    if row is None:
        return "", ""
    return model.cell_text(row, Column.STATUS), str(model.cell_tip(row, Column.STATUS))


def slurm_answered(status: str, tip: str) -> bool:
    """Whether the row shows the state Slurm gave for the job it still holds (``RUNNING``,
    its tooltip ``Slurm job 42: RUNNING``), not the run's own status."""
    return tip.startswith("Slurm job ") and bool(status) and f": {status}" in tip


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(900)  # beyond its waits: one that runs out fails with its own line
def test_submit_to_slurm_follows_a_real_job_to_its_end(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A real single-node Slurm (munged, slurmctld, slurmd): the window's Submit runs
    sbatch, shows the job's state, plots the chief's steps from the shared folder and ends
    with the job; the Runs list shows the job with Slurm's state, then the run's end."""
    steps = 300
    with single_node_slurm(tmp_path / "slurm") as env:
        for key, value in {**env, "DISTLOOP": f"{sys.executable} -m distloop.gui.launcher"}.items():
            monkeypatch.setenv(key, value)
        job = SlurmJob(nodes=1, tasks_per_node=2, port_base=consecutive_free_ports(2))
        monkeypatch.setattr(slurm_dialog, "ask_slurm_job", lambda *_a: (job, tmp_path / "job"))
        states: list[str] = []
        window: MainWindow = make_window()
        window.host_runs.job_state.connect(lambda _model, _job, state: states.append(state))
        path = tmp_path / "project.json"
        path.write_text(json.dumps(cluster_project(steps)))
        assert window.open_project(path)
        window.host_runs.submit_action.trigger()
        qtbot.waitUntil(lambda: window.controller.active, timeout=60_000)
        # The folder chosen is outside slurm-jobs/: the Runs list finds the job all the same.
        qtbot.waitUntil(lambda: slurm_answered(*job_status(window)), timeout=60_000)
        qtbot.waitUntil(lambda: not window.controller.active, timeout=300_000)
        qtbot.waitUntil(lambda: job_status(window)[0] == "finished", timeout=60_000)
        assert job_status(window)[1].endswith(": COMPLETED")
    run_dir = window.last_run_dir
    assert run_dir is not None and run_dir.parent == tmp_path / "job" / "runs"
    assert np.array_equal(window.plot.steps(), np.arange(1, steps + 1))
    assert window.controller.model is not None
    assert window.controller.model.status == "finished"
    assert "COMPLETED" in states
    assert read_status(run_dir / "tasks" / "worker-0")["status"] == "finished"


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(900)  # beyond its waits: one that runs out fails with its own line
def test_follow_job_follows_a_real_job_submitted_from_a_shell(
    qtbot, make_window, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A job `distloop submit` started (no window followed it) shows in the Runs list with
    Slurm's state; Follow Job plots its steps from its first, and Stop is scancel."""
    with single_node_slurm(tmp_path / "slurm") as env:
        for key, value in {**env, "DISTLOOP": f"{sys.executable} -m distloop.gui.launcher"}.items():
            monkeypatch.setenv(key, value)
        path = tmp_path / "project.json"
        path.write_text(json.dumps(cluster_project(1_000_000)))  # runs until stopped
        folder = slurm_jobs_root(tmp_path / "runs") / "from-a-shell"
        submitted = distloop(
            "submit", str(path), "--out", str(folder), "--nodes", "1", "--ntasks-per-node",
            "2", "--port-base", str(consecutive_free_ports(2)), timeout_s=120,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr[-2000:]
        (run_dir,) = (folder / "runs").iterdir()
        window: MainWindow = make_window()
        panel = window.runs_panel

        def held_row() -> RunSummary | None:
            return next(
                (r for r in panel.runs() if r.job and r.job.run_dir == run_dir and r.job.held),
                None,
            )

        qtbot.waitUntil(lambda: held_row() is not None, timeout=60_000)
        row = held_row()
        assert row is not None
        panel.select_paths([row.path])
        assert panel.follow_action.isEnabled() and not panel.resume_action.isEnabled()
        panel.follow_action.trigger()
        assert window.controller.active and window.last_run_dir == run_dir
        assert not panel.follow_action.isEnabled()  # the job followed now
        qtbot.waitUntil(lambda: len(window.plot.steps()) >= 20, timeout=120_000)
        window.stop()  # scancel: every task stops at one step with a checkpoint
        qtbot.waitUntil(lambda: not window.controller.active, timeout=120_000)
    steps = window.plot.steps()
    assert np.array_equal(steps, np.arange(1, len(steps) + 1)), "from the job's first step"
    assert window.controller.model is not None
    assert window.controller.model.status == "stopped"
    assert f"following job {run_dir.name}, run folder {run_dir}" in (
        window.log_panel.text.toPlainText()
    )
