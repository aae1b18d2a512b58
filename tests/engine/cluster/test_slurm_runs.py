"""The window's Slurm jobs as rows of the runs list: read from the job folders, their state
asked of Slurm's commands (stand-in scripts on PATH here; tests/gui/run/test_slurm_submit.py asks
a real slurmctld)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from distloop.engine.cluster import slurm_jobs, slurm_runs
from distloop.engine.cluster.slurm_jobs import SlurmRun
from distloop.engine.cluster.slurm_runs import (
    ELSEWHERE_FILE,
    is_job_run,
    list_jobs,
    remember_job,
    summarize_job,
    with_job_state,
)
from distloop.engine.config import Project
from distloop.engine.message_stream import write_message
from distloop.engine.messages import Message, RunFailed, RunFinished, RunStarted, StepMetrics
from distloop.engine.run_folder import MESSAGES_FILE, update_status
from distloop.engine.run_history import (
    INTERRUPTED,
    SUBMITTED,
    list_runs,
    slurm_jobs_root,
)
from support.distloop_testing import synthetic_project
from support.slurm_jobs import chief_started, fake_job, fake_slurm


def shows(state: str, reason: str = "None") -> str:
    """What ``scontrol show job -o`` prints of a job in ``state``."""
    return f"echo 'JobId=42 JobName=seed JobState={state} Reason={reason} Restarts=0'"


def test_the_window_s_jobs_live_beside_its_runs_folder_never_in_it(tmp_path: Path) -> None:
    assert slurm_jobs_root(tmp_path / "runs") == tmp_path / "slurm-jobs"
    fake_job(slurm_jobs_root(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()
    assert list_runs(tmp_path / "runs") == []  # a job's folder is not a run folder


def test_a_job_is_submitted_until_its_chief_starts_then_reads_as_the_chief(tmp_path: Path) -> None:
    run_dir = fake_job(tmp_path)
    (run_dir.parent.parent / "runs" / "7").mkdir()  # no record of submit's: not a job's run
    [row] = list_jobs(tmp_path)
    assert row.status == SUBMITTED and row.name == "seed (Slurm job 42)"
    assert row.path == run_dir / "tasks" / "worker-0" and row.steps == 0
    assert row.job is not None and row.job.run_dir == run_dir and row.job.job_id == "42"
    assert row.started_at is not None  # when it was submitted: it sorts among the others
    chief_started(run_dir)
    [row] = list_jobs(tmp_path)
    assert (row.status, row.steps, row.final_loss) == ("running", 3, 1.5)
    assert row.name == "seed (Slurm job 42)"  # the job's, not the task folder's
    assert is_job_run(run_dir) and not is_job_run(row.path)


def test_a_parameter_server_job_reads_its_chief_task(tmp_path: Path) -> None:
    run_dir = fake_job(tmp_path, kind="parameter_server")
    chief_started(run_dir, "finished", task="chief-0")
    assert summarize_job(run_dir).path == run_dir / "tasks" / "chief-0"
    assert summarize_job(run_dir).status == "finished"


def test_a_name_the_user_gave_the_run_wins_over_the_job_s(tmp_path: Path) -> None:
    run_dir = fake_job(tmp_path)
    update_status(chief_started(run_dir), name="wide batch")
    assert summarize_job(run_dir).name == "wide batch"


@pytest.mark.parametrize(
    ("state", "reason", "status"),
    [("PENDING", "Resources", "PENDING (Resources)"), ("RUNNING", "None", "RUNNING")],
)
def test_a_job_slurm_holds_shows_slurm_s_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str, reason: str, status: str
) -> None:
    run_dir = fake_job(tmp_path / "jobs")
    chief_started(run_dir, "stopped")  # a requeued job's chief, waiting to resume by itself
    fake_slurm(tmp_path, monkeypatch, shows(state, reason))
    row = with_job_state(summarize_job(run_dir))
    assert row.status == state
    assert row.job is not None and row.job.held and row.job.note == f"Slurm job 42: {status}"


def test_an_ended_job_shows_its_run_s_own_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped = fake_job(tmp_path / "a")
    chief_started(stopped, "stopped")
    killed = fake_job(tmp_path / "b")
    chief_started(killed, "running")  # its node died: nothing recorded the end
    never = fake_job(tmp_path / "c")
    fake_slurm(tmp_path, monkeypatch, shows("CANCELLED"))
    rows = {path: with_job_state(summarize_job(path)) for path in (stopped, killed, never)}
    assert [row.status for row in rows.values()] == ["stopped", INTERRUPTED, "CANCELLED"]
    assert all(row.job is not None and not row.job.held for row in rows.values())
    assert rows[stopped].job is not None and rows[stopped].job.note == "Slurm job 42: CANCELLED"
    assert rows[never].job is not None
    assert rows[never].job.note == "Slurm job 42: CANCELLED before any task started"


def test_a_job_the_controller_forgot_is_asked_of_accounting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = fake_job(tmp_path / "jobs")
    chief_started(run_dir, "finished")
    fake_slurm(
        tmp_path,
        monkeypatch,
        "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1",
        "echo 'COMPLETED'",
    )
    row = with_job_state(summarize_job(run_dir))
    assert row.status == "finished" and row.job is not None
    assert row.job.note == "Slurm job 42: COMPLETED"


def test_no_slurm_here_keeps_the_run_s_status_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = fake_job(tmp_path / "jobs")
    chief_started(run_dir, "stopped")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    row = with_job_state(summarize_job(run_dir))
    assert row.status == "stopped" and row.job is not None and not row.job.held
    assert row.job.note.startswith("Slurm not asked: scontrol is not on PATH")


def test_a_controller_that_does_not_answer_holds_a_row_for_moments_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = fake_job(tmp_path / "jobs")
    chief_started(run_dir, "stopped")
    fake_slurm(tmp_path, monkeypatch, "exec sleep 30")
    monkeypatch.setattr(slurm_runs, "STATE_TIMEOUT_S", 0.5)
    began = time.monotonic()
    row = with_job_state(summarize_job(run_dir))
    assert time.monotonic() - began < 5
    assert row.status == "stopped" and row.job is not None
    assert row.job.note == "Slurm not asked: scontrol did not answer in 0.5 s: is slurmctld up?"


def test_a_job_folder_chosen_elsewhere_is_listed_once(tmp_path: Path) -> None:
    jobs_root = tmp_path / "slurm-jobs"
    inside = fake_job(jobs_root, "7", name="inside")
    elsewhere = fake_job(tmp_path / "shared", "42")
    for _ in range(2):
        remember_job(jobs_root, elsewhere.parent.parent)
        remember_job(jobs_root, inside.parent.parent)
    assert (jobs_root / ELSEWHERE_FILE).read_text() == f"{elsewhere.parent.parent}\n"
    assert sorted(row.job.run_dir for row in list_jobs(jobs_root) if row.job) == [
        elsewhere,
        inside,
    ]
    assert list_jobs(tmp_path / "none") == []


def test_a_job_folder_with_a_broken_project_is_still_listed(tmp_path: Path) -> None:
    run_dir = fake_job(tmp_path)
    (run_dir.parent.parent / "project.json").write_text("{not json")
    [row] = list_jobs(tmp_path)
    assert row.name == "job (Slurm job 42)" and row.status == SUBMITTED


STARTED = RunStarted(
    strategy="MultiWorkerMirroredStrategy",
    num_replicas=2,
    devices=["CPU:0"],
    tensorflow_version="2.21",
)
STEPS = StepMetrics(steps=[1, 2, 3], losses=[3.0, 2.0, 1.5], elapsed_s=[0.5, 1.0, 1.5])


@pytest.mark.parametrize(
    ("state", "chief_said", "ending"),
    [
        (  # scancel'd while its tasks ran: stopped at the chief's last step, from a checkpoint
            "CANCELLED",
            [STARTED, STEPS],
            RunFinished(status="stopped", last_step=3, final_loss=1.5, elapsed_s=1.5, killed=True),
        ),
        (  # cancelled before the first step: nothing was killed that had trained
            "CANCELLED",
            [STARTED],
            RunFinished(status="stopped", last_step=0, final_loss=None, elapsed_s=0.0),
        ),
    ],
)
def test_a_job_that_ended_without_its_chief_s_last_message_ends_its_follower(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    state: str,
    chief_said: list[Message],
    ending: RunFinished,
) -> None:
    """The follower reads the chief's steps and takes the job's end for the run's own end."""
    run = _followed_job(tmp_path, monkeypatch, state, chief_said)
    assert _follow(run)[-1] == ending


