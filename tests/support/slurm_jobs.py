"""Stand-ins for Slurm's commands (scripts on PATH) and a job's folders, for tests of
the job follower and the Runs list that need no Slurm daemons."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from distloop.engine.run_folder import update_status

from .run_folders import fake_run


def fake_job(
    jobs_root: Path, job_id: str = "42", kind: str = "multi_worker_mirrored", name: str = "seed"
) -> Path:
    """A job folder as Submit to Slurm leaves it once sbatch answered: the job's run folder."""
    folder = jobs_root / f"20261205-120000-{name}"
    folder.mkdir(parents=True)
    (folder / "project.json").write_text(json.dumps({"name": name, "strategy": {"kind": kind}}))
    run_dir = folder / "runs" / job_id
    run_dir.mkdir(parents=True)
    update_status(run_dir, slurm={"job": job_id, "folder": str(folder), "messages_from": 0})
    return run_dir


def chief_started(run_dir: Path, status: str = "running", task: str = "worker-0") -> Path:
    """The chief's task folder once it took three steps (its project says its own name)."""
    return fake_run(run_dir / "tasks", task, time.time(), [3.0, 2.0, 1.5], status=status)


def fake_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scontrol: str, sacct: str = "exit 1"
) -> None:
    """``scontrol`` and ``sacct`` as shell scripts ahead of any real ones on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in {"scontrol": scontrol, "sacct": sacct}.items():
        script = folder / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
