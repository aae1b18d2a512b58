"""Retakes resources/screenshots/: the real window on Xvfb (Qt's xcb platform), driven
through the scenes the README shows, with real runs (TensorFlow, a 2-worker cluster).

    python packaging/take_screenshots.py                  # 1400x900, 1024x700 and 1920x1080
    python packaging/take_screenshots.py --size 1024x700 --out /tmp/shots

Each size gets its own Xvfb (the display number is Xvfb's choice), with openbox when it
is installed so the window has a title bar as on a desktop, and empty settings and run
folders. A 1400x900 shot is NAME.png, any other size NAME-WxH.png. Needs Xvfb and
ImageMagick's ``import``; a few minutes per size on two cores. Look at every picture
before committing it: the script drives the window, it does not judge it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "resources" / "screenshots"
DEFAULT_SIZE = "1400x900"
SIZES = (DEFAULT_SIZE, "1024x700", "1920x1080")
DRIVE_TIMEOUT_S = 1800


def _shot(out: Path, name: str, crop: tuple[int, int, int, int] | None = None) -> None:
    """The whole screen, or ``crop`` = (x, y, width, height) of it, as ImageMagick sees X."""
    command = ["import", "-window", "root"]
    if crop is not None:
        x, y, width, height = crop
        command += ["-crop", f"{width}x{height}+{x}+{y}", "+repage"]
    subprocess.run([*command, str(out / f"{name}.png")], check=True, timeout=60)
    print(f"took {out / name}.png", flush=True)


async def _wait_for(predicate: Callable[[], bool], timeout_s: float = 900, step_s: float = 0.2):
    for _ in range(int(timeout_s / step_s)):
        if predicate():
            return
        await asyncio.sleep(step_s)
    raise TimeoutError(f"the window did not get there in {timeout_s:.0f} s")


def _section(window: Any, title: str) -> None:
    editor = window.editor
    editor.setCurrentIndex([editor.tabText(i) for i in range(editor.count())].index(title))


async def _scenes(window: Any, out: Path, suffix: str) -> None:
    """Every scene, in an order that has each one's runs ready when it needs them."""
    from distloop.engine.run_history import summarize
    from distloop.gui.common import dialogs

    def shot(name: str, crop: tuple[int, int, int, int] | None = None) -> None:
        _shot(out, name + suffix, crop)

    # Modal questions would stop the script: its own edits are dropped, a failure printed.
    dialogs.ask_unsaved = lambda _parent, _name: dialogs.Unsaved.DISCARD
    dialogs.show_error = lambda _parent, title, text, details="": print(f"{title}: {text}")

    await asyncio.sleep(4)  # painted, and the first warm engine on its way
    _section(window, "Project")
    shot("main-window")

    window.open_example("digits")  # layer cards and the Dataset preview, before any run
    await asyncio.sleep(1.5)
    _section(window, "Model")
    window.editor.data_form.preview.click()
    await asyncio.sleep(3)
    shot("digits")
    window.run()
    await _wait_for(lambda: not window.controller.active)
    digits_run = window.last_run_dir

    panel = window.try_run(summarize(digits_run))  # five of the digits' own images
    await asyncio.sleep(2)
    folder = REPO / "resources" / "examples" / "digits"
    panel.predict_files([sorted((folder / digit).glob("*.png"))[3] for digit in "13579"])
    await _wait_for(lambda: panel.results.rowCount() >= 5 and not panel.busy(), 300)
    await asyncio.sleep(1.5)
    frame = panel.frameGeometry()
    shot("try-it", (frame.x(), frame.y(), frame.width(), frame.height()))
    panel.close()

    # The classification example mid-run: 3000 steps, its 300 take two seconds here.
    window.open_example("classification")
    await asyncio.sleep(1.5)
    _section(window, "Project")
    window.log_dock.raise_()
    window.editor.training.steps.set_value(3000)
    window.run()
    await _wait_for(
        lambda: window.controller.active and len(window.plot.steps()) >= 1200, 300, 0.05
    )
    shot("running")
    await _wait_for(lambda: not window.controller.active)
    classification_run = window.last_run_dir

    window.open_example("classification")  # as a 2-worker cluster on this machine
    await asyncio.sleep(1.5)
    window.editor.strategy.fields.editors["kind"].set_value("multi_worker_mirrored")
    _section(window, "TF_CONFIG")
    window.editor.tf_config.use_checkbox.setChecked(True)
    window.editor.tf_config.localhost_button.click()
    await asyncio.sleep(2)
    shot("tf-config")
    dock = window.project_dock
    corner = dock.mapToGlobal(dock.rect().topLeft())
    shot("tf-config-editor", (corner.x(), corner.y(), dock.width(), dock.height()))
    window.run()
    await _wait_for(lambda: window.controller.active and len(window.plot.steps()) >= 80)
    window.cluster_panel.raise_()
    await asyncio.sleep(1)
    shot("cluster")
    window.resources_dock.raise_()  # each task's CPU under the loss, on its step axis
    await asyncio.sleep(2)
    shot("resources")
    await _wait_for(lambda: not window.controller.active)
    cluster_run = window.last_run_dir

    window.runs_dock.raise_()  # the three runs compared
    window.runs_panel.refresh()
    window.runs_panel.select_paths([classification_run, digits_run, cluster_run])
    window.runs_panel.compare_action.trigger()
    await asyncio.sleep(2)
    shot("runs")
    window.close()


