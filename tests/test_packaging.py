"""The Linux package works without Python: installed from the .deb, run from /usr/bin.

Skipped in the default suite: it builds the PyInstaller bundle and the ``.deb``
(minutes), installs the package system-wide with ``dpkg -i`` (root) and removes it
again with ``dpkg -r distloop``. Run it with::

    DISTLOOP_PACKAGING_TEST=1 python -m pytest tests/test_packaging.py -v

``DISTLOOP_DEB=path/to/distloop_X_amd64.deb`` tests a prebuilt package instead of
building one (built with zstd compression unless ``DISTLOOP_DEB_COMPRESSION=xz``).
The installed copy runs with a clean environment (no PYTHON* variables, PATH
without the editable install) from a folder outside the source tree, so it cannot
import anything from the checkout. The GUI runs under Xvfb; its screenshots land
in ``build/packaging-test/`` (or ``DISTLOOP_PACKAGING_ARTIFACTS``).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from distloop.engine import __version__

REPO = Path(__file__).resolve().parents[1]
ENABLED = os.environ.get("DISTLOOP_PACKAGING_TEST") == "1"
HOW = "DISTLOOP_PACKAGING_TEST=1 python -m pytest tests/test_packaging.py"
INSTALLED = Path("/usr/bin/distloop")

pytestmark = [
    pytest.mark.skipif(
        not ENABLED,
        reason=f"builds and installs the .deb system-wide (minutes, root); run: {HOW}",
    ),
    pytest.mark.skipif(
        ENABLED and not sys.platform.startswith("linux"), reason="the .deb is Linux-only"
    ),
    pytest.mark.timeout(3600),
]

# Drives the app inside xvfb-run: waits for the main window, screenshots it, presses
# Ctrl+R (Run) when xdotool is there, waits for the run to finish, screenshots again.
GUI_DRIVER = r"""#!/bin/sh
shots="$1"
/usr/bin/distloop > "$shots/gui.log" 2>&1 &
app=$!
found=""
for i in $(seq 1 240); do
  if xwininfo -root -tree 2>/dev/null | grep -q ' Distloop": ("distloop"'; then found=1; break; fi
  kill -0 $app 2>/dev/null || break
  sleep 0.5
done
if [ -z "$found" ]; then
  echo "no Distloop window"; kill $app 2>/dev/null; wait $app; exit 3
