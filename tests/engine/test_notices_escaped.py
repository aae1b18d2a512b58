"""Notices quote what a project or a host wrote; they print it so that it neither starts a
line of its own nor steers the terminal (clears it, reverses the text after it)."""

from __future__ import annotations

import json
from pathlib import Path

from support.distloop_testing import distloop, synthetic_project


def test_a_data_path_with_a_line_break_and_escapes_is_one_escaped_line_in_the_notice(
    tmp_path: Path,
) -> None:
    data = synthetic_project(1)
    data["data"] = {
        "source": "csv",
        "path": "/nowhere\n\x1b[2Jdistloop: all fine\u202e.csv",
        "label_column": "y",
        "global_batch_size": 8,
    }
    path = tmp_path / "project.json"
    path.write_text(json.dumps(data))
    for command in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "r")]):
        done = distloop(*command)
        assert done.returncode == 1
        assert done.stderr.splitlines() == [
            f"distloop: {path} has 1 problem(s):",
            "  data.path: /nowhere\\n\\x1b[2Jdistloop: all fine\\u202e.csv does not exist",
        ]
