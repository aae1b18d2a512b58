"""A run folder from someone else ("resume my run", "try my model") is untrusted: resuming or
predicting from it writes, reads and deletes nothing outside it, and gives no one a way in."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from distloop.engine.messages import RunFailed
from distloop.engine.process import EngineProcess
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import LOCK_FILE, log_line, unknown_entries, write_status
from support.distloop_testing import distloop, run_engine, synthetic_project
from support.run_folders import distloop_quick, multi_worker_run_folder, tree

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK7attacker attacker@elsewhere"
LOG_RECORD = re.compile(r"\d\d:\d\d:\d\d [DIWE] \[\w+\] ")
"""How every line of engine.log starts: its record's time, level and source."""


def stopped_run(root: Path, data: dict | None = None) -> Path:
    """A stopped single-process run folder, as someone may hand one over (no TensorFlow)."""
    run_dir = root / "run"
    run_dir.mkdir(parents=True)
    data = data or synthetic_project(1, steps=12, checkpoint_every=1)
    (run_dir / "project.json").write_text(json.dumps(data))
    write_status(run_dir, "stopped", last_step=0)
    return run_dir


def victim_home(root: Path) -> Path:
    """The files a crafted link points at: an authorized_keys file and a folder."""
    home = root / "victim"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAAmine me@here\n")
    (home / "pictures").mkdir()
    (home / "pictures" / "cat.png").write_text("meow")
    return home


def test_a_linked_engine_log_is_refused_on_resume_predict_and_cluster_resume(tmp_path) -> None:
    """Resume appended to whatever engine.log linked to: ~/.ssh/authorized_keys got a key."""
    home = victim_home(tmp_path)
    before = tree(home)
    run_dir = stopped_run(tmp_path)
    log = run_dir / "engine.log"
    log.symlink_to(home / ".ssh" / "authorized_keys")
    refusal = (
        f"distloop: {log} is a symbolic link: Distloop reads and writes only a run folder's "
        "own files; replace the link with a copy of what it points to"
    )
    result = distloop_quick("run", "--resume", str(run_dir))
    assert (result.returncode, result.stderr.strip()) == (1, refusal)
    (run_dir / "model.keras").write_bytes(b"")
    result = distloop_quick("predict", str(run_dir), str(tmp_path / "rows.csv"))
    assert (result.returncode, result.stderr.strip()) == (1, refusal)
    assert not (run_dir / LOCK_FILE).exists()

    # A cluster's top-level files are the launcher's: the same refusal.
    cluster = multi_worker_run_folder(tmp_path)
    (cluster / "metrics.csv").symlink_to(home / ".ssh" / "authorized_keys")
    result = distloop_quick("cluster", "--resume", str(cluster))
    assert result.returncode == 1
    assert result.stderr.strip() == refusal.replace(str(log), str(cluster / "metrics.csv"))
    assert tree(home) == before


def test_user_text_in_a_log_record_never_starts_a_line() -> None:
    record = log_line("error", "engine", f"no such file: data.csv\n{KEY}\r{KEY}\u2028{KEY}")
    lines = record.splitlines()
    assert len(lines) == 4 and all(LOG_RECORD.match(line) for line in lines), lines
    assert log_line("info", "engine", "").endswith(" I [engine] \n")  # one line, even empty


@pytest.mark.slow
def test_a_data_path_holding_a_key_on_a_line_of_its_own_is_logged_inside_a_record(
    tmp_path,
) -> None:
    """The key of a data.path "x\\n<key>" landed on its own line of the log (of authorized_keys,
    through a link), and sshd accepted it."""
    data = synthetic_project(1, steps=12)
    data["data"] = {
        "source": "csv",
        "path": str(tmp_path / f"data.csv\n{KEY}"),
        "label_column": "label",
        "global_batch_size": 8,
    }
    data["model"]["input_shape"] = [2]
    run_dir = stopped_run(tmp_path, data)
    result = distloop("run", "--resume", str(run_dir), timeout_s=120)
    assert result.returncode == 1, result.stderr
    lines = (run_dir / "engine.log").read_text().splitlines()
    assert any(KEY in line for line in lines), lines
    assert all(LOG_RECORD.match(line) for line in lines), lines


def test_a_linked_tensorboard_folder_is_refused_on_resume(tmp_path) -> None:
    """Resume wrote its event files into the folder tensorboard/ linked to."""
    home = victim_home(tmp_path)
    before = tree(home)
    run_dir = stopped_run(tmp_path)
    (run_dir / "tensorboard").symlink_to(home / "pictures")
    result = distloop_quick("run", "--resume", str(run_dir))
    assert result.returncode == 1
    assert result.stderr.startswith(f"distloop: {run_dir / 'tensorboard'} is a symbolic link")
    assert tree(home) == before and sorted(p.name for p in (home / "pictures").iterdir()) == [
        "cat.png"
    ]


@pytest.mark.slow
def test_the_engine_writes_no_event_file_through_a_linked_tensorboard_folder(tmp_path) -> None:
    """Whoever starts the engine on such a folder: the engine itself refuses the link."""
    home = victim_home(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "tensorboard").symlink_to(home / "pictures")
    run = run_engine(load_project_data(synthetic_project(1, steps=5)), run_dir)
    assert isinstance(run["terminal"], RunFailed), run["terminal"]
    assert run["terminal"].error_type == "RunFolderError"
    assert run["terminal"].message == (
        f"{run_dir / 'tensorboard'} is a symbolic link: event files go into the run folder"
    )
    assert sorted(p.name for p in (home / "pictures").iterdir()) == ["cat.png"]