fi
sleep 2
xwininfo -root -tree | grep ' Distloop": ("distloop"' > "$shots/windows.txt"
import -window root "$shots/gui-started.png"
if command -v xdotool >/dev/null 2>&1; then
  # the main window; no window manager here, so focus it directly, then type (XTEST)
  window=$(xdotool search --onlyvisible --name 'Distloop' | head -1)
  xdotool windowfocus --sync "$window"
  xdotool key ctrl+r
  for i in $(seq 1 360); do
    grep -qs '"finished"' "$HOME"/.local/share/distloop/runs/*/status.json && break
    sleep 0.5
  done
  sleep 2
  import -window root "$shots/gui-after-run.png"
fi
kill $app
wait $app
exit 0
"""


def clean_env(home: Path) -> dict[str, str]:
    """What a desktop session would pass: no Python variables, no editable install on PATH."""
    return {"HOME": str(home), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def run_installed(
    args: list[str], home: Path, cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Runs /usr/bin/distloop (never the editable install's entry point)."""
    return subprocess.run(
        [str(INSTALLED), *args],
        env=clean_env(home),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def debian_version() -> str:
    """distloop.engine.__version__ as the package spells it (packaging/build.py's rule)."""
    spec = importlib.util.spec_from_file_location("distloop_build", REPO / "packaging" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.debian_version(__version__)


def build_deb() -> Path:
    """Builds the bundle and the .deb with packaging/build.py; returns the .deb."""
    subprocess.run(
        [
            sys.executable,
            str(REPO / "packaging" / "build.py"),
            "--only",
            "deb",
            # zstd: seconds instead of xz's quarter of an hour on two cores (dpkg >= 1.21.18)
            "--deb-compression",
            os.environ.get("DISTLOOP_DEB_COMPRESSION", "zstd"),
        ],
        cwd=REPO,
        check=True,
        timeout=3000,
    )
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return REPO / "dist" / f"distloop_{debian_version()}_{arch}.deb"


def package_installed() -> bool:
    """Whether dpkg has a distloop package installed."""
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Status}", "distloop"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode == 0 and "installed" in result.stdout.split()


@pytest.fixture(scope="module")
def deb() -> Iterator[Path]:
    """The .deb, installed for the module's tests and removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("installing a .deb needs root")
    if not shutil.which("dpkg-deb"):
        pytest.skip("needs dpkg (Debian or Ubuntu)")
    if package_installed():
        pytest.skip("a distloop package is already installed here; not touching it")
    prebuilt = os.environ.get("DISTLOOP_DEB")
    path = Path(prebuilt).resolve() if prebuilt else build_deb()
    assert path.is_file(), path
    installed = subprocess.run(["dpkg", "-i", str(path)], check=False)
    try:
        if installed.returncode != 0:
            # Missing Depends (e.g. libxcb-cursor0): apt fetches them and configures distloop.
            subprocess.run(
                ["apt-get", "install", "-f", "-y", "--no-install-recommends"],
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                check=True,
            )
        assert package_installed()
        yield path
    finally:
        subprocess.run(["dpkg", "-r", "distloop"], check=False)
        assert not package_installed()
        assert not INSTALLED.exists() and not Path("/opt/distloop").exists()


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """An empty home folder, so no settings or runs of this machine's user leak in."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def test_package_layout_and_metadata(deb: Path) -> None:
    """Bundle under /opt, command, desktop entry, icons, Version and Qt's Depends."""
    assert INSTALLED.is_symlink() and INSTALLED.resolve() == Path("/opt/distloop/distloop")
    assert Path("/opt/distloop/_internal/distloop/resources/examples/seed.json").is_file()
    assert Path("/usr/share/applications/distloop.desktop").is_file()
    for size in (16, 32, 48, 64, 128, 256, 512):
        assert Path(f"/usr/share/icons/hicolor/{size}x{size}/apps/distloop.png").is_file()
    assert Path("/usr/share/icons/hicolor/scalable/apps/distloop.svg").is_file()
    fields = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Version", "Depends"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"Version: {debian_version()}" in fields
    for package in ("libegl1", "libgl1", "libxkbcommon0", "libfontconfig1", "libdbus-1-3"):
        assert package in fields
    assert "libglib2.0-0t64 | libglib2.0-0" in fields
    assert "libxcb-cursor0" in fields


def test_version_and_subcommands(deb: Path, home: Path, tmp_path: Path) -> None:
    """--version, example, validate and devices answer from the installed copy."""
    version = run_installed(["--version"], home, tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"distloop {__version__}"

    seed = run_installed(["example", "seed"], home, tmp_path)
    assert seed.returncode == 0, seed.stderr
    (tmp_path / "seed.json").write_text(seed.stdout, encoding="utf-8")
    valid = run_installed(["validate", "seed.json"], home, tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "valid" in valid.stdout

    devices = run_installed(["devices"], home, tmp_path)
    assert devices.returncode == 0, devices.stderr
    assert "CPU" in devices.stdout and "TensorFlow" in devices.stdout


def losses(run_dir: Path) -> list[str]:
    """The loss column of a run folder's metrics.csv."""
    with (run_dir / "metrics.csv").open(newline="") as handle:
        return [row["loss"] for row in csv.DictReader(handle)]


def test_headless_seed_run_matches_the_source_engine(deb: Path, home: Path, tmp_path: Path) -> None:
    """A frozen engine process trains the seed exactly as the source engine does."""
    out = tmp_path / "frozen"
    result = run_installed(["run", "--example", "seed", "--out", str(out)], home, tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "step=100 loss=" in result.stdout
    assert json.loads((out / "status.json").read_text())["status"] == "finished"
    assert "AutoGraph could not transform" not in (out / "engine.log").read_text()

    reference = tmp_path / "source"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "distloop.engine",
            "--example",
            "seed",
            "--out",
            str(reference),
            "--quiet",
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert losses(out) == losses(reference)
    assert len(losses(out)) == 100


@pytest.mark.skipif(
    not (shutil.which("xvfb-run") and shutil.which("import") and shutil.which("xwininfo")),
    reason="needs xvfb-run, imagemagick's import and x11-utils' xwininfo",
)
def test_gui_starts_and_runs_the_seed(deb: Path, home: Path, tmp_path: Path) -> None:
    """The installed GUI opens under Xvfb and runs the seed through a frozen engine."""
    shots = Path(os.environ.get("DISTLOOP_PACKAGING_ARTIFACTS", REPO / "build" / "packaging-test"))
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob("gui*"):
        old.unlink()
    driver = tmp_path / "gui_driver.sh"
    driver.write_text(GUI_DRIVER, encoding="utf-8")
    driver.chmod(0o755)
    result = subprocess.run(
        ["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", str(driver), str(shots)],
        env=clean_env(home),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    log = (shots / "gui.log").read_text(errors="replace") if (shots / "gui.log").exists() else ""
    assert result.returncode == 0, result.stdout + result.stderr + log
    assert "seed" in (shots / "windows.txt").read_text()
    assert (shots / "gui-started.png").stat().st_size > 10_000
    if shutil.which("xdotool"):
        runs = list((home / ".local" / "share" / "distloop" / "runs").glob("*/status.json"))
        assert runs, "the GUI's Run started no engine"
        assert json.loads(runs[0].read_text())["status"] == "finished"
        assert (shots / "gui-after-run.png").stat().st_size > 10_000
    print(f"screenshots: {shots}")
