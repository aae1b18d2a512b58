"""The .deb as users get it: built from the checkout, ``apt install``-ed into fresh Debian.

The package (``packaging/build.py --only deb``, kept by the content of what goes into
it: tests/support/deb_builds.py) is installed with ``apt install ./distloop_*.deb`` into fresh
minbase Debian 12 and 13 roots (tests/support/debian_roots.py): apt brings its Depends from
Debian's mirror, and the root has no Python at all, so the installed app can only run
from what the package holds. There, as a user would: ``--version``, ``example seed``,
``validate``, ``devices``, a headless seed run whose losses are the reference guide
program's, ``predict`` on that run's model; the window under Xvfb with the seed, Run to
its last step and Help ▸ Distloop Guide (screenshots in ``build/packaging-test/``);
the desktop entry through ``desktop-file-validate``; then ``apt purge distloop`` must
leave no file of the package behind. ``lintian`` checks the package itself.

Root, debootstrap and Debian's mirror are needed (skipped, saying which, without them).
Alone: ``bash packaging/setup.sh test tests/packaging/test_packaging.py``. ``DISTLOOP_DEB=path``
tests a prebuilt package instead of the checkout's.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
from distloop.engine import __version__
from support.deb_builds import BUILD_TIMEOUT_S, cached_deb, lintian_report
from support.debian_roots import (
    cached_root,
    first_display,
    in_root,
    root_display_env,
    root_windows,
    skip_unless_roots_can_be_built,
    stop_group,
    unpacked_root,
)
from support.distloop_testing import REPO, guide_trace

SUITES = ["bookworm", "trixie"]
ARTIFACTS = REPO / "build" / "packaging-test"
RUNS = "root/.local/share/distloop/runs"  # the window's runs, in the root
COMMAND_TIMEOUT_S = 600.0  # one command in the root: apt, or TensorFlow on a loaded machine
WINDOW_CLASS = '": ("distloop" '  # xwininfo's line of a top-level window of the app
PREDICT = (
    "predict",
    "seed-run",
    "inputs.csv",
    "--json",
)  # in /root: the installed and the source engine

T = TypeVar("T")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="Linux only"),
    pytest.mark.xdist_group("deb"),  # one worker, from the start: see pyproject's addopts
]


@pytest.fixture(scope="module")
def deb() -> Path:
    """The package under test: the checkout's (built or cached) or ``DISTLOOP_DEB``'s."""
    skip_unless_roots_can_be_built(SUITES[0])
    if shutil.which("dpkg-deb") is None:
        pytest.skip("needs dpkg-deb (Debian or Ubuntu)")
    prebuilt = os.environ.get("DISTLOOP_DEB")
    return Path(prebuilt).resolve() if prebuilt else cached_deb()


@pytest.fixture(scope="module", name="guide_trace")
def guide_trace_fixture() -> np.ndarray:
    """The reference guide program's 100 losses, once for the module."""
    return guide_trace(timeout_s=600)


