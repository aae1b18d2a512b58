"""A run folder is one run's: one writer at a time, nothing written or deleted through a link,
and a full disk stops the run cleanly with its last complete checkpoint still the latest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distloop.engine.cluster import LocalCluster
from distloop.engine.messages import RunFailed, RunFinished
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import (
    LOCK_FILE,
    RESERVE_BYTES,
    RunFolderBusy,
    RunFolderError,
    RunFolderLock,
    empty_run_folder,
    not_a_run_folder,
    read_metrics,
    read_status,
    truncate_metrics,
    unknown_entries,
)
from support.distloop_testing import REPO, example_data, full_device, synthetic_project
from support.run_folders import distloop_quick, multi_worker_run_folder, tree


def distloop_popen(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "distloop.gui.launcher", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen, timeout_s: float = 240) -> tuple[int, str, float]:
    """Waits for ``process``; returns its exit code, stderr and when it ended."""
    _, stderr = process.communicate(timeout=timeout_s)
    return process.returncode, stderr, time.monotonic()


def finish_together(
    processes: list[subprocess.Popen], timeout_s: float = 240
) -> dict[int, tuple[int, str, float]]:
    """Waits for all of ``processes`` at once: each one's exit code, stderr and end time."""
    ended_at: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(ended_at) < len(processes):
        assert time.monotonic() < deadline, "the runs timed out"
        for process in processes:
            if process.pid not in ended_at and process.poll() is not None:
                ended_at[process.pid] = time.monotonic()
        time.sleep(0.05)
    return {p.pid: (p.returncode, p.communicate()[1], ended_at[p.pid]) for p in processes}


def test_a_folder_lock_excludes_a_second_holder_and_names_the_first(tmp_path) -> None:
    lock = RunFolderLock.acquire(tmp_path)
    with pytest.raises(RunFolderBusy, match=rf"{tmp_path} is in use .*\(process {os.getpid()}\)"):
        RunFolderLock.acquire(tmp_path)
    # Room for a failing run's status on a full disk while it runs; none left behind after.
    assert (tmp_path / LOCK_FILE).stat().st_size > RESERVE_BYTES
    lock.release()
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    RunFolderLock.acquire(tmp_path).release()


def test_emptying_a_run_folder_deletes_links_not_what_they_point_to(tmp_path) -> None:
    outside = tmp_path / "outside"
    (outside / "checkpoints").mkdir(parents=True)
    (outside / "checkpoints" / "ckpt-1.index").write_text("keep")
    (outside / "metrics.csv").write_text("keep")
    run_dir = tmp_path / "run"
    (run_dir / "tasks" / "worker-0" / "checkpoints").mkdir(parents=True)
    (run_dir / "tasks" / "worker-1").symlink_to(outside)
    (run_dir / "metrics.csv").symlink_to(outside / "metrics.csv")
    chief = run_dir / "tasks" / "worker-0" / "checkpoints"
    (chief / "ckpt-1.index").symlink_to(outside / "checkpoints" / "ckpt-1.index")
    (run_dir / "status.json").write_text("{}")
    lock = RunFolderLock.acquire(run_dir)
    before = tree(outside)
    empty_run_folder(run_dir)
    lock.release()
    assert [p.name for p in run_dir.iterdir()] == [LOCK_FILE]
    assert tree(outside) == before


