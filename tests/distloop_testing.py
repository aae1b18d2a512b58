"""Helpers shared by the test modules (a plain module: conftest is for fixtures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import Project
from engine.examples import example_text
from engine.messages import RunFailed, RunFinished, RunStarted, StepMetrics
from engine.process import EngineProcess

REPO = Path(__file__).resolve().parents[1]


def example_data(name: str = "seed") -> dict[str, Any]:
    return json.loads(example_text(name))


def run_engine(project: Project, run_dir: Path | None, timeout_s: float = 180) -> dict[str, Any]:
    """Runs a project in a real engine process; returns what it reported."""
    engine = EngineProcess(project, run_dir)
    engine.start()
    started, steps, losses, replicas, logs = None, [], [], [], []
    terminal = None
    try:
        import time

        deadline = time.monotonic() + timeout_s
        while not engine.done:
            assert time.monotonic() < deadline, "engine run timed out"
            for message in engine.poll(0.5):
                if isinstance(message, RunStarted):
                    started = message
                elif isinstance(message, StepMetrics):
                    steps += message.steps
                    losses += message.losses
                    if message.replica_losses is not None:
                        replicas += message.replica_losses
                elif isinstance(message, RunFinished | RunFailed):
                    terminal = message
                else:
                    logs.append(message)
    finally:
        engine.close()
    return {
        "started": started,
        "steps": steps,
        "losses": np.asarray(losses, dtype=np.float32),
        "replica_losses": np.asarray(replicas, dtype=np.float32),
        "terminal": terminal,
        "logs": logs,
        "exit_code": engine.exit_code,
    }


def distloop(*args: str, timeout_s: float = 240, **kwargs: Any) -> subprocess.CompletedProcess:
    """Runs the ``distloop`` command as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "gui.launcher", *args],
        cwd=kwargs.pop("cwd", REPO),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        **kwargs,
    )
