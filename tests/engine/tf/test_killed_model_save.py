"""SIGKILL of the engine while it writes ``model.keras``: a real run, killed the moment its
model's temporary appears. No half model is ever under the model's name, and the resume
removes the temporary and saves a model that loads."""

from __future__ import annotations

import os
import signal
import time
import zipfile
from pathlib import Path

from distloop.engine.process import EngineProcess
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import remove_stale_temporaries
from support.distloop_testing import distloop, run_engine, synthetic_project


def _big_model_project(steps: int) -> dict:
    """A model of 4.2 million weights (17 MB saved): its save takes long enough to kill."""
    data = synthetic_project(1, steps=steps, checkpoint_every=steps)
    data["model"]["layers"][0]["units"] = 2048
    data["model"]["layers"].insert(1, {"kind": "dense", "units": 2048})
    return data


def _kill_while_saving(project, run_dir: Path, *, resume: bool) -> None:
    engine = EngineProcess(project, run_dir, resume=resume)
    engine.start()
    try:
        deadline = time.monotonic() + 300
        while not any(run_dir.glob(".*.tmp-model.keras")):
            assert not engine.done, "the run ended before its save could be killed"
            assert time.monotonic() < deadline
            engine.poll(0.001)
        os.kill(engine.pid, signal.SIGKILL)
        while not engine.done:
            engine.poll(0.2)
    finally:
        engine.close()


def _whole_model(path: Path) -> bool:
    with zipfile.ZipFile(path) as archive:
        return archive.testzip() is None and "model.weights.h5" in archive.namelist()


def test_a_kill_during_the_model_save_leaves_no_half_model_and_the_resume_saves_one(
    tmp_path: Path,
) -> None:
    project = load_project_data(_big_model_project(steps=10))
    run_dir = tmp_path / "run"
    _kill_while_saving(project, run_dir, resume=False)
    assert not (run_dir / "model.keras").exists() or _whole_model(run_dir / "model.keras")
    assert list(run_dir.glob(".*.tmp-model.keras"))  # what the killed save left
    first = run_engine(project, run_dir, resume=True)
    assert first["terminal"].status == "finished"
    assert not list(run_dir.glob(".*.tmp-*")), sorted(p.name for p in run_dir.iterdir())
    assert _whole_model(run_dir / "model.keras")
    before = (run_dir / "model.keras").read_bytes()

    # A second save killed midway leaves the first model whole under its name.
    longer = load_project_data(_big_model_project(steps=20))
    (run_dir / "project.json").write_text(longer.to_json())
    _kill_while_saving(longer, run_dir, resume=True)
    assert (run_dir / "model.keras").read_bytes() == before
    example = tmp_path / "x.csv"
    example.write_text(",".join(["0.5"] * 6) + "\n")
    predicted = distloop("predict", str(run_dir), str(example))
    assert predicted.returncode == 0, predicted.stderr
    remove_stale_temporaries(run_dir)
    assert not list(run_dir.glob(".*.tmp-*"))