def test_a_resume_refuses_linked_task_and_checkpoint_folders_before_starting(tmp_path) -> None:
    """A crafted ``tasks/worker-1 -> /elsewhere`` once made a resume delete and write there."""
    outside = tmp_path / "elsewhere"
    (outside / "checkpoints").mkdir(parents=True)
    (outside / "checkpoints" / "checkpoint").write_text("someone else's")
    (outside / "project.json").write_text("someone else's")
    run_dir = multi_worker_run_folder(tmp_path)
    worker_1 = run_dir / "tasks" / "worker-1"
    shutil.rmtree(worker_1)
    worker_1.symlink_to(outside)
    before = tree(outside)

    result = distloop_quick("cluster", "--resume", str(run_dir))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"distloop: {worker_1} is a symbolic link: Distloop reads and writes only a run "
        "folder's own files; replace the link with a copy of what it points to"
    )
    assert tree(outside) == before

    # The same for a task's checkpoints folder, and for a single run's.
    worker_1.unlink()
    worker_1.mkdir()
    (worker_1 / "checkpoints").symlink_to(outside / "checkpoints")
    result = distloop_quick("cluster", "--resume", str(run_dir))
    assert result.returncode == 1 and f"{worker_1 / 'checkpoints'} is a symbolic link" in (
        result.stderr
    )
    single = tmp_path / "single"
    single.mkdir()
    (single / "project.json").write_text(json.dumps(example_data()))
    (single / "checkpoints").symlink_to(outside / "checkpoints")
    result = distloop_quick("run", "--resume", str(single))
    assert result.returncode == 1 and f"{single / 'checkpoints'} is a symbolic link" in (
        result.stderr
    )
    assert tree(outside) == before


def test_a_resume_of_a_folder_in_use_is_refused_before_it_touches_anything(tmp_path) -> None:
    """Two ``distloop cluster --resume`` of one folder would copy checkpoints under each other."""
    run_dir = multi_worker_run_folder(tmp_path)
    before = tree(run_dir)
    holder = RunFolderLock.acquire(run_dir)
    result = distloop_quick("cluster", "--resume", str(run_dir))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"distloop: the run folder {run_dir} is in use by another run (process {os.getpid()}): "
        "wait for it to end, or choose another folder"
    )
    holder.release()

    # A task folder in use (a `distloop run --resume` of it) stops the whole cluster too.
    worker_1 = run_dir / "tasks" / "worker-1"
    holder = RunFolderLock.acquire(worker_1)
    result = distloop_quick("cluster", "--resume", str(run_dir), "--quiet")
    holder.release()
    assert result.returncode == 1
    assert f"the run folder {worker_1} is in use by another run" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 3  # two task lines, then the refusal
    assert tree(run_dir) == before

    single = tmp_path / "single"
    single.mkdir()
    (single / "project.json").write_text(json.dumps(example_data()))
    holder = RunFolderLock.acquire(single)
    result = distloop_quick("run", "--resume", str(single))
    holder.release()
    assert result.returncode == 1 and f"the run folder {single} is in use" in result.stderr


