"""The run history: summaries from run folders, newest first, rename and delete."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from distloop_testing import run_engine

from engine.examples import load_example
from engine.run_folder import MetricsWriter, write_status
from engine.run_history import delete_run, list_runs, rename_run, summarize


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


def test_runs_are_listed_newest_first_with_their_numbers(tmp_path) -> None:
    fake_run(tmp_path, "old", 100.0, [3.0, 2.0, 2.5])
    fake_run(tmp_path, "new", 200.0, [1.0, 0.5], status="stopped")
    (tmp_path / "not-a-run").mkdir()
    runs = list_runs(tmp_path)
    assert [r.name for r in runs] == ["new", "old"]
    old = runs[1]
    assert (old.steps, old.final_loss, old.best_loss) == (3, 2.5, 2.0)
    assert (old.strategy, old.num_replicas, old.status) == ("MirroredStrategy", 2, "finished")
    assert old.duration_s is not None and old.duration_s >= 0
    assert runs[0].status == "stopped"


def test_a_crashed_half_written_run_still_summarizes(tmp_path) -> None:
    run_dir = fake_run(tmp_path, "crashed", 1.0, [1.0, 0.9])
    with (run_dir / "metrics.csv").open("a") as handle:
        handle.write("3,0.8")  # the line a SIGKILL cut short
    (run_dir / "status.json").write_text("{broken")
    summary = summarize(run_dir)
    assert (summary.steps, summary.status) == (2, "unknown")


def test_rename_and_delete(tmp_path) -> None:
    run_dir = fake_run(tmp_path, "a", 1.0, [1.0])
    rename_run(run_dir, "  baseline, lr 0.01 ")
    assert summarize(run_dir).name == "baseline, lr 0.01"
    rename_run(run_dir, "")
    assert summarize(run_dir).name == "a"
    with pytest.raises(ValueError, match="not a run folder"):
        delete_run(tmp_path)
    delete_run(run_dir)
    assert list_runs(tmp_path) == []


def test_errors_are_cleared_when_a_failed_run_is_resumed(tmp_path) -> None:
    run_dir = fake_run(tmp_path, "r", 1.0, [1.0], status="failed")
    write_status(run_dir, "failed", error="boom", error_type="X")
    assert summarize(run_dir).error == "boom"
    write_status(run_dir, "finished")
    assert summarize(run_dir).error is None
    assert summarize(run_dir).strategy == "MirroredStrategy"


@pytest.mark.slow
def test_a_real_run_is_summarized_from_its_folder(tmp_path) -> None:
    run = run_engine(load_example("seed"), tmp_path / "seed")
    (summary,) = list_runs(tmp_path)
    assert summary.name == load_example("seed").name
    assert (summary.steps, summary.status) == (100, "finished")
    assert summary.strategy == "MirroredStrategy" and summary.num_replicas == 1
    assert summary.final_loss == pytest.approx(float(run["losses"][-1]))


def test_a_running_run_whose_processes_are_gone_is_interrupted(tmp_path) -> None:
    """The CLI or the window SIGKILLed: status.json says running for ever, the list does not."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir = fake_run(tmp_path, "r", 1.0, [1.0], status="running")
    here = socket.gethostname()
    write_status(run_dir, "running", pid=dead.pid, owner_pid=dead.pid, host=here)
    assert summarize(run_dir).status == "interrupted"
    write_status(run_dir, "running", owner_pid=os.getpid())  # its owner still runs it
    assert summarize(run_dir).status == "running"
    write_status(run_dir, "running", owner_pid=dead.pid, host=f"not-{here}")
    assert summarize(run_dir).status == "running"  # another machine's: cannot tell
    cluster = fake_run(tmp_path, "c", 1.0, [1.0], status="running")
    write_status(cluster, "running", tasks={"worker:0": {"pid": dead.pid}})
    assert summarize(cluster).status == "interrupted"
    write_status(cluster, "stopped")
    assert summarize(cluster).status == "stopped"