def drive(out: Path, suffix: str) -> None:
    """The app as ``distloop`` starts it, with the scenes played in its event loop."""
    import qasync
    from distloop.engine.process import WarmEngines
    from distloop.gui.shell.app import application
    from distloop.gui.shell.main_window import MainWindow

    app = application()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = MainWindow(warm_engines=WarmEngines())
    app.aboutToQuit.connect(window.controller.shutdown)
    window.show()
    with loop:
        loop.run_until_complete(_scenes(window, out, suffix))


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _x_server(size: str, number: int | None) -> tuple[subprocess.Popen[bytes], str]:
    """Xvfb on display ``number``, or on one it picks (``-displayfd``); and the display."""
    screen = ["-nolisten", "tcp", "-screen", "0", f"{size}x24"]
    if number is not None:
        xvfb = subprocess.Popen(["Xvfb", f":{number}", *screen], stderr=subprocess.DEVNULL)
        for _ in range(100):
            if (
                subprocess.run(
                    ["xdpyinfo", "-display", f":{number}"], capture_output=True
                ).returncode
                == 0
            ):
                break
            time.sleep(0.1)
        return xvfb, f":{number}"
    read_end, write_end = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_end), *screen],
        pass_fds=(write_end,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    with os.fdopen(read_end) as announced:
        return xvfb, f":{announced.readline().strip()}"


def take(size: str, out: Path, display_number: int | None) -> None:
    """Starts an X server of ``size`` (and openbox), then drives the window on it."""
    xvfb, display = _x_server(size, display_number)
    helpers = [xvfb]
    try:
        if shutil.which("openbox"):  # its messages about menus are noise here
            helpers.append(
                subprocess.Popen(
                    ["openbox"], env={**os.environ, "DISPLAY": display}, stderr=subprocess.DEVNULL
                )
            )
        with tempfile.TemporaryDirectory(prefix="distloop-screenshots-") as home:
            env = {
                **os.environ,
                "DISPLAY": display,
                "QT_QPA_PLATFORM": "xcb",
                "XDG_CONFIG_HOME": f"{home}/config",  # no saved layout, no last project
                "XDG_DATA_HOME": f"{home}/data",  # the runs of this session only
            }
            suffix = "" if size == DEFAULT_SIZE else f"-{size}"
            command = [sys.executable, __file__, "--drive", str(out), f"--suffix={suffix}"]
            subprocess.run(command, env=env, check=True, timeout=DRIVE_TIMEOUT_S)
    finally:
        for helper in reversed(helpers):
            _stop(helper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", action="append", help=f"WxH (default: {', '.join(SIZES)})")
    parser.add_argument("--out", type=Path, default=SCREENSHOTS)
    parser.add_argument("--display", type=int, help="the X display number to use (default: free)")
    parser.add_argument("--drive", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--suffix", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive is not None:
        drive(args.drive, args.suffix)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for size in args.size or SIZES:
        take(size, args.out, args.display)


if __name__ == "__main__":
    main()
