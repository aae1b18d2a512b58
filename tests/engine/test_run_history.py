"""The run history: summaries from run folders, newest first, rename and delete."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from distloop.engine.examples import load_example
from distloop.engine.run_folder import (
    METRICS_FILE,
    STATUS_FILE,
    RunFolderBusy,
    folder_entries,
    folder_write_error,
    new_run_dir,
    read_metrics,
    read_status,
    write_status,
)
from distloop.engine.run_history import (
    LABEL_FILE,
    UNREADABLE,
    delete_run,
    list_runs,
    rename_run,
    set_notes,
    set_tags,
    summarize,
)
from support.distloop_testing import crafted_status_folders, distloop, example_data, run_engine
from support.run_folders import fake_run


def test_runs_are_listed_newest_first_with_their_numbers(tmp_path) -> None:
    fake_run(tmp_path, "old", 100.0, [3.0, 2.0, 2.5])
    fake_run(tmp_path, "new", 200.0, [1.0, 0.5], status="stopped")
    (tmp_path / "not-a-run").mkdir()
    runs = list_runs(tmp_path)
    assert [r.name for r in runs] == ["new", "old"]
    old = runs[1]
    assert (old.steps, old.final_loss, old.smoothed_loss) == (3, 2.5, 2.5)
    assert (old.strategy, old.num_replicas, old.status) == ("MirroredStrategy", 2, "finished")
    assert old.duration_s is not None and old.duration_s >= 0
    assert runs[0].status == "stopped"


def test_a_run_is_summarized_by_its_smoothed_loss_not_one_batch(tmp_path) -> None:
    """The runs list showed the lowest loss: one lucky batch's. It shows the mean of the
    last tenth of the steps, the number sweeps and studies rank by."""
    losses = [2.0] * 10 + [0.1] + [1.0] * 7 + [0.5, 1.5]  # 20 steps: the last 2 count
    run = summarize(fake_run(tmp_path, "run", 100.0, losses))
    assert (run.final_loss, run.smoothed_loss) == (1.5, 1.0)
    nan = summarize(fake_run(tmp_path, "nan", 100.0, [*losses[:-1], float("nan")]))
    assert nan.smoothed_loss is None  # a NaN in the last tenth: nothing to rank by
    early_nan = summarize(fake_run(tmp_path, "early", 100.0, [float("nan"), *losses[1:]]))
    assert early_nan.smoothed_loss == 1.0


def test_a_crashed_half_written_run_still_summarizes(tmp_path) -> None:
    run_dir = fake_run(tmp_path, "crashed", 1.0, [1.0, 0.9])
    with (run_dir / "metrics.csv").open("a") as handle:
        handle.write("3,0.8")  # the line a SIGKILL cut short
    (run_dir / "status.json").write_text("{broken")
    summary = summarize(run_dir)
    assert (summary.steps, summary.status) == (2, "unknown")


def test_rename_and_delete(tmp_path) -> None:
    run_dir = fake_run(tmp_path, "a", 1.0, [1.0])
    (run_dir / LABEL_FILE).write_text("named by an earlier version\n")
    assert summarize(run_dir).name == "named by an earlier version"
    rename_run(run_dir, "  baseline, lr 0.01 ")
    assert summarize(run_dir).name == "baseline, lr 0.01"
    assert read_status(run_dir)["name"] == "baseline, lr 0.01"
    assert read_status(run_dir)["status"] == "finished"  # the rest of the record stays
    assert not (run_dir / LABEL_FILE).exists()
    with pytest.raises(ValueError, match="needs a name"):
        rename_run(run_dir, " ")
    assert summarize(run_dir).name == "baseline, lr 0.01"
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


def test_each_new_run_folder_names_its_run_once(tmp_path) -> None:
    """``seed #1``, ``seed #2``: readable and unique, decided where the folder is made."""
    first = new_run_dir("seed", tmp_path)
    assert folder_entries(first) == []  # the name alone is no run: the folder is still fresh
    assert read_status(first) == {"status": "created", "name": "seed #1"}
    (first / "project.json").write_text(json.dumps({"name": "seed"}))
    write_status(first, "running", started_at=5.0)
    assert summarize(first).name == "seed #1"  # the engine's statuses keep it
    second = new_run_dir("seed", tmp_path)
    other = new_run_dir("seed v2", tmp_path)
    assert read_status(second)["name"] == "seed #2"
    assert read_status(other)["name"] == "seed v2 #1"
    rename_run(first, "seed #7")
    assert read_status(new_run_dir("seed", tmp_path))["name"] == "seed #8"
    (second / STATUS_FILE).write_text("{broken")  # a half-written record is skipped
    assert read_status(new_run_dir("seed v2", tmp_path))["name"] == "seed v2 #2"


