"""How `distloop run` ends when it is asked to: Ctrl-C, SIGTERM, twice, before the first step.

Every test drives a real ``distloop run`` process with real signals.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from distloop.engine.run_folder import read_status
from distloop.engine.run_history import summarize
from support.distloop_testing import REPO, example_data

pytestmark = pytest.mark.slow


@contextmanager
def distloop_run(project: dict, tmp_path: Path, *args: str) -> Iterator[subprocess.Popen]:
    """``distloop run`` of ``project`` into ``tmp_path / "run"``, killed if a test leaves it."""
    path = tmp_path / "project.json"
    path.write_text(json.dumps(project))
    command = ["run", str(path), "--out", str(tmp_path / "run"), *args]
    process = subprocess.Popen(
        [sys.executable, "-m", "distloop.gui.launcher", *command],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def wait_for_line(stream, text: str) -> None:
    for line in stream:
        if text in line:
            return
    raise AssertionError(f"the process ended before printing {text!r}")


def long_seed() -> dict:
    data = example_data()
    data["training"] = {"steps": 10**6, "seed": 0}
    return data


def test_sigterm_stops_like_ctrl_c_with_a_checkpoint_and_exit_143(tmp_path) -> None:
    with distloop_run(long_seed(), tmp_path) as run:
        wait_for_line(run.stdout, "step=20 ")
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=60)
    assert run.returncode == 143, err
    assert "SIGTERM: stopping after the current step" in err
    status = read_status(tmp_path / "run")
    assert status["status"] == "stopped" and status["owner_pid"] == run.pid
    step = status["last_step"]
    assert f"distloop: stopped after step {step}," in err
    assert (tmp_path / "run" / "checkpoints" / f"ckpt-{step}.index").is_file()
    assert summarize(tmp_path / "run").status == "stopped"
    # A stopped run leaves its model too: the weights of its last step.
    record = json.loads((tmp_path / "run" / "model.json").read_text())
    assert record == {"step": step, "selected": "last_step"}
    assert (tmp_path / "run" / "model.keras").is_file()


def test_a_second_ctrl_c_kills_and_the_run_is_stopped_not_failed(tmp_path) -> None:
    with distloop_run(long_seed(), tmp_path) as run:
        wait_for_line(run.stderr, "run folder")
        run.send_signal(signal.SIGINT)
        time.sleep(0.3)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=30)
    assert run.returncode == 130, err
    assert "Ctrl-C again: killing the engine" in err
    assert "distloop: stopped (killed on request) after step 0" in err
    assert "SIGKILL" not in err and "failed" not in err
    assert read_status(tmp_path / "run")["status"] == "stopped"


def test_stop_while_a_cluster_peer_never_starts(tmp_path) -> None:
    """Worker 0 waits inside TensorFlow for worker 1: it says so, and a stop still ends it."""
    listening = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    ports = [s.getsockname()[1] for s in listening]
    for s in listening:
        s.close()
    data = example_data()
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {
        "cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
        "task": {"type": "worker", "index": 0},
    }
    with distloop_run(data, tmp_path, "--task", "worker:0") as run:
        wait_for_line(
            run.stderr,
            "worker:0 is waiting for the other tasks of its cluster; not reachable yet: "
            f"worker:1 at 127.0.0.1:{ports[1]}",
        )
        run.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        _, err = run.communicate(timeout=30)
        took = time.monotonic() - signalled
    assert run.returncode == 143, err
    assert took < 6, f"took {took:.1f} s"
    assert "distloop: stopped (killed on request) after step 0" in err
    assert read_status(tmp_path / "run")["status"] == "stopped"


def test_ctrl_c_says_what_the_stop_saves_and_how_long_the_save_took(tmp_path) -> None:
    """Between Ctrl-C and "stopped" the terminal said nothing while the engine saved (seconds
    for a large model, which looked like a hang): it names the step it stopped after, what
    it saves, and how long the saving took, as the window's log does."""
    with distloop_run(long_seed(), tmp_path) as run:
        wait_for_line(run.stdout, "step=20 ")
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    step = read_status(tmp_path / "run")["last_step"]
    lines = err.splitlines()
    stopping = f"distloop: stopping after step {step:,}: saving the checkpoint and the model"
    assert stopping in lines, err
    took = [line for line in lines if line.startswith("distloop: saving the checkpoint and")]
    assert len(took) == 1 and took[0].startswith(
        "distloop: saving the checkpoint and the model took "
    ), err
    stopped = next(i for i, line in enumerate(lines) if line.startswith("distloop: stopped after"))
    assert lines.index(stopping) < lines.index(took[0]) < stopped