def tool(name: str) -> str:
    """A host tool the checks need; CI installs it (``install-linux-deps.sh test``)."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: run bash packaging/install-linux-deps.sh test")
    return found


STALE_OVERRIDES = ("unused-override", "mismatched-override")
"""lintian's tags for an override in packaging/distloop.lintian-overrides that matches
nothing (any more): the overrides stay as few as the package needs."""


@pytest.mark.root
@pytest.mark.timeout(BUILD_TIMEOUT_S * 2)
def test_lintian_finds_no_errors_and_every_override_is_used(deb: Path) -> None:
    tool("lintian")
    report = lintian_report(deb)
    print(report)
    tags = [line.split(maxsplit=3) for line in report.splitlines()]  # E: distloop: tag ...
    errors = [" ".join(fields) for fields in tags if fields[:1] == ["E:"]]
    assert not errors, "\n".join(errors)
    stale = [" ".join(fields) for fields in tags if fields[2:3] and fields[2] in STALE_OVERRIDES]
    assert not stale, "\n".join(stale)
    fields = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Package", "Version", "Depends"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"Version: {deb.name.split('_')[1]}" in fields
    assert "libglib2.0-0t64 | libglib2.0-0" in fields  # the name in Debian 13 or 12
    for package in ("libegl1", "libgl1", "libxkbcommon0", "libfontconfig1", "libxcb-cursor0"):
        assert package in fields


def in_the_root(root: Path, command: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``command`` in the root as its root user types it: a clean environment, system PATH."""
    return subprocess.run(
        in_root(root, command, env={"DEBIAN_FRONTEND": "noninteractive", **env}),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def said(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def metrics(run_dir: Path) -> dict[str, list[float]]:
    """A run folder's metrics.csv, by column."""
    with (run_dir / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {name: [float(row[name]) for row in rows] for name in ("step", "loss")}


@pytest.mark.root
@pytest.mark.timeout(BUILD_TIMEOUT_S + 3 * COMMAND_TIMEOUT_S + 1800)
@pytest.mark.parametrize("suite", SUITES)
def test_apt_installs_the_deb_into_a_fresh_debian_where_it_runs_and_purges(
    suite: str, deb: Path, guide_trace: np.ndarray, tmp_path: Path
) -> None:
    mirror = skip_unless_roots_can_be_built(suite)
    with unpacked_root(cached_root(suite, mirror, []), tmp_path / suite) as root:
        no_python = in_the_root(root, "! command -v python3 && ! command -v python")
        assert no_python.returncode == 0, f"the fresh root has a Python: {said(no_python)}"
        shutil.copy2(deb, root / "tmp" / deb.name)
        started = time.monotonic()
        installed = in_the_root(
            root, f"apt-get update -qq && cd /tmp && apt install -y ./{deb.name}"
        )
        print(f"{suite}: apt install ./{deb.name} took {time.monotonic() - started:.0f} s")
        assert installed.returncode == 0, said(installed)
        (root / "tmp" / deb.name).unlink()
        package_files = (root / "var/lib/dpkg/info/distloop.list").read_text().splitlines()
        check_layout(root)
        check_commands(root, guide_trace)
        check_window(root, ARTIFACTS / suite)
        check_desktop_entry(root)

        purged = in_the_root(root, "apt purge -y distloop")
        assert purged.returncode == 0, said(purged)
        assert_nothing_left(root, package_files)


def check_layout(root: Path) -> None:
    """The bundle in /usr/lib, the command on PATH, the desktop entry and its icons."""
    assert os.readlink(root / "usr/bin/distloop") == "../lib/distloop/distloop"
    assert (root / "usr/lib/distloop/_internal/distloop/resources/examples/seed.json").is_file()
    assert not (root / "opt/distloop").exists()
    assert (root / "usr/share/applications/distloop.desktop").is_file()
    for size in (16, 32, 48, 64, 128, 256, 512):
        assert (root / f"usr/share/icons/hicolor/{size}x{size}/apps/distloop.png").is_file()
    assert (root / "usr/share/icons/hicolor/scalable/apps/distloop.svg").is_file()
    assert in_the_root(root, "! command -v python3").returncode == 0, "Depends brought a Python"


def check_commands(root: Path, guide_trace: np.ndarray) -> None:
    """The command line, in /root, from the system's PATH only."""
    version = in_the_root(root, "distloop --version")
    assert version.stdout.strip() == f"distloop {__version__}", said(version)

    validated = in_the_root(
        root, "cd && distloop example seed > seed.json && distloop validate seed.json"
    )
    assert validated.returncode == 0 and "valid" in validated.stdout, said(validated)

    devices = in_the_root(root, "distloop devices")
    assert devices.returncode == 0 and "CPU" in devices.stdout, said(devices)

    seed = in_the_root(root, "cd && distloop run seed.json --out seed-run")
    assert seed.returncode == 0 and "step=100 loss=" in seed.stdout, said(seed)
    run_dir = root / "root/seed-run"
    assert json.loads((run_dir / "status.json").read_text())["status"] == "finished"
    assert "AutoGraph could not transform" not in (run_dir / "engine.log").read_text()
    trace = metrics(run_dir)
    assert trace["step"] == list(range(1, 101))
    np.testing.assert_allclose(np.float32(trace["loss"]), guide_trace, rtol=1e-5)

    (root / "root/inputs.csv").write_text("1.0\n-1.0\n0.5\n", encoding="utf-8")
    predicted = in_the_root(root, "cd && distloop " + " ".join(PREDICT))
    assert predicted.returncode == 0, said(predicted)
    here = subprocess.run(
        [sys.executable, "-m", "distloop.gui.launcher", *PREDICT],
        cwd=root / "root",
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    assert here.returncode == 0, said(here)
    assert_same_predictions(predicted.stdout, here.stdout)


def assert_same_predictions(installed: str, source: str) -> None:
    """The installed ``predict`` says what the source engine says of the same model."""
    got, expected = (list(map(json.loads, text.splitlines())) for text in (installed, source))
    assert len(got) == len(expected) == 3, installed
    for one, other in zip(got, expected, strict=True):
        assert one.keys() == other.keys()
        for key, value in one.items():
            if isinstance(value, float):
                assert value == pytest.approx(other[key], rel=1e-5), (key, installed, source)
            else:
                assert value == other[key], (key, installed, source)


def check_window(root: Path, shots: Path) -> None:
    """The window under Xvfb (Qt's X11 platform) opens the seed, runs it to its last step
    and opens Help ▸ Distloop Guide; screenshots of each go to ``shots``."""
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    started = in_root(
        root,
        'echo "$DISPLAY" > /tmp/display && exec distloop',
        env={"QT_QPA_PLATFORM": "xcb", "XAUTHORITY": "/tmp/xauthority"},
        inherit=("DISPLAY",),
    )
    log = shots / "window.log"
    with log.open("wb") as output:
        app = subprocess.Popen(
            [
                tool("xvfb-run"),
                *("-a", "-n", first_display(), "-f", str(root / "tmp/xauthority")),
                *("-s", "-screen 0 1600x1000x24 -nolisten tcp", *started),
            ],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        alive = lambda: app.poll() is None  # noqa: E731
        main = wait_for(lambda: window_titled(root, " — Distloop"), alive, log, "the window")
        assert '"seed — Distloop"' in main, main  # the example's name, no file yet
        screenshot(root, shots / "window-seed.png")
        xdotool(root, "windowfocus", "--sync", main.split()[0])
        xdotool(root, "key", "ctrl+r")
        status = wait_for(lambda: finished_run(root), alive, log, "Run to finish the seed")
        assert metrics(status.parent)["step"][-1] == 100
        screenshot(root, shots / "window-after-run.png")
        xdotool(root, "key", "F1")  # Help ▸ Distloop Guide
        guide = wait_for(lambda: window_titled(root, "Distloop Guide"), alive, log, "the guide")
        # the guide's own window once it is viewable (the screen's picture showed the main
        # window while the guide was created but not yet shown; focusing it then failed)
        guide_id = guide.split()[0]
        wait_for(lambda: viewable(root, guide_id), alive, log, "the guide to show")
        time.sleep(1)  # and painted
        screenshot(root, shots / "window-guide.png", window=guide_id)
    finally:
        stop_group(app)
    print(f"screenshots: {shots}")


def wait_for(found: Callable[[], T | None], alive: Callable[[], bool], log: Path, what: str) -> T:
    """What ``found`` returns once it returns something, while the app lives."""
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while time.monotonic() < deadline:
        if (result := found()) is not None:
            return result
        assert alive(), f"the app ended before {what}:\n{log.read_text(errors='replace')[-4000:]}"
        time.sleep(1)
    pytest.fail(
        f"no {what} after {COMMAND_TIMEOUT_S:.0f} s:\n{log.read_text(errors='replace')[-4000:]}"
    )


def window_titled(root: Path, title: str) -> str | None:
    """xwininfo's line of the app's top-level window whose title has ``title``."""
    for line in root_windows(root):
        if WINDOW_CLASS in line and title in line.split(WINDOW_CLASS)[0]:
            return line
    return None


def viewable(root: Path, window_id: str) -> bool | None:
    """True once X says the window is mapped and viewable; None before (for wait_for)."""
    shown = subprocess.run(
        [tool("xwininfo"), "-id", window_id],
        env=root_display_env(root),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return True if "Map State: IsViewable" in shown.stdout else None


def finished_run(root: Path) -> Path | None:
    """The status.json of a run the window finished, if one has."""
    for status in (root / RUNS).glob("*/status.json"):
        if '"finished"' in status.read_text(errors="replace"):
            return status
    return None


def xdotool(root: Path, *args: str) -> None:
    """Types to the window (XTEST): there is no window manager, so it is focused first."""
    subprocess.run([tool("xdotool"), *args], env=root_display_env(root), check=True, timeout=60)


def screenshot(root: Path, path: Path, window: str = "root") -> None:
    subprocess.run(
        [tool("import"), "-window", window, str(path)],
        env=root_display_env(root),
        check=True,
        timeout=60,
    )
    assert path.stat().st_size > 10_000, path


def check_desktop_entry(root: Path) -> None:
    entry = root / "usr/share/applications/distloop.desktop"
    validated = subprocess.run(
        [tool("desktop-file-validate"), str(entry)], capture_output=True, text=True, check=False
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "error" not in validated.stdout.lower(), validated.stdout


def assert_nothing_left(root: Path, package_files: list[str]) -> None:
    """No file or folder the package installed is left, but folders other packages own
    (/usr/bin, /usr/share/icons...); and no name with distloop in it outside the user's home."""
    owned: set[str] = set()
    for listing in (root / "var/lib/dpkg/info").glob("*.list"):
        owned |= set(listing.read_text(errors="replace").splitlines())
    left = [
        name
        for name in package_files
        if name not in owned and os.path.lexists(root / name.lstrip("/")) and name != "/."
    ]
    assert not left, f"apt purge distloop left: {left[:20]}"
    named = subprocess.run(
        [
            *("find", str(root), "-xdev", "-iname", "*distloop*"),
            *("-not", "-path", f"{root}/root/*", "-not", "-path", f"{root}/tmp/*"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not named, f"apt purge distloop left: {named[:20]}"