def test_older_folders_without_a_name_get_one_from_the_folder(tmp_path) -> None:
    stamped = fake_run(tmp_path, "20261202-130512-seed", 1.0, [1.0])
    assert summarize(stamped).name == "20261202-130512-seed 12-02 13:05"
    (stamped / "project.json").write_text(json.dumps({"name": "seed"}))
    assert summarize(stamped).name == "seed 12-02 13:05"
    (stamped / "project.json").write_text("{}")
    assert summarize(stamped).name == "run 12-02 13:05"
    chosen = fake_run(tmp_path, "my-folder", 1.0, [1.0])  # --out my-folder
    (chosen / "project.json").write_text("{}")
    assert summarize(chosen).name == "my-folder"


def test_notes_and_tags_are_kept_and_searched(tmp_path) -> None:
    run_dir = fake_run(tmp_path, "baseline", 1.0, [1.0])
    set_notes(run_dir, " lr 0.01, no warm-up \n")
    set_tags(run_dir, "adam, sweep-3,, adam ,")
    write_status(run_dir, "running", started_at=1.0)  # a resume keeps them
    run = summarize(run_dir)
    assert (run.notes, run.tags) == ("lr 0.01, no warm-up", ("adam", "sweep-3"))
    assert run.matches("") and run.matches("BASE") and run.matches("sweep-3 warm")
    assert not run.matches("sgd") and not run.matches("adam sgd")
    set_tags(run_dir, [])
    assert summarize(run_dir).tags == ()


def test_a_resume_keeps_the_first_start(tmp_path) -> None:
    """The resumed engine reports its own start; Started stays when the run began."""
    run_dir = fake_run(tmp_path, "r", 100.0, [1.0, 0.5], status="stopped")
    write_status(run_dir, "running", started_at=5000.0)
    write_status(run_dir, "finished", started_at=5000.0, last_step=2)
    status = read_status(run_dir)
    assert (status["started_at"], status["resumed_at"]) == (100.0, 5000.0)
    run = summarize(run_dir)
    assert run.started_at == 100.0
    assert run.duration_s == 1.0  # the training time metrics.csv holds, not the pause


@pytest.mark.slow
def test_a_real_run_is_summarized_from_its_folder(tmp_path) -> None:
    run = run_engine(load_example("seed"), tmp_path / "seed")
    (summary,) = list_runs(tmp_path)
    assert summary.name == load_example("seed").name
    assert (summary.steps, summary.status) == (100, "finished")
    assert summary.strategy == "mirrored" and summary.num_replicas == 1
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


def test_a_crafted_status_is_listed_as_unreadable_and_never_breaks_the_list(tmp_path) -> None:
    crafted = crafted_status_folders(tmp_path)
    fake_run(tmp_path, "good", 100.0, [1.0, 0.5])
    runs = {run.path: run for run in list_runs(tmp_path)}
    assert runs[tmp_path / "good"].final_loss == 0.5
    assert {path: (run.status, run.error) for path, run in runs.items() if path in crafted} == {
        path: (UNREADABLE, why) for path, why in crafted.items()
    }
    # A new run's name counts the runs of its project: the crafted ones name none.
    run_dir = new_run_dir("good", tmp_path)
    assert read_status(run_dir)["name"] == "good #1"


def test_crafted_records_of_any_type_summarize_without_an_exception(tmp_path) -> None:
    run_dir = tmp_path / "odd"
    run_dir.mkdir()
    (run_dir / "project.json").write_text(json.dumps({"strategy": ["not", "an", "object"]}))
    (run_dir / "status.json").write_text(
        json.dumps({"strategy": [1], "error": {"x": 1}, "status": "running", "pid": 2**70})
    )
    (run_dir / "metrics.csv").write_text("step\ninf\n")
    run = summarize(run_dir)
    assert (run.strategy, run.error, run.steps, run.status) == (None, None, 0, "interrupted")
    (run_dir / "metrics.csv").write_text("step,loss\n" + "1" * 200_000)  # csv: field too large
    assert summarize(run_dir).steps == 0


