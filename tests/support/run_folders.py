"""Run folders as the engine leaves them, written without TensorFlow (finished,
with a model or not, millions of metrics rows), and the quick real runs the folder-safety
tests start."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from distloop.engine.examples import load_example
from distloop.engine.run_folder import (
    LOCK_FILE,
    MetricsWriter,
    write_status,
)

from .distloop_testing import (
    REPO,
    synthetic_project,
)


def fake_run(root, name: str, started: float, losses: list[float], status: str = "finished"):
    """A run folder as the engine leaves it, written without TensorFlow."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / "project.json").write_text(
        json.dumps({"name": name, "strategy": {"kind": "mirrored"}})
    )
    writer = MetricsWriter(run_dir / "metrics.csv", None)
    steps = list(range(1, len(losses) + 1))
    writer.write(steps, losses, [0.5 * s for s in steps])
    writer.close()
    write_status(
        run_dir, "running", started_at=started, strategy="MirroredStrategy", num_replicas=2
    )
    write_status(run_dir, status, last_step=len(losses))
    return run_dir


def big_metrics(path: Path, rows: int) -> None:
    """``rows`` rows of metrics.csv, written a block at a time (seconds for millions)."""
    with path.open("w", encoding="utf-8") as out:
        out.write("step,loss,elapsed_s\n")
        block = 100_000
        for start in range(1, rows + 1, block):
            steps = range(start, min(start + block, rows + 1))
            out.write("".join(f"{s},{1.0 + (s % 97) / 97:.7g},{s * 1e-3:.6f}\n" for s in steps))


def run_folder(root: Path, name: str, *, model: bool, started_at: float | None = None) -> Path:
    """A finished run's folder as the engine leaves it, with or without its model."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / "project.json").write_text(load_example("seed").to_json(), encoding="utf-8")
    write_status(run_dir, "finished", started_at=started_at or time.time(), last_step=40)
    if model:
        (run_dir / "model.keras").write_bytes(b"a model")
        record = {"step": 30, "selected": "best_val_loss", "val_loss": 0.25}
        (run_dir / "model.json").write_text(json.dumps(record))
        (run_dir / "confusion.json").write_text(json.dumps(CONFUSION))
    return run_dir


def distloop_quick(*args: str) -> subprocess.CompletedProcess:
    """A ``distloop`` command that must be refused before TensorFlow starts (seconds, not ten)."""
    began = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "distloop.gui.launcher", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - began < 10, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result


def tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its content (lock files aside): what must stay untouched."""
    return {
        str(p.relative_to(folder)): p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_FILE
    }


def multi_worker_run_folder(root: Path) -> Path:
    """A stopped two-worker cluster run as the launcher leaves it, written without TensorFlow."""
    data = synthetic_project(1, steps=20)
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {
        "cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
        "task": {"type": "worker", "index": 0},
    }
    run_dir = root / "cluster"
    for folder in (run_dir, run_dir / "tasks" / "worker-0", run_dir / "tasks" / "worker-1"):
        folder.mkdir(parents=True)
        (folder / "project.json").write_text(json.dumps(data))
        write_status(folder, "stopped", last_step=10)
    chief = run_dir / "tasks" / "worker-0" / "checkpoints"
    chief.mkdir()
    (chief / "checkpoint").write_text('model_checkpoint_path: "ckpt-10"\n')
    return run_dir


CONFUSION = {"step": 30, "classes": ["cat", "dog"], "matrix": [[8, 2], [1, 9]], "examples": 20}
