"""Ctrl-C in the terminal of a real window process, with a real engine training.

The window is ``distloop.gui.shell.app.main`` itself (offscreen), started as a user starts
it; a small driver only presses Run once the project is loaded. Ctrl-C is a real
SIGINT to the window's process, after the engine was stopped and continued with
SIGSTOP/SIGCONT (which once made Ctrl-C take about 15 s).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distloop.engine.run_folder import read_metrics, read_status
from support.distloop_testing import REPO, synthetic_project

pytestmark = pytest.mark.slow

DRIVER = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from distloop.gui.shell import app
from distloop.gui.shell.main_window import MainWindow


def press_run() -> None:
    windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
    if not windows or windows[0].path is None or not windows[0].run_action.isEnabled():
        QTimer.singleShot(200, press_run)
        return
    windows[0].run()


if __name__ == "__main__":
    QApplication([sys.argv[0]])
    QTimer.singleShot(200, press_run)
    sys.exit(app.main(sys.argv[1:]))
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_for_steps(runs: Path, window: subprocess.Popen[bytes], count: int) -> Path:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and window.poll() is None:
        for metrics in runs.glob("*/metrics.csv"):
            try:
                if len(read_metrics(metrics.parent).get("step", [])) >= count:
                    return metrics.parent
            except (OSError, ValueError):
                pass
        time.sleep(0.2)
    raise AssertionError(f"the window's run reached no step {count} (exit {window.poll()})")


def test_ctrl_c_quits_the_window_cleanly_after_the_engine_was_stopped_and_continued(
    tmp_path: Path,
) -> None:
    project = tmp_path / "long.json"
    project.write_text(json.dumps(synthetic_project(1, steps=10**6)), encoding="utf-8")
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as err:
        window = subprocess.Popen(
            [sys.executable, str(driver), str(project)],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        run_dir = _wait_for_steps(tmp_path / "data" / "distloop" / "runs", window, 20)
        engine = read_status(run_dir)["pid"]
        os.kill(engine, signal.SIGSTOP)
        time.sleep(1)
        os.kill(engine, signal.SIGCONT)
        window.send_signal(signal.SIGINT)
        code = window.wait(timeout=60)
    finally:
        if window.poll() is None:
            window.kill()
            window.wait()
    errors = stderr.read_text(errors="replace")
    assert code == 0, errors
    assert "Traceback" not in errors and "KeyboardInterrupt" not in errors, errors
    # stopped like closing the window stops it: after a step, with a checkpoint
    assert read_status(run_dir)["status"] == "stopped"
    assert any((run_dir / "checkpoints").glob("ckpt-*.index"))
    assert not _alive(engine)