@pytest.mark.slow
def test_two_runs_started_at_once_into_one_folder_one_runs_and_one_is_refused(tmp_path) -> None:
    """Both exited 0 with interleaved, duplicate steps; an earlier run's trace was appended to."""
    data = example_data()
    data["training"] = {"steps": 40, "seed": 0}
    project = tmp_path / "p.json"
    project.write_text(json.dumps(data))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.csv").write_text("step,loss,elapsed_s\n1,9.0,0.1\n2,9.0,0.2\n")
    (run_dir / "status.json").write_text('{"status": "finished"}')
    (run_dir / "engine.log").symlink_to(outside / "keep.txt")

    began = time.monotonic()
    first, second = (
        distloop_popen("run", str(project), "--out", str(run_dir), "--overwrite", "--quiet")
        for _ in range(2)
    )
    ended = finish_together([first, second])
    codes = sorted(code for code, _, _ in ended.values())
    assert codes == [0, 1], [stderr for _, stderr, _ in ended.values()]
    refused = next(pid for pid, (code, _, _) in ended.items() if code == 1)
    holder = first.pid if refused == second.pid else second.pid
    _, stderr, refused_at = ended[refused]
    assert stderr.strip() == (
        f"distloop: the run folder {run_dir} is in use by another run (process {holder}): "
        "wait for it to end, or choose another folder"
    )
    assert refused_at - began < 10 and refused_at < ended[holder][2], "refused after TensorFlow"
    assert read_metrics(run_dir)["step"] == list(range(1, 41))
    assert read_status(run_dir)["status"] == "finished"
    assert not (run_dir / "engine.log").is_symlink() and tree(outside) == {"keep.txt": "keep"}
    assert unknown_entries(run_dir) == []  # what a finished run leaves is a run folder's

    result = distloop_quick("run", str(project), "--out", str(run_dir))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"distloop: the run folder {run_dir} is not empty: continue its run with distloop run "
        f"--resume {run_dir}, or replace it with --overwrite"
    )
    assert read_metrics(run_dir)["step"] == list(range(1, 41))


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB file system of its own (tmpfs), so a test can fill it up."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def fill(disk: Path) -> Path:
    """Takes every free byte of ``disk``; returns the file that holds them."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def checkpoint_files(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir())


@pytest.mark.root
@pytest.mark.slow
def test_a_full_disk_stops_the_run_in_one_line_and_it_resumes_from_the_last_checkpoint(
    tmp_path, small_disk
) -> None:
    """It used to print chained tracebacks from both processes, leave the status "running",
    and leave a 0-byte checkpoint index and a ``_temp`` folder behind."""
    data = example_data()
    data["training"] = {"steps": 5000, "seed": 0, "checkpoint_every": 1}
    project = tmp_path / "p.json"
    project.write_text(json.dumps(data))
    run_dir = small_disk / "run"
    run = distloop_popen("run", str(project), "--out", str(run_dir), "--quiet")
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "checkpoints" / "checkpoint").exists():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.05)
        filler = fill(small_disk)
        code, stderr, _ = finish(run, timeout_s=60)
    finally:
        run.kill()
    assert code == 1, stderr
    failure = stderr.strip().splitlines()[-1]
    assert failure.startswith(
        f"distloop: the run failed: RunFolderError: no space left on device in {run_dir} ("
    ), stderr
    assert " bytes free): cannot write " in failure and "free some space, then resume" in failure
    assert "Traceback" not in stderr and "During handling" not in stderr, stderr

    status = read_status(run_dir)  # the lock file's reserve made room for it
    assert status["status"] == "failed" and "no space left on device" in status["error"]
    files = checkpoint_files(run_dir)
    assert all(
        name == "checkpoint" or re.fullmatch(r"ckpt-\d+\.(index|data-00000-of-00001)", name)
        for name in files
    ), files  # no half-written checkpoint, no _temp folder, no temporary index
    index = (run_dir / "checkpoints" / "checkpoint").read_text()
    latest = index.split('model_checkpoint_path: "', 1)[1].split('"', 1)[0]
    assert f"{latest}.index" in files and f"{latest}.data-00000-of-00001" in files, files
    assert (run_dir / "checkpoints" / f"{latest}.index").stat().st_size > 0
    assert max(int(re.findall(r"\d+", name)[0]) for name in files[1:]) == int(latest[5:])

    filler.unlink()
    resumed = distloop_popen("run", "--resume", str(run_dir))
    try:
        first_line = resumed.stdout.readline()
        resumed.send_signal(2)  # Ctrl-C: stops after the current step
        code, stderr, _ = finish(resumed, timeout_s=60)
    finally:
        resumed.kill()
    assert first_line.startswith(f"step={int(latest[5:]) + 1} "), (first_line, stderr)
    assert code == 130, stderr
    steps = read_metrics(run_dir)["step"]
    assert steps == list(range(1, len(steps) + 1))


@pytest.mark.slow
def test_a_cluster_whose_launcher_cannot_write_its_trace_fails_in_one_message(tmp_path) -> None:
    """The launcher's own write to a full disk ended `distloop cluster` with a traceback."""
    data = synthetic_project(1, steps=200)
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    run_dir = tmp_path / "cluster"
    run_dir.mkdir()
    full_device(run_dir / "metrics.csv")
    cluster = LocalCluster(load_project_data(data), run_dir, workers=2)
    cluster.start()
    terminal = None
    try:
        deadline = time.monotonic() + 180
        while not cluster.done:
            assert time.monotonic() < deadline, "the cluster run timed out"
            for message in cluster.poll(0.2):
                if isinstance(message, RunFinished | RunFailed):
                    terminal = message
    finally:
        cluster.close()
    assert isinstance(terminal, RunFailed), terminal
    assert (terminal.error_type, terminal.task, terminal.traceback) == ("RunFolderError", None, "")
    assert terminal.message.startswith(f"no space left on device in {run_dir} (")
    assert {t.state for t in cluster.tasks()} == {"stopped"}
    status = read_status(run_dir)
    assert status["status"] == "failed" and status["error"] == terminal.message