def checkpoint_files(folder: Path, prefix: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{prefix}.index").write_text("someone's checkpoint")
    (folder / f"{prefix}.data-00000-of-00001").write_text("someone's weights")


@pytest.mark.slow
def test_a_checkpoint_index_naming_files_elsewhere_is_refused_and_deletes_nothing(
    tmp_path,
) -> None:
    """CheckpointManager(max_to_keep=3) pruned what the index listed: /elsewhere/* and another
    run's checkpoints were deleted by a resume."""
    elsewhere, other_run = tmp_path / "elsewhere", tmp_path / "other-run" / "checkpoints"
    checkpoint_files(elsewhere, "victim")
    checkpoint_files(other_run, "ckpt-5")
    before = tree(tmp_path / "elsewhere"), tree(tmp_path / "other-run")
    run_dir = stopped_run(tmp_path)
    index = run_dir / "checkpoints" / "checkpoint"
    index.parent.mkdir()
    index.write_text(
        'model_checkpoint_path: "ckpt-1"\n'
        f'all_model_checkpoint_paths: "{elsewhere / "victim"}"\n'
        'all_model_checkpoint_paths: "../../other-run/checkpoints/ckpt-5"\n'
        'all_model_checkpoint_paths: "ckpt-1"\n'
        "all_model_checkpoint_timestamps: 2.0\n"
        "all_model_checkpoint_timestamps: 2.0\n"
        "all_model_checkpoint_timestamps: 2.0\n"
        "last_preserved_timestamp: 1.0\n"
    )
    result = distloop("run", "--resume", str(run_dir), "--quiet", timeout_s=120)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"distloop: the checkpoint index {index} names {str(elsewhere / 'victim')!r}: a run "
        "resumes only from the ckpt-<step> checkpoints in its own checkpoints folder"
    )
    assert (tree(tmp_path / "elsewhere"), tree(tmp_path / "other-run")) == before

    # The relative path alone is refused too, and an index TensorFlow writes is not.
    index.write_text(index.read_text().replace(f'"{elsewhere / "victim"}"', '"ckpt-2"'))
    result = distloop("run", "--resume", str(run_dir), "--quiet", timeout_s=120)
    assert result.returncode == 1 and "names '../../other-run/checkpoints/ckpt-5'" in (
        result.stderr
    )
    index.write_text('model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n')
    result = distloop("run", "--resume", str(run_dir), "--quiet", timeout_s=120)
    assert result.returncode == 0, result.stderr
    assert (tree(tmp_path / "elsewhere"), tree(tmp_path / "other-run")) == before


def kill_when_it_appears(engine: EngineProcess, find: Callable[[], Path | None]) -> Path:
    """SIGKILLs the engine the moment ``find`` sees the temporary it writes; returns it."""
    polled = time.monotonic()
    while True:
        assert not engine.done, "the run ended before it could be killed"
        found = find()
        if found is not None:
            os.kill(engine.pid, signal.SIGKILL)
            break
        if time.monotonic() - polled > 0.05:  # keeps the queue from filling up
            polled = time.monotonic()
            engine.poll(0)
    while not engine.done:
        engine.poll(0.2)
    engine.close()
    return found


def first(folder: Path, pattern: str) -> Path | None:
    with contextlib.suppress(OSError):
        return next(folder.glob(pattern), None)
    return None


@pytest.mark.slow
def test_temporaries_of_a_run_killed_while_saving_are_removed_by_its_resume(tmp_path) -> None:
    """A SIGKILL during the first checkpoint left ckpt-5_temp/, during the model's save a
    .<hex>.tmp-model.keras: never cleaned, even by a resume."""
    data = synthetic_project(1, steps=10, checkpoint_every=5)
    big = {"kind": "dense", "units": 3000, "activation": "tanh"}
    data["model"]["layers"] = [big, {**big}, {"kind": "dense", "units": 3}]  # slow to save
    project = load_project_data(data)
    run_dir = tmp_path / "run"

    engine = EngineProcess(project, run_dir)
    engine.start()
    stale = kill_when_it_appears(engine, lambda: first(run_dir / "checkpoints", "ckpt-5_temp"))
    assert stale.is_dir()

    engine = EngineProcess(project, run_dir, resume=True)
    engine.start()
    model = kill_when_it_appears(engine, lambda: first(run_dir, ".*.tmp-model.keras"))
    assert not stale.exists()  # the resume removed it before it started
    assert model.exists()

    finished = run_engine(project, run_dir, resume=True)
    assert finished["terminal"].status == "finished"
    assert not model.exists() and (run_dir / "model.keras").is_file()
    assert unknown_entries(run_dir) == [] and not list(run_dir.rglob("*tmp*"))


def test_an_engine_given_a_linked_engine_log_fails_in_one_line_writing_nothing_there(
    tmp_path,
) -> None:
    """Whoever starts an engine on such a folder: it opens engine.log without following the
    link, and fails with why (it died with a traceback no one saw)."""
    home = victim_home(tmp_path)
    before = tree(home)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "engine.log").symlink_to(home / ".ssh" / "authorized_keys")
    run = run_engine(load_project_data(synthetic_project(1, steps=5)), run_dir)
    assert isinstance(run["terminal"], RunFailed), run["terminal"]
    assert (run["terminal"].error_type, run["terminal"].known) == ("RunFolderError", True)
    assert run["terminal"].message == f"cannot write engine.log in {run_dir}: is a symbolic link"
    assert tree(home) == before
