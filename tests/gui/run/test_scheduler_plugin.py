"""A batch system is a plug-in: a scheduler defined wholly in this module, registered by name
and nothing else, has its jobs listed in the window's Runs list and followed by Follow Job
and by ``distloop submit --follow``, as Slurm's are (``engine.cluster.scheduler``).

Its "batch system" runs each job as a local subprocess that writes the chief's messages
into the job's run folder, step by step, until it has taken its steps or is cancelled.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.cli import main
from distloop.engine.cluster.scheduler import SCHEDULERS, JobState, SchedulerError
from distloop.engine.config import Project
from distloop.engine.message_stream import read_message
from distloop.engine.messages import Log, Message, RunFailed, RunFinished
from distloop.engine.project_file import load_project, load_project_data
from distloop.engine.run_folder import read_status, update_status
from distloop.engine.run_history import RunSummary, SubmittedJob, summarize
from distloop.gui.shell.main_window import MainWindow
from support.clusters import multi_worker

NAME = "localbatch"
WAIT_MS = 60_000
JOB_SCRIPT = """
import signal, sys, time
from distloop.engine.message_stream import write_message
from distloop.engine.messages import RunFinished, RunStarted, StepMetrics
path, steps = sys.argv[1], int(sys.argv[2])
cancelled = []
signal.signal(signal.SIGTERM, lambda *_: cancelled.append(True))
with open(path, "a", encoding="utf-8") as out:
    write_message(RunStarted(strategy="MultiWorkerMirroredStrategy", num_replicas=2,
                             devices=["/cpu:0"], tensorflow_version="local"), out)
    step = 0
    while not cancelled and (steps == 0 or step < steps):
        step += 1
        write_message(StepMetrics(steps=[step], losses=[1 / step], elapsed_s=[step / 50]), out)
        time.sleep(0.02)
    write_message(RunFinished(status="stopped" if cancelled else "finished", last_step=step,
                              final_loss=1 / step, elapsed_s=step / 50), out)
"""


@dataclass(frozen=True)
class LocalState:
    state: str

    @property
    def ended(self) -> bool:
        return self.state != "RUNNING"

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    def __str__(self) -> str:
        return self.state


class LocalJob:
    """A job followed as one run: its messages file read as it grows, its state asked."""

    def __init__(self, scheduler: LocalBatch, project: Project, run_dir: Path, job_id: str):
        self.project, self.run_dir, self.job_id = project, run_dir, job_id
        self.detached = False
        self.on_state = None
        self._scheduler = scheduler
        self._read_to = 0
        self._started = self._done = False
        self._said: str | None = None

    @property
    def done(self) -> bool:
        return self._done

    def start(self) -> None:
        self._started = True

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        deadline = time.monotonic() + timeout_s
        while self._started and not self._done:
            out: list[Message] = []
            state = self._scheduler.state(self.job_id, timeout_s=1)
            if str(state) != self._said:
                self._said = str(state)
                out.append(Log(text=f"job {self.job_id}: {state}"))
                if self.on_state is not None:
                    self.on_state(state)
            out += self._read()
            self._done = any(isinstance(m, RunFinished | RunFailed) for m in out)
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(0.02)
        return []

    def _read(self) -> list[Message]:
        try:
            with (self.run_dir / "messages.jsonl").open("rb") as stream:
                stream.seek(self._read_to)
                text = stream.read()
        except FileNotFoundError:
            return []
        lines = text[: text.rfind(b"\n") + 1]
        self._read_to += len(lines)
        return [read_message(line) for line in lines.splitlines()]

    def request_stop(self) -> None:
        self._scheduler.cancel(self.job_id)

    def kill(self) -> None:
        self.detached = self._done = True

    def stop(self, grace_s: float = 5.0) -> None:
        self.request_stop()
        deadline = time.monotonic() + grace_s
        while not self._done and time.monotonic() < deadline:
            self.poll(0.2)
        self.kill()

    def close(self) -> None:
        """The job is the batch system's: nothing here to release."""