def test_a_job_that_failed_without_its_chief_s_last_message_names_its_last_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _followed_job(tmp_path, monkeypatch, "NODE_FAIL", [STARTED, STEPS])
    failure = _follow(run)[-1]
    assert isinstance(failure, RunFailed) and failure.error_type == "SlurmJobEnded"
    assert failure.last_step == 3 and "job 42 ended NODE_FAIL" in failure.message


def _followed_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str, chief_said: list[Message]
) -> SlurmRun:
    """A job Slurm says has ended, whose chief wrote ``chief_said`` and no last message."""
    run_dir = fake_job(tmp_path / "jobs")
    chief = run_dir / "tasks" / "worker-0"
    chief.mkdir(parents=True)
    with (chief / MESSAGES_FILE).open("w") as record:
        for message in chief_said:
            write_message(message, record)
    fake_slurm(tmp_path, monkeypatch, shows(state))
    monkeypatch.setattr(slurm_jobs, "SETTLE_S", 0.0)
    project = Project.model_validate(synthetic_project(1))
    return SlurmRun(project, run_dir, "42", run_dir.parent.parent)


def _follow(run: SlurmRun) -> list[Message]:
    run.start()
    said: list[Message] = []
    deadline = time.monotonic() + 120
    while not run.done and time.monotonic() < deadline:
        said += run.poll(0.2)
    run.close()
    assert run.done, said
    return said
