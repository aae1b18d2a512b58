"""The real window opens on X11 (Qt's ``xcb`` platform), as on a user's desktop.

Every other GUI test draws offscreen, which needs none of the X libraries Qt's xcb
plugin loads; a machine missing one (libxcb-icccm4, say) passes them all and then
cannot open the window. This test starts ``distloop`` as a user does, on an Xvfb
of its own, and waits until X shows the window.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INSTALL = "bash packaging/install-linux-deps.sh test"
WINDOW_TIMEOUT_S = 30.0
SCREEN = (1280, 800)


def required_tool(name: str, package: str) -> str:
    """The tool's path; missing it fails where the install script would have installed it."""
    path = shutil.which(name)
    if path is not None:
        return path
    if shutil.which("apt-get") is None:
        pytest.skip(f"needs {name} ({package}); the install script covers Debian/Ubuntu only")
    pytest.fail(f"{name} is missing: run {INSTALL} (it installs {package})")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def display() -> Iterator[str]:
    """An Xvfb on a display number it picks itself (``-displayfd``), so runs never collide."""
    xvfb = required_tool("Xvfb", "xvfb")
    read_end, write_end = os.pipe()
    screen = "{}x{}x24".format(*SCREEN)
    server = subprocess.Popen(
        [xvfb, "-displayfd", str(write_end), "-nolisten", "tcp", "-screen", "0", screen],
        pass_fds=(write_end,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end) as announced:
            number = announced.readline().strip()
        assert number, f"Xvfb did not start (exit code {server.poll()})"
        yield f":{number}"
    finally:
        stop(server)


def distloop_windows(display: str, xwininfo: str) -> list[str]:
    tree = subprocess.run(
        [xwininfo, "-root", "-tree", "-display", display],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout
    # the main window's title ("seed — Distloop"): X lists the window a moment before its name
    return [line.strip() for line in tree.splitlines() if "— Distloop" in line]


def test_window_opens_on_xcb(display: str, tmp_path: Path) -> None:
    xwininfo = required_tool("xwininfo", "x11-utils")
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "xcb",
        "DISPLAY": display,
        "HOME": str(tmp_path),  # the user's settings (last project, window layout) stay out
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    log = tmp_path / "stderr.txt"
    with log.open("wb") as stderr_file:
        app = subprocess.Popen(
            [sys.executable, "-m", "distloop.gui.launcher"],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr_file,
        )
    try:
        deadline = time.monotonic() + WINDOW_TIMEOUT_S
        windows: list[str] = []
        while not windows and app.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            windows = distloop_windows(display, xwininfo)
        exited = app.poll()
    finally:
        stop(app)
    stderr = log.read_text(errors="replace")
    assert exited is None, f"distloop exited with {exited} before showing a window:\n{stderr}"
    assert "Could not load the Qt platform plugin" not in stderr, stderr
    assert windows, f"no Distloop window on X after {WINDOW_TIMEOUT_S:.0f} s:\n{stderr}"
    # The window fits the 1280x800 screen: opened at 1400x900, its status bar was off it.
    (main,) = [line for line in windows if "— Distloop" in line]
    width, height, left, top = map(int, re.search(r"(\d+)x(\d+)\+(-?\d+)\+(-?\d+)", main).groups())
    assert (width, height) <= SCREEN and left >= 0 and top >= 0, main
    assert left + width <= SCREEN[0] and top + height <= SCREEN[1], main