class LocalBatch:
    """A batch system of local subprocesses, one a job, in job folders beside the runs."""

    name = NAME
    title = "Local batch"

    def __init__(self) -> None:
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def submit(
        self, project: Project, job_folder: Path, shape: int, *, base_dir: Path | None = None
    ) -> LocalJob:
        """``shape``: how many steps the job takes (0: until it is cancelled)."""
        job_id = str(len(self.processes) + 1)
        run_dir = job_folder / "runs" / job_id
        run_dir.mkdir(parents=True)
        (job_folder / "project.json").write_text(project.to_json())
        update_status(run_dir, **{NAME: {"job": job_id}})
        self.processes[job_id] = subprocess.Popen(
            [sys.executable, "-c", JOB_SCRIPT, str(run_dir / "messages.jsonl"), str(shape)]
        )
        return LocalJob(self, project, run_dir, job_id)

    def resubmit(self, run_dir: Path) -> LocalJob:
        raise SchedulerError("a local batch job does not resume")

    def follow(self, run_dir: Path) -> LocalJob:
        job_id = self.job_of(run_dir)
        if job_id is None:
            raise SchedulerError(f"{run_dir} is no local batch job's")
        return LocalJob(self, self.project_of(run_dir), run_dir, job_id)

    def job_of(self, run_dir: Path) -> str | None:
        try:
            return read_status(run_dir).get(NAME, {}).get("job")
        except (OSError, ValueError):
            return None

    def state(self, job_id: str, *, timeout_s: float) -> JobState:
        process = self.processes.get(job_id)
        if process is None:
            return LocalState("UNKNOWN")
        code = process.poll()
        return LocalState("RUNNING" if code is None else "COMPLETED" if code == 0 else "FAILED")

    def cancel(self, job_id: str) -> None:
        self.processes[job_id].terminate()

    def dump_stacks(self, run_dir: Path, job_id: str) -> list[str]:
        raise SchedulerError("a local batch job keeps no stacks")

    def project_of(self, run_dir: Path) -> Project:
        return load_project(run_dir.parent.parent / "project.json")

    def jobs_root(self, runs_root: Path) -> Path:
        return runs_root.parent / "local-batch-jobs"

    def list_jobs(self, runs_root: Path, *, scan: bool = True) -> list[RunSummary]:
        found = sorted(self.jobs_root(runs_root).glob("*/runs/*"))
        return [self.summarize(run_dir, scan=scan) for run_dir in found]

    def summarize(self, run_dir: Path, *, scan: bool = True) -> RunSummary:
        job_id = self.job_of(run_dir) or "?"
        name = f"{self.project_of(run_dir).name} ({self.title} job {job_id})"
        summary = summarize(run_dir, scan=scan, name=name)
        return replace(summary, job=SubmittedJob(run_dir, job_id))

    def with_state(self, summary: RunSummary) -> RunSummary:
        assert summary.job is not None
        state = self.state(summary.job.job_id, timeout_s=1)
        job = replace(summary.job, held=not state.ended, note=f"{self.title}: {state}")
        return replace(summary, status=state.state, job=job)

    def remember(self, runs_root: Path, run_dir: Path) -> None:
        """Its jobs are always in :meth:`jobs_root`."""


SCHEDULER = LocalBatch()


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalBatch]:
    """This module is the scheduler's registration: its name and nothing else."""
    monkeypatch.setitem(SCHEDULERS, NAME, __name__)
    yield SCHEDULER
    for process in SCHEDULER.processes.values():
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()
    SCHEDULER.processes.clear()


def test_the_runs_list_shows_a_plug_in_scheduler_s_job_and_follow_job_follows_it(
    qtbot, make_window, registered: LocalBatch, tmp_path: Path
) -> None:
    project = load_project_data(multi_worker(20))
    job = registered.submit(project, registered.jobs_root(tmp_path / "runs") / "job", 0)
    window: MainWindow = make_window()
    panel = window.runs_panel

    def held() -> RunSummary | None:
        return next((r for r in panel.runs() if r.job and r.job.held), None)

    qtbot.waitUntil(lambda: held() is not None, timeout=WAIT_MS)
    row = held()
    assert row is not None and row.job is not None and row.job.run_dir == job.run_dir
    assert row.name == f"{project.name} (Local batch job 1)" and row.status == "RUNNING"
    panel.select_paths([row.path])
    assert panel.follow_action.isEnabled()
    panel.follow_action.trigger()
    assert window.controller.active and window.last_run_dir == job.run_dir
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 20, timeout=WAIT_MS)
    window.stop()  # the scheduler cancels the job: its chief says it stopped
    qtbot.waitUntil(lambda: not window.controller.active, timeout=WAIT_MS)
    steps = window.plot.steps()
    assert np.array_equal(steps, np.arange(1, len(steps) + 1))
    assert window.controller.model is not None and window.controller.model.status == "stopped"
    assert registered.processes["1"].wait(timeout=30) == 0


def test_distloop_submit_follows_a_plug_in_scheduler_s_job_and_says_what_it_refuses(
    registered: LocalBatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = load_project_data(multi_worker(20))
    job = registered.submit(project, tmp_path / "job", 30)
    assert main(["submit", "--follow", str(job.run_dir)]) == 0
    printed = capsys.readouterr()
    steps = [f"step={n} loss={np.float32(1 / n)!s}" for n in range(1, 31)]
    assert printed.out.splitlines() == steps
    assert "distloop: job 1: RUNNING" in printed.err
    assert "distloop: finished after step 30" in printed.err
    assert main(["submit", "--resume", str(job.run_dir)]) != 0
    assert capsys.readouterr().err.strip() == "distloop: a local batch job does not resume"
