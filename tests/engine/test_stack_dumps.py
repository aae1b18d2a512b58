"""Reading a hung cluster's stack dumps: the odd task out, or the silent one, is named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from distloop.engine.run_folder import write_status
from distloop.engine.stack_dumps import TaskStack, ask_for_stacks, diagnose
from support.distloop_testing import distloop


def test_the_task_elsewhere_than_its_peers_is_named() -> None:
    stacks = [
        TaskStack("worker:0", "training.py:90 in run_loop"),
        TaskStack("worker:1", "data.py:12 in read_block"),
        TaskStack("worker:2", "training.py:90 in run_loop"),
    ]
    assert diagnose(stacks) == [
        "worker:1 is in data.py:12 in read_block while its peers wait in training.py:90 in run_loop"
    ]
    together = [TaskStack("worker:0", "x.py:1 in f"), TaskStack("worker:1", "x.py:1 in f")]
    assert diagnose(together) == [
        "every task waits in x.py:1 in f: look at the network between them"
    ]


WAITER = (
    "import sys, threading, time\n"
    "from pathlib import Path\n"
    "from distloop.engine.stack_dumps import write_stacks_on_signal\n"
    "write_stacks_on_signal(Path(sys.argv[1]))\n"
    "threading.Thread(target=lambda: time.sleep(60), daemon=True).start()\n"
    "def wait_here():\n"
    "    print('ready', flush=True)\n"
    "    time.sleep(60)\n"
    "wait_here()\n"
)
"""A process that registered the dump, waiting in time.sleep inside wait_here."""


def test_a_real_process_dumps_its_main_thread_where_it_waits(tmp_path: Path) -> None:
    """The innermost frame of its main thread is read back, not its helper thread's."""
    process = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        time.sleep(0.2)
        (found,) = ask_for_stacks({"worker:0": (process.pid, tmp_path)})
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert found.task == "worker:0"
    assert found.where is not None and found.where.endswith("in wait_here")


def test_a_task_folder_on_its_host_dumps_the_engine_its_status_names(tmp_path: Path) -> None:
    """``distloop cluster --dump-task DIR``, which a launch runs over ssh on a task's host:
    the engine whose pid the folder's status.json names writes its stacks, and the answer
    is where it waits and the absolute path of its dump, as JSON."""
    process = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        write_status(tmp_path, "running", pid=process.pid, task="worker:1")
        done = distloop("cluster", "--dump-task", str(tmp_path), timeout_s=60)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["where"].endswith("in wait_here") and said["error"] is None
    assert said["file"] == str((tmp_path / "stacks.txt").resolve())
    assert "wait_here" in (tmp_path / "stacks.txt").read_text()

    write_status(tmp_path, "finished", pid=process.pid)
    ended = json.loads(distloop("cluster", "--dump-task", str(tmp_path), timeout_s=60).stdout)
    assert ended["where"] is None and "no run is running" in ended["error"]
