"""The one way to open a run (``engine.run_start``): the folder made and claimed, the run
opened, or one refusal that leaves the folder as it was. TensorFlow-free: nothing starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from distloop.engine.examples import load_example
from distloop.engine.process import EngineProcess
from distloop.engine.resume_rules import Layout
from distloop.engine.run_folder import LOCK_FILE, RunFolderLock, write_status
from distloop.engine.run_start import RunRefused, RunRequest, open_requested, resumable


def _entries(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_new_run_claims_its_folder_and_holds_it_until_closed(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "run"
    opened = open_requested(RunRequest(load_example("seed"), folder))
    try:
        assert opened.folder == folder and isinstance(opened.handle, EngineProcess)
        assert RunFolderLock.held(folder)
        with pytest.raises(RunRefused, match="another run"):
            open_requested(RunRequest(load_example("seed"), folder))
    finally:
        opened.handle.close()
    assert not RunFolderLock.held(folder)


def test_a_folder_holding_a_run_is_refused_naming_the_command_that_continues_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    write_status(folder, "stopped")
    before = _entries(folder)
    with pytest.raises(RunRefused) as refused:
        open_requested(RunRequest(load_example("seed"), folder, command="cluster"))
    assert f"continue its run with distloop cluster --resume {folder}" in str(refused.value)
    assert not refused.value.usage
    assert _entries(folder) == before  # no lock file left behind


def test_a_folder_of_the_users_own_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / "chapter1.tex").write_text("\\chapter{One}")
    for overwrite in (False, True):
        with pytest.raises(RunRefused, match="choose an empty or a new folder for --out"):
            open_requested(RunRequest(load_example("seed"), folder, overwrite=overwrite))
        assert _entries(folder) == ["chapter1.tex"]


def test_a_cluster_that_cannot_be_laid_out_leaves_no_folder_it_made(tmp_path: Path) -> None:
    folder = tmp_path / "made"
    request = RunRequest(load_example("seed"), folder, layout="cluster")  # mirrored: no cluster
    with pytest.raises(RunRefused, match="a cluster runs"):
        open_requested(request)
    assert not folder.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    with pytest.raises(RunRefused):
        open_requested(RunRequest(load_example("seed"), kept, layout="cluster"))
    assert kept.is_dir() and not (kept / LOCK_FILE).exists()


def test_a_run_another_command_continues_is_a_usage_refusal(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "project.json").write_text(load_example("seed").to_json())
    write_status(folder, "stopped")
    assert resumable(folder, Layout.RUN).project.name == load_example("seed").name
    with pytest.raises(RunRefused) as refused:
        resumable(folder, Layout.CLUSTER)
    assert refused.value.usage and "distloop run --resume" in str(refused.value)
    (folder / "project.json").write_text("{")
    with pytest.raises(RunRefused) as unreadable:
        resumable(folder, Layout.RUN)
    assert not unreadable.value.usage
