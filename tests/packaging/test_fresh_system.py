"""The README's first command, typed as written on fresh Debian 12 and 13 systems.

The development machine and CI's already have what a fresh machine lacks (glib, the xcb
libraries, a Python that lets pip install), so every other test passes where a new
user's first command fails. Here a minbase root with only ``python3 python3-venv
python3-pip git`` (tests/support/debian_roots.py), this machine's added certificate authorities
and a clone of this checkout's HEAD gets the command read from README.md, run as
written in the clone under xvfb-run with Qt's X11 platform: the window must appear,
and the installed ``distloop run --example seed`` must print the seed's first loss as
the engine here does.

Run it alone as root (about 4 minutes for both systems here, and a minute or two more
for each root the first time, to build it): ``bash packaging/setup.sh test
tests/packaging/test_fresh_system.py``.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.debian_roots import (
    cached_root,
    first_display,
    in_root,
    root_windows,
    skip_unless_roots_can_be_built,
    stop_group,
    trust_host_certificates,
    unpacked_root,
)
from support.distloop_testing import REPO

PACKAGES = ["python3", "python3-venv", "python3-pip", "git"]
CLONE = "/home/distloop"  # where the user cloned the repository, in the root
INSTALL_TIMEOUT_S = 1200.0  # apt, a venv and pip's download of TensorFlow and Qt
FIRST_LOSS = re.compile(r"^step=1 loss=(\S+)$", re.MULTILINE)


def readme_commands() -> list[str]:
    """The ``sh`` blocks of the README's "On a fresh machine", each one line."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## On a fresh machine\n", 1)[1].split("\n## ", 1)[0]
    blocks = [
        block.strip().splitlines() for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    ]
    assert len(blocks) == 2, f"not two commands in the README's On a fresh machine: {blocks}"
    assert all(len(lines) == 1 for lines in blocks), f"a command of several lines: {blocks}"
    return [lines[0] for lines in blocks]


def test_ci_runs_the_readmes_second_command() -> None:
    """From the repository root, as the README's reader types it."""
    ci = (REPO / ".ci/run").read_text(encoding="utf-8").splitlines()
    commands = [line for line in ci if line.strip() and not line.startswith("#")]
    assert 'cd "$(dirname "$0")/.."' in commands
    assert commands[-1] == readme_commands()[1]


@pytest.fixture
def fresh_clone(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A fresh root of ``request.param`` with a clone of this checkout in it; deleted after."""
    suite = request.param
    mirror = skip_unless_roots_can_be_built(suite)
    tarball = cached_root(suite, mirror, PACKAGES)
    with unpacked_root(tarball, tmp_path / suite) as root:
        trust_host_certificates(root)
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        clone = root / CLONE.lstrip("/")
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
        subprocess.run(
            ["git", "-C", str(clone), "checkout", "--quiet", "--detach", head], check=True
        )
        yield root


def first_loss(output: str) -> float:
    found = FIRST_LOSS.search(output)
    assert found is not None, f"no step=1 loss in:\n{output[-3000:]}"
    return float(found.group(1))


@pytest.fixture(scope="module")
def seed_first_loss_here(tmp_path_factory: pytest.TempPathFactory) -> float:
    run = subprocess.run(
        [sys.executable, "-m", "distloop.gui.launcher", "run", "--example", "seed"],
        cwd=REPO,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path_factory.mktemp("data"))},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return first_loss(run.stdout)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(INSTALL_TIMEOUT_S + 300)
@pytest.mark.parametrize("fresh_clone", ["bookworm", "trixie"], indirect=True)
def test_the_readmes_first_command_opens_the_window_on_a_fresh_debian(
    fresh_clone: Path, seed_first_loss_here: float, tmp_path: Path
) -> None:
    root = fresh_clone
    for tool in ("xvfb-run", "xwininfo"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: run bash packaging/install-linux-deps.sh test")
    command = readme_commands()[0]
    typed = in_root(
        root,
        f'echo "$DISPLAY" > /tmp/display && cd {CLONE} && {command}',
        env={"QT_QPA_PLATFORM": "xcb", "XAUTHORITY": "/tmp/xauthority"},
        inherit=("DISPLAY",),
    )
    log = tmp_path / "typed.log"
    with log.open("wb") as output:
        typing = subprocess.Popen(
            [
                "xvfb-run",
                "-a",
                "-n",
                first_display(),
                "-f",
                str(root / "tmp/xauthority"),
                "-s",
                "-screen 0 1400x900x24 -nolisten tcp",
                *typed,
            ],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + INSTALL_TIMEOUT_S
        windows: list[str] = []
        while not windows and typing.poll() is None and time.monotonic() < deadline:
            time.sleep(2)
            windows = [line for line in root_windows(root) if "— Distloop" in line]
        exited = typing.poll()
    finally:
        stop_group(typing)
    said = log.read_text(errors="replace")[-4000:]
    assert exited is None, f"`{command}` exited with {exited} before a window showed:\n{said}"
    assert windows, f"no Distloop window after {INSTALL_TIMEOUT_S:.0f} s of `{command}`:\n{said}"
    assert "Traceback" not in said, said

    seed = subprocess.run(
        in_root(root, f"cd {CLONE} && .venv/bin/distloop run --example seed"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert seed.returncode == 0, seed.stdout[-2000:] + seed.stderr[-3000:]
    # the same program and seed; TensorFlow builds may differ in the last bits
    assert math.isclose(first_loss(seed.stdout), seed_first_loss_here, rel_tol=1e-5), seed.stdout