@pytest.mark.slow
def test_distloop_run_without_out_passes_crafted_runs_and_leaves_no_empty_folder(
    tmp_path,
) -> None:
    """It ended in a RecursionError (or read /dev/zero until killed), leaving an empty folder."""
    root = tmp_path / "data" / "distloop" / "runs"
    crafted = crafted_status_folders(root)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    data = example_data()
    data["training"] = {"steps": 3, "seed": 0}
    (tmp_path / "p.json").write_text(json.dumps(data))
    result = distloop("run", str(tmp_path / "p.json"), "--quiet", env=env)
    assert result.returncode == 0, result.stderr
    (made,) = set(root.iterdir()) - set(crafted)
    assert read_status(made)["status"] == "finished"
    assert read_status(made)["name"] == f"{data['name']} #1"


@pytest.mark.slow
def test_a_run_still_training_is_not_deleted(tmp_path) -> None:
    """Deleting it did not stop it: it went on and wrote a partial, unlisted folder again."""
    data = example_data()
    data["training"] = {"steps": 100_000, "seed": 0}
    (tmp_path / "p.json").write_text(json.dumps(data))
    run_dir = tmp_path / "runs" / "training"
    command = [sys.executable, "-m", "distloop.gui.launcher", "run", str(tmp_path / "p.json")]
    run = subprocess.Popen(
        [*command, "--out", str(run_dir), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "metrics.csv").is_file() or not read_metrics(run_dir).get("step"):
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        with pytest.raises(RunFolderBusy) as refused:
            delete_run(run_dir)
        assert str(refused.value) == (
            f"{run_dir} is still being written by its run (process {run.pid}): stop the run "
            "first; nothing was deleted"
        )
        assert read_status(run_dir)["status"] == "running"
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 130
    finally:
        run.kill()
        run.wait()
    delete_run(run_dir)
    assert not run_dir.exists()


@pytest.mark.slow
def test_a_run_whose_folder_is_deleted_under_it_fails_and_writes_no_folder_again(
    tmp_path,
) -> None:
    """Deleted by hand (rm -rf) while training, a run went on and wrote a partial folder again
    at its next checkpoint, one the runs list did not show."""
    data = example_data()
    data["training"] = {"steps": 100_000, "seed": 0, "checkpoint_every": 50}
    (tmp_path / "p.json").write_text(json.dumps(data))
    run_dir = tmp_path / "runs" / "training"
    command = [sys.executable, "-m", "distloop.gui.launcher", "run", str(tmp_path / "p.json")]
    run = subprocess.Popen(
        [*command, "--out", str(run_dir), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "checkpoints" / "checkpoint").is_file():
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        while run_dir.exists():  # the run writes on meanwhile: what it adds goes too
            shutil.rmtree(run_dir, ignore_errors=True)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
        run.wait()
    assert run.returncode == 1, stderr
    # rm -rf takes the folder's entries in no set order: the write that meets the deletion
    # first names what it found gone.
    assert re.fullmatch(
        f"distloop: the run failed: RunFolderError: the run folder {re.escape(str(run_dir))} "
        r"was deleted while the run wrote it \((metrics\.csv|checkpoints|engine\.log|the "
        r"checkpoint of step \d+) is gone\): the run stops",
        stderr.strip().splitlines()[-1],
    ), stderr
    assert not run_dir.exists()


def test_a_write_that_meets_a_deletion_says_so_whichever_part_went_first(tmp_path) -> None:
    """rm -rf took checkpoints/ before metrics.csv: the checkpoint's error (TensorFlow's
    SaveV2, ENOENT) was named instead of the deletion, in one CI run of the test above."""
    (tmp_path / METRICS_FILE).write_text("step,loss,elapsed_s\n")
    lost = FileNotFoundError(errno.ENOENT, "No such file or directory", "ckpt-100_temp")
    said = folder_write_error(tmp_path, lost, "the checkpoint of step 100", parts=["checkpoints"])
    assert str(said) == (
        f"the run folder {tmp_path} was deleted while the run wrote it (checkpoints is gone): "
        "the run stops"
    )
    (tmp_path / "checkpoints").mkdir()
    said = folder_write_error(tmp_path, lost, "the checkpoint of step 100", parts=["checkpoints"])
    assert "(the checkpoint of step 100 is gone)" in str(said)
    (tmp_path / METRICS_FILE).unlink()
    said = folder_write_error(tmp_path, lost, "the checkpoint of step 100", parts=["checkpoints"])
    assert "(metrics.csv is gone)" in str(said)
    full = OSError(errno.ENOSPC, "No space left on device")
    assert str(folder_write_error(tmp_path, full, "status.json")).startswith(
        f"no space left on device in {tmp_path} ("
    )
