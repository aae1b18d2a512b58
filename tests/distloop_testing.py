"""Helpers shared by the test modules (a plain module: conftest is for fixtures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from distloop.engine.config import Project
from distloop.engine.examples import example_text
from distloop.engine.messages import EvalMetrics, RunFailed, RunFinished, RunStarted, StepMetrics
from distloop.engine.process import EngineProcess, WarmEngine
from distloop.engine.run_model import RunModel

REPO = Path(__file__).resolve().parents[1]


def example_data(name: str = "seed") -> dict[str, Any]:
    return json.loads(example_text(name))


def run_engine(
    project: Project,
    run_dir: Path | None,
    timeout_s: float = 180,
    *,
    resume: bool = False,
    warm: WarmEngine | None = None,
) -> dict[str, Any]:
    """Runs a project in a real engine process (``warm``, if given); returns what it reported.

    ``model`` is the run's :class:`RunModel`, fed every message as the window feeds it.
    """
    engine = EngineProcess(project, run_dir, resume=resume, warm=warm)
    engine.start()
    model = RunModel(run_dir=run_dir)
    started, steps, losses, replicas, logs = None, [], [], [], []
    named: dict[str, list[float]] = {}
    evals: list[EvalMetrics] = []
    terminal = None
    try:
        import time

        deadline = time.monotonic() + timeout_s
        while not engine.done:
            assert time.monotonic() < deadline, "engine run timed out"
            for message in engine.poll(0.5):
                model.apply(message)
                if isinstance(message, RunStarted):
                    started = message
                elif isinstance(message, StepMetrics):
                    steps += message.steps
                    losses += message.losses
                    if message.replica_losses is not None:
                        replicas += message.replica_losses
                    for name, values in (message.named_losses or {}).items():
                        named.setdefault(name, []).extend(values)
                elif isinstance(message, EvalMetrics):
                    evals.append(message)
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
        "named_losses": {name: np.asarray(v, dtype=np.float32) for name, v in named.items()},
        "evals": evals,
        "terminal": terminal,
        "logs": logs,
        "exit_code": engine.exit_code,
        "model": model,
    }


def assert_same_trace(live: RunModel, loaded: RunModel) -> None:
    """A run followed live and the same run loaded from its folder hold the same trace.

    The files keep each loss as the float32 it was (``format_loss``) and times to the
    microsecond, so that is how closely they are compared.
    """
    a, b = live.trace, loaded.trace
    assert a.steps == b.steps
    np.testing.assert_array_equal(np.float32(a.losses), np.float32(b.losses))
    np.testing.assert_allclose(a.elapsed_s, b.elapsed_s, atol=1e-6)
    ours, theirs = a.replica_losses(), b.replica_losses()
    assert (ours is None) == (theirs is None)
    if ours is not None and theirs is not None:
        np.testing.assert_array_equal(np.float32(ours), np.float32(theirs))
    assert list(a.named_losses) == list(b.named_losses)
    for name, values in a.named_losses.items():
        np.testing.assert_array_equal(np.float32(values), np.float32(b.named_losses[name]))
    assert [step for step, _ in a.evaluations] == [step for step, _ in b.evaluations]
    for (_, ours), (_, theirs) in zip(a.evaluations, b.evaluations, strict=True):
        assert list(ours) == list(theirs)
        np.testing.assert_array_equal(
            np.float32(list(ours.values())), np.float32(list(theirs.values()))
        )


def distloop(*args: str, timeout_s: float = 240, **kwargs: Any) -> subprocess.CompletedProcess:
    """Runs the ``distloop`` command as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "distloop.gui.launcher", *args],
        cwd=kwargs.pop("cwd", REPO),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        **kwargs,
    )


def synthetic_project(cpu_replicas: int, batch: int = 32, steps: int = 60, **training) -> dict:
    """Examples that all differ, shuffled, with regularization: invariance is not trivial."""
    return {
        "schema_version": 1,
        "name": f"invariance x{cpu_replicas}",
        "strategy": {"kind": "mirrored", "cpu_replicas": cpu_replicas},
        "model": {
            "input_shape": [6],
            "layers": [
                {
                    "kind": "dense",
                    "units": 16,
                    "activation": "tanh",
                    "kernel_regularizer": {"l1": 0.0, "l2": 0.001},
                },
                {"kind": "dense", "units": 3},
            ],
        },
        "optimizer": {"kind": "sgd", "learning_rate": 0.1, "momentum": 0.5},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": {
            "source": "synthetic_classification",
            "examples": 512,
            "num_classes": 3,
            "global_batch_size": batch,
            "shuffle_buffer": 512,
            "seed": 3,
        },
        "training": {"steps": steps, "seed": 5, **training},
    }


HOSTILE_TEXTS = (
    'x"""\nPWNED = 1\n"""',
    "x'''\nPWNED = 1\n'''",
    "x\\",
    "a\rPWNED = 1",
    "x\n; PWNED=1 #",
    "$(PWNED) `PWNED` ; PWNED",
    "tab\there\x00nul\x1b[31m",
    "line\u2028sep\u2029para\x85next",
    "bidi \u202eDENWP\u202c",
    "\\N{BOGUS} \\x \\u12",
    "{PWNED} %(PWNED)s",
)
"""Texts that end a docstring, a string, a comment or a line, or start a shell expansion, if
a generator writes them raw: each holds ``PWNED`` where code would be, for the tests to find."""


def model_run_folder(folder: Path, data: dict[str, Any]) -> Path:
    """A finished run's folder with an untrained model.keras of ``data``'s model: what
    prediction reads, made in seconds instead of by a run (imports TensorFlow)."""
    from distloop.engine.config import load_project_data
    from distloop.engine.tf.model import build_model

    project = load_project_data(data)
    folder.mkdir(parents=True)
    (folder / "project.json").write_text(project.to_json())
    build_model(project.model, 0).save(folder / "model.keras")
    return folder
