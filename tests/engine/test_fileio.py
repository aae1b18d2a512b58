"""Atomic saves keep what the user set on a file: its mode, its owner, its link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from distloop.engine.fileio import atomic_write_text


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_saved_file_keeps_its_mode(tmp_path) -> None:
    path = tmp_path / "shared.json"
    path.write_text("old")
    path.chmod(0o664)
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert mode(path) == 0o664


def test_a_new_file_gets_the_umask_s_mode_not_0600(tmp_path, umask_022) -> None:
    path = tmp_path / "new.json"
    atomic_write_text(path, "text")
    assert mode(path) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["new.json"]


@pytest.mark.root
def test_a_saved_file_keeps_its_owner(tmp_path) -> None:
    path = tmp_path / "theirs.json"
    path.write_text("old")
    os.chown(path, 4321, 4322)
    atomic_write_text(path, "new")
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4322)


def test_a_link_stays_a_link_and_its_target_gets_the_text(tmp_path) -> None:
    target = tmp_path / "real" / "project.json"
    target.parent.mkdir()
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "project.json"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and link.readlink() == target
    assert target.read_text() == "new" and mode(target) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["project.json"]


def test_without_following_links_the_link_is_replaced_and_its_target_untouched(tmp_path) -> None:
    target = tmp_path / "elsewhere.csv"
    target.write_text("keep")
    link = tmp_path / "metrics.csv"
    link.symlink_to(target)
    atomic_write_text(link, "new", follow_symlinks=False)
    assert not link.is_symlink() and link.read_text() == "new"
    assert target.read_text() == "keep"


def test_the_folder_is_synced_after_the_rename(tmp_path, monkeypatch) -> None:
    """The new name is durable only once the folder itself is synced."""
    synced: list[tuple[bool, list[str]]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        is_folder = stat.S_ISDIR(os.fstat(fd).st_mode)
        synced.append((is_folder, sorted(p.name for p in tmp_path.iterdir())))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    atomic_write_text(tmp_path / "status.json", "{}")
    assert synced[-1] == (True, ["status.json"])
