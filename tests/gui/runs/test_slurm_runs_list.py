"""The window's Slurm jobs in its Runs list (Slurm's commands are stand-in scripts here;
tests/gui/run/test_slurm_submit.py's last test asks a real slurmctld)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from distloop.engine.cluster import slurm_jobs
from distloop.engine.run_history import slurm_jobs_root
from distloop.gui.runs.runs_model import Column
from distloop.gui.runs.runs_panel import RunsPanel
from distloop.gui.shell.main_window import MainWindow
from support.gui_fakes import seed_run
from support.clusters import multi_worker
from support.run_folders import fake_run
from support.slurm_jobs import chief_started
from support.slurm_jobs import fake_job
from support.slurm_jobs import fake_slurm
from support.gui_fakes import FakeSlurmRun

WAIT_MS = 30_000


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A stopped job's run folder where the window's Submit to Slurm puts jobs."""
    run_dir = fake_job(slurm_jobs_root(tmp_path / "runs"), name="cluster")
    (run_dir.parent.parent / "project.json").write_text(json.dumps(multi_worker(20)))
    chief_started(run_dir, "stopped")
    return run_dir


@pytest.fixture
def slurm_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file whose line ``scontrol show job`` prints: the test changes the job's state."""
    said = tmp_path / "scontrol-says"
    said.write_text("JobId=42 JobState=RUNNING Reason=None Restarts=0\n")
    fake_slurm(tmp_path, monkeypatch, f"cat {said}")
    return said


def status_of(panel: RunsPanel, run_dir: Path) -> tuple[str, str]:
    """The job's row's status and its tooltip."""
    row = panel.model.row_of(run_dir)
    assert row is not None, [run.path for run in panel.model.runs()]
    return panel.model.cell_text(row, Column.STATUS), str(panel.model.cell_tip(row, Column.STATUS))


def test_a_job_slurm_holds_shows_its_state_and_cannot_be_resumed_until_it_ends(
    qtbot, job: Path, slurm_says: Path, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    panel = window.runs_panel
    qtbot.waitUntil(lambda: status_of(panel, job)[0] == "RUNNING", timeout=WAIT_MS)
    assert status_of(panel, job)[1] == "Slurm job 42: RUNNING"
    assert panel.runs()[0].name == "cluster test (Slurm job 42)"
    assert panel.runs()[0].steps == 3  # the chief's metrics
    panel.select_paths([job])
    assert not panel.resume_action.isEnabled()
    assert "Slurm still holds the job (Slurm job 42: RUNNING)" in panel.resume_action.toolTip()
    assert panel.follow_action.isEnabled()  # test_slurm_submit.py follows a real one

    slurm_says.write_text("JobId=42 JobState=CANCELLED Reason=None Restarts=0\n")
    panel.refresh()
    assert status_of(panel, job)[0] == "RUNNING"  # until Slurm is asked again
    qtbot.waitUntil(lambda: status_of(panel, job)[0] == "stopped", timeout=WAIT_MS)
    assert status_of(panel, job)[1] == "Slurm job 42: CANCELLED"
    assert panel.resume_action.isEnabled()
    assert "Slurm" not in panel.resume_action.toolTip()
    assert not panel.follow_action.isEnabled()  # an ended job has nothing more to follow
    assert panel.follow_action.toolTip().startswith("Not now: select a job Slurm still holds")

    resubmitted: list[Path] = []

    def resubmit_job(run_dir: Path) -> FakeSlurmRun:
        resubmitted.append(run_dir)
        return FakeSlurmRun(slurm_jobs.job_project(run_dir), run_dir, seed_run()[:2])

    monkeypatch.setattr(slurm_jobs, "resubmit_job", resubmit_job)
    panel.resume_action.trigger()
    qtbot.waitUntil(lambda: window.controller.active, timeout=WAIT_MS)
    assert resubmitted == [job]
    assert window.last_run_dir == job
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 3, timeout=WAIT_MS)
    assert not panel.resume_action.isEnabled()  # the run going on now
    window.stop()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=WAIT_MS)


def test_a_job_s_row_is_not_deleted_and_says_where_its_folder_is(
    qtbot,
    window: MainWindow,
    monkeypatch: pytest.MonkeyPatch,
    job: Path,
    slurm_says: Path,
    dialog_recorder,
    tmp_path: Path,
) -> None:
    slurm_says.write_text("JobId=42 JobState=COMPLETED Reason=None Restarts=0\n")
    fake_run(tmp_path / "runs", "plain", 100.0, [1.0])
    panel = window.runs_panel
    panel.refresh()
    qtbot.waitUntil(lambda: status_of(panel, job)[0] == "stopped", timeout=WAIT_MS)
    asked: list[list[str]] = []
    monkeypatch.setattr(
        panel, "confirm_delete", lambda runs: asked.append([run.name for run in runs]) or True
    )
    panel.select_paths([job, tmp_path / "runs" / "plain"])
    panel.delete_action.trigger()
    assert dialog_recorder.shown[0][:2] == ("error", "Slurm jobs are not deleted here")
    assert f"cluster test (Slurm job 42): {job.parent.parent}" in dialog_recorder.shown[0][2]
    assert "not a run folder" not in dialog_recorder.shown[0][2]
    assert asked == [["plain"]]  # the other run is deleted as ever
    assert job.is_dir() and not (tmp_path / "runs" / "plain").exists()
    assert [run.path for run in panel.runs()] == [job / "tasks" / "worker-0"]


def test_without_slurm_here_a_job_shows_its_run_s_status_and_why(
    qtbot, window: MainWindow, monkeypatch: pytest.MonkeyPatch, job: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))
    panel = window.runs_panel
    panel.refresh()
    qtbot.waitUntil(lambda: "Slurm not asked" in status_of(panel, job)[1], timeout=WAIT_MS)
    status, tip = status_of(panel, job)
    assert status == "stopped"
    assert tip.startswith("Slurm not asked: scontrol is not on PATH")
    panel.select_paths([job])
    assert panel.resume_action.isEnabled()  # Resume asks Slurm itself, and says so if it cannot
