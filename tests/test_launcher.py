"""Which ``distloop`` command lines open the window and which go to the CLI (no Qt started)."""

from __future__ import annotations

import pytest
from distloop.engine.cli import COMMANDS, build_parser
from distloop.gui.launcher import wants_window


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
