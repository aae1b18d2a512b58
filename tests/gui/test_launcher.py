"""Which ``distloop`` command lines open the window and which go to the CLI (no Qt started)."""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from distloop.engine.cli import COMMANDS, build_parser
from distloop.engine.examples import example_text
from distloop.gui.launcher import wants_window
from support.distloop_testing import REPO, distloop
from support.headless import without_gui_packages


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["gui"],
        ["--project", "p.json"],
        ["--project=p.json"],
        ["FILE.json"],  # the README's "distloop FILE.json": once a usage error
        ["/some/where/Project.JSON"],
    ],
)
def test_window_command_lines(args: list[str]) -> None:
    assert wants_window(args)


@pytest.mark.parametrize(
    "args",
    [["run", "p.json"], ["validate", "x.json"], ["--version"], ["-h"], ["vaildate", "x"]],
)
def test_command_lines_for_the_cli(args: list[str]) -> None:
    assert not wants_window(args)


def test_an_existing_file_without_json_suffix_opens_the_window(tmp_path) -> None:
    project = tmp_path / "project.distloop"
    project.write_text("{}")
    assert wants_window([str(project)])


def test_the_launcher_knows_every_subcommand() -> None:
    (commands,) = (a for a in build_parser()._actions if a.dest == "command")
    assert set(commands.choices) == set(COMMANDS)


@pytest.mark.root
def test_without_the_gui_extra_the_cli_works_and_the_window_says_how_to_add_it(
    tmp_path: Path,
) -> None:
    """A headless install (``pip install distloop``): commands run, the window asks for Qt."""
    env = without_gui_packages(tmp_path / "site")
    for window in (distloop(env=env), distloop("gui", env=env)):
        assert window.returncode == 1
        assert window.stdout == ""
        assert window.stderr.count("\n") == 1, window.stderr
        assert "the window needs the 'gui' extra" in window.stderr
        assert "pip install 'distloop[gui]'" in window.stderr

    project = tmp_path / "seed.json"
    project.write_text(example_text("seed"), encoding="utf-8")
    valid = distloop("validate", str(project), env=env)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "valid" in valid.stdout


def loaded_library_folder(soname: str) -> Path | None:
    """The folder the dynamic loader takes ``soname`` from on this machine, if it has it."""
    try:
        ctypes.CDLL(soname)
    except OSError:
        return None
    maps = Path("/proc/self/maps").read_text().split()
    paths = {Path(word) for word in maps if Path(word).name.startswith(soname)}
    return next(iter(paths)).parent if paths else None


def without_library(soname: str, tmp_path: Path) -> list[str]:
    """A command prefix that runs its command where ``soname`` is missing, as on a machine
    that never installed it: a private mount namespace lays an overlay over the library's
    folder, with a whiteout for the name the loader looks for."""
    if shutil.which("unshare") is None:
        pytest.skip("hiding a system library needs unshare (a private mount namespace)")
    folder = loaded_library_folder(soname)
    if folder is None:
        pytest.skip(f"{soname} is not installed here")
    upper, work = tmp_path / "upper", tmp_path / "work"
    upper.mkdir()
    work.mkdir()
    os.mknod(upper / soname, stat.S_IFCHR, os.makedev(0, 0))  # overlayfs' whiteout
    mount = (
        f"mount -t overlay overlay -o lowerdir={folder},upperdir={upper},workdir={work} {folder}"
    )
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount an overlay here: {probe.stderr.strip()}")
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'{mount} && exec "$@"',
        "sh",
    ]


@pytest.mark.root
@pytest.mark.parametrize(
    ("soname", "platform"),
    [
        ("libglib-2.0.so.0", "offscreen"),  # QtCore links it: the import of Qt fails
        ("libEGL.so.1", "offscreen"),  # QtGui links it
        ("libxcb-cursor.so.0", "xcb"),  # only the xcb plugin needs it: Qt would abort
    ],
)
def test_a_missing_system_library_is_named_with_the_command_that_installs_it(
    soname: str, platform: str, tmp_path: Path
) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": platform, "HOME": str(tmp_path)}
    command = [*without_library(soname, tmp_path), sys.executable, "-m", "distloop.gui.launcher"]
    result = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"the window needs the system library {soname}, which is missing" in result.stderr
    assert f"bash {REPO / 'packaging/install-linux-deps.sh'} app" in result.stderr
