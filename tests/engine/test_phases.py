"""Every phase of a run says what it is doing: the engine's phases, printed by
``distloop run`` and shown by the window, with how long each took in the log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.data_folders import image_project, write_linked_folder
from support.distloop_testing import distloop

FILES = 20_000
"""Tens of thousands of files: the folder a run checked for 38 s without a word."""


@pytest.fixture(scope="module")
def big_folder_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("phases")
    folder = write_linked_folder(root / "images", FILES // 4)
    project = image_project(folder, training={"steps": 6, "seed": 1, "checkpoint_every": 3})
    project["model"]["layers"][-1]["units"] = 4
    path = root / "project.json"
    path.write_text(json.dumps(project), encoding="utf-8")
    return path


def test_distloop_run_prints_each_phase_in_order_with_progress(
    big_folder_project: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = distloop("run", str(big_folder_project), "--out", str(out), timeout_s=600)
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("distloop: ")]
    phases = [line.removeprefix("distloop: ") for line in said if line.endswith("…")]
    assert phases == [
        "loading TensorFlow…",
        "building the model…",
        "preparing the data…",
        "listing data.path's images…",
        f"checking {FILES:,} images…",
        f"decoding {FILES:,} images once…",
        "building the input pipeline…",
        "tracing the step…",
        "first step…",
        "writing the checkpoint of step 3…",
        "writing the checkpoint of step 6…",
        "saving the model…",
    ]
    # the check's progress, by tenths, between its start and the next phase
    first, last = (
        said.index(f"distloop: checking {FILES:,} images…"),
        said.index(f"distloop: decoding {FILES:,} images once…"),
    )
    counted = [line for line in said[first + 1 : last] if line.endswith(f" of {FILES:,}")]
    assert counted, "\n".join(said)
    assert said.index(f"distloop: decoding {FILES:,} images once…") < said.index(
        next(line for line in said if "replica(s) on" in line)
    )
    log = (out / "engine.log").read_text(encoding="utf-8")
    for phase in ("loading TensorFlow", f"checking {FILES:,} images", "tracing the step"):
        assert re.search(rf"{re.escape(phase)}: \d+\.\d s", log), phase  # how long it took