@pytest.mark.root
def test_a_resume_on_a_full_disk_stops_in_one_message_and_keeps_the_trace(small_disk) -> None:
    """Cutting the trace back to the checkpoint failed with a bare OSError and its traceback."""
    run_dir = small_disk / "run"
    run_dir.mkdir()
    trace = "step,loss,elapsed_s\n" + "".join(f"{s},0.5,{s / 10}\n" for s in range(1, 9))
    (run_dir / "metrics.csv").write_text(trace)
    fill(small_disk)
    with pytest.raises(RunFolderError) as raised:
        truncate_metrics(run_dir, 4)
    assert str(raised.value) == (
        f"no space left on device in {run_dir} (0 bytes free): cannot write metrics.csv; "
        "free some space, then resume the run"
    )
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert [p.name for p in run_dir.iterdir()] == ["metrics.csv"]
    assert (run_dir / "metrics.csv").read_text() == trace


def fake_home(root: Path) -> Path:
    """A home folder as --out: what `--overwrite` once deleted, reporting "finished"."""
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA me@here\n")
    (home / ".bashrc").write_text("export EDITOR=vi\n")
    (home / "Documents").mkdir()
    (home / "Documents" / "letter.txt").write_text("dear ...")
    return home


def thesis_folder(root: Path) -> Path:
    """A folder with a thesis under git, and a project.json and status.json of its own."""
    thesis = root / "thesis"
    (thesis / ".git" / "objects").mkdir(parents=True)
    (thesis / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (thesis / "thesis.tex").write_text("\\chapter{Results}\n")
    (thesis / "project.json").write_text("{}")
    (thesis / "status.json").write_text("{}")
    return thesis


@pytest.mark.parametrize("command", ["run", "cluster"])
def test_overwrite_never_empties_a_folder_that_is_not_a_run_folder(tmp_path, command) -> None:
    """`distloop run seed.json --out ~ --overwrite` removed .ssh/, .bashrc and Documents/."""
    project = tmp_path / "p.json"
    data = example_data()
    if command == "cluster":
        data["strategy"] = {"kind": "multi_worker_mirrored"}
    project.write_text(json.dumps(data))
    home, thesis = fake_home(tmp_path), thesis_folder(tmp_path)
    for folder, unknown in (
        (home, ".bashrc, .ssh, Documents"),
        (thesis, ".git, thesis.tex"),
    ):
        before = tree(folder)
        for overwrite in (["--overwrite"], []):
            result = distloop_quick(command, str(project), "--out", str(folder), *overwrite)
            assert result.returncode == 1
            assert result.stderr.strip() == (
                f"distloop: {folder} is not a run folder: it holds {unknown}, which no run "
                "writes; choose an empty or a new folder for --out"
            )
            assert tree(folder) == before
            assert not (folder / LOCK_FILE).exists()  # nothing written into the user's folder

    # A folder of run files with one file of the user's among them: refused, naming it.
    run_like = tmp_path / "run-like"
    run_like.mkdir()
    for name in ("metrics.csv", "status.json", "engine.log"):
        (run_like / name).write_text("")
    (run_like / "checkpoints").mkdir()
    (run_like / "checkpoints" / "notes.md").write_text("mine")
    result = distloop_quick(command, str(project), "--out", str(run_like), "--overwrite")
    assert result.returncode == 1 and (
        f"{run_like} is not a run folder: it holds checkpoints/notes.md, which" in result.stderr
    )
    assert (run_like / "checkpoints" / "notes.md").read_text() == "mine"


def test_a_folder_of_run_files_without_a_status_is_not_a_run_folder(tmp_path) -> None:
    """A user's project folder holding project.json and a model.keras is not a run's."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "project.json").write_text("{}")
    (folder / "model.keras").write_bytes(b"PK")
    assert not_a_run_folder(folder) == f"{folder} is not a run folder: it has no status.json"
    with pytest.raises(RunFolderError):
        empty_run_folder(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["model.keras", "project.json"]
    (folder / "status.json").write_text("{}")
    empty_run_folder(folder)
    assert list(folder.iterdir()) == []
