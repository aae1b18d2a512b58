"""When things go wrong: every failure is reported plainly and nothing recorded is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distloop.engine.child_main import _tensorflow_line
from distloop.engine.messages import RunFailed, StepMetrics
from distloop.engine.process import EngineProcess
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import read_metrics, read_status
from support.distloop_testing import (
    REPO,
    distloop,
    example_data,
    full_device,
    run_engine,
    synthetic_project,
)

pytestmark = pytest.mark.slow


def start_and_wait_for_steps(project, run_dir: Path | None, steps: int = 5) -> EngineProcess:
    engine = EngineProcess(project, run_dir)
    engine.start()
    seen = 0
    while seen < steps:
        seen += sum(len(m.steps) for m in engine.poll(0.2) if isinstance(m, StepMetrics))
        assert not engine.done
    return engine


def finish(engine: EngineProcess) -> list:
    messages = []
    deadline = time.monotonic() + 30
    while not engine.done:
        assert time.monotonic() < deadline
        messages += engine.poll(0.2)
    engine.close()
    return messages


def test_segfault_is_reported_with_the_signal(tmp_path) -> None:
    project = load_project_data(synthetic_project(1, steps=1_000_000))
    engine = start_and_wait_for_steps(project, tmp_path)
    os.kill(engine.pid, signal.SIGSEGV)
    failure = finish(engine)[-1]
    assert isinstance(failure, RunFailed) and "SIGSEGV" in failure.message
    assert read_status(tmp_path)["status"] == "failed"
    assert read_metrics(tmp_path)["step"][:5] == [1, 2, 3, 4, 5]


def test_sigterm_stops_with_a_checkpoint_that_resumes(tmp_path) -> None:
    project = load_project_data(synthetic_project(1, steps=1_000_000))
    engine = start_and_wait_for_steps(project, tmp_path)
    os.kill(engine.pid, signal.SIGTERM)
    final = finish(engine)[-1]
    assert final.type == "run_finished" and final.status == "stopped"
    assert (tmp_path / "checkpoints" / f"ckpt-{final.last_step}.index").exists()
    assert engine.exit_code == 0


def test_an_engine_out_of_memory_fails_the_run_with_one_line_saying_so(tmp_path) -> None:
    """The kernel kills an engine that outgrows its memory (here a 150 MiB cgroup limit: it
    dies loading TensorFlow): one line says so and what to do, and the status file records
    it; the last lines of TensorFlow's start-up log, which say nothing about it, stay out."""
    from distloop.engine.process import OUT_OF_MEMORY

    group = Path("/sys/fs/cgroup/memory") / f"distloop_test_{os.getpid()}"
    try:
        group.mkdir()
    except OSError:
        pytest.skip("needs a writable cgroup v1 memory controller (root)")
    try:
        for key in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            if (group / key).exists():
                (group / key).write_text(str(150 * 2**20))
        join = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs")]
        command = [sys.executable, "-m", "distloop.gui.launcher", "run", "--example", "seed"]
        result = subprocess.run(  # the shell joins the group, then becomes `distloop run`
            [*join, *command, "--out", str(tmp_path / "run")],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        for _ in range(50):  # the kernel takes a moment to let the group go
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert last == f"distloop: the run failed: EngineDied: {OUT_OF_MEMORY}"
    assert read_status(tmp_path / "run")["error"] == OUT_OF_MEMORY


def test_engine_exits_when_its_parent_dies(tmp_path) -> None:
    """The GUI killed with SIGKILL: its engine notices and exits within a few seconds."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "from support.distloop_testing import synthetic_project\n"
        "from distloop.engine.project_file import load_project_data\n"
        "from distloop.engine.process import EngineProcess\n"
        "if __name__ == '__main__':\n"
        "    engine = EngineProcess(load_project_data(synthetic_project(1, steps=10**6)), None)\n"
        "    engine.start()\n"
        "    print(engine.pid, flush=True)\n"
        "    while True:\n"
        "        engine.poll(0.5)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, str(script)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    engine_pid = int(parent.stdout.readline())
    time.sleep(1)
    parent.kill()
    parent.wait()
    killed_at = time.monotonic()
    while _alive(engine_pid) and time.monotonic() - killed_at < 20:
        time.sleep(0.1)
    assert not _alive(engine_pid), "the engine outlived its parent"
    assert time.monotonic() - killed_at < 5


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_full_disk_fails_the_run_clearly(tmp_path) -> None:
    full_device(tmp_path / "metrics.csv")
    run = run_engine(load_project_data(synthetic_project(1, steps=50)), tmp_path)
    failure = run["terminal"]
    assert isinstance(failure, RunFailed) and failure.error_type == "RunFolderError"
    assert failure.message.startswith(f"no space left on device in {tmp_path} (")
    assert "cannot write metrics.csv" in failure.message
    assert read_status(tmp_path)["status"] == "failed"


def test_unwritable_run_folder_is_refused_before_training(tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    project = tmp_path / "p.json"
    project.write_text((REPO / "resources" / "examples" / "seed.json").read_text())
    result = distloop("run", str(project), "--out", str(blocker / "run"))
    assert result.returncode == 1
    assert "cannot create the run folder" in result.stderr
    assert "Traceback" not in result.stderr


def test_nan_can_be_allowed_to_continue(tmp_path) -> None:
    data = example_data("regression")
    data["optimizer"] = {"kind": "sgd", "learning_rate": 90.0}
    data["model"]["layers"] = [{"kind": "dense", "units": 1}]
    data["training"].update(epochs=1, stop_on_nan=False)
    run = run_engine(load_project_data(data), None)
    assert run["terminal"].status == "finished"
    assert len(run["steps"]) == 40
    assert any("continuing because training.stop_on_nan is false" in m.text for m in run["logs"])


def test_tensorflow_lines_keep_their_level_unless_they_describe_expected_behaviour() -> None:
    """A healthy CPU run must not show a red ERROR: TensorFlow's CUDA probe is news, not failure."""
    logged: list[tuple[str, str]] = []  # (level, text)

    class Recorder:
        def log(self, text: str, level: str = "info", source: str = "engine") -> None:
            logged.append((level, text))

    on_line = _tensorflow_line(Recorder())  # type: ignore[arg-type]
    on_line("E0000 00:00:1.0 1 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)")
    on_line("W0000 00:00:1.0 1 cache.cc:9] did not fully read the dataset being cached")
    on_line("E0000 00:00:1.0 1 collective_ops.cc:1] Collective ops is aborted")
    on_line("W0000 00:00:1.0 1 something.cc:1] slow")
    on_line("Traceback (most recent call last):")
    assert [level for level, _ in logged] == ["info", "debug", "error", "warning", "error"]
