"""Which ``distloop`` command lines open the window and which go to the CLI (no Qt started)."""

from __future__ import annotations

from pathlib import Path

import pytest
from distloop.engine.cli import COMMANDS, build_parser
from distloop.engine.examples import example_text
from distloop.gui.launcher import wants_window
from distloop_testing import distloop
from headless import without_gui_packages


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
