"""Property-based tests of run folders from elsewhere: whatever a crafted or broken run folder
holds (links anywhere, huge or deeply nested JSON, devices, crafted checkpoint indexes), the
runs list summarizes it without an exception, and a resume either refuses it in one line
(RunFolderError) or finds nothing in it that reaches outside; nothing outside changes.

Counts (reported in docs/reliability.md): 200 mutated run folders for the runs list and the checks
before a resume, 300 random checkpoint indexes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project
from distloop.engine.run_folder import (
    RunFolderError,
    RunFolderLock,
    check_checkpoint_indexes,
    prepare_resume,
    write_status,
)
from distloop.engine.run_history import list_runs, summarize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.distloop_testing import synthetic_project

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FILES = ("project.json", "status.json", "metrics.csv", "eval.csv", "engine.log", "model.json")
FOLDERS = ("checkpoints", "tensorboard", "tasks/worker-0", "tasks/worker-0/checkpoints")


def base_run(run_dir: Path) -> None:
    """A stopped run's folder as the engine leaves it (no TensorFlow)."""
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "tensorboard").mkdir()
    (run_dir / "project.json").write_text(json.dumps(synthetic_project(1, steps=10)))
    (run_dir / "metrics.csv").write_text("step,loss,elapsed_s\n1,0.5,0.1\n2,0.25,0.2\n")
    (run_dir / "engine.log").write_text("12:00:00 I [engine] resuming\n")
    (run_dir / "checkpoints" / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n'
    )
    write_status(run_dir, "stopped", last_step=2)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def mutation(outside: Path) -> st.SearchStrategy[Callable[[Path], None]]:
    """One change to a run folder: a link, a device, huge or nested JSON, bytes, a folder."""
    targets = st.sampled_from(FILES + FOLDERS + ("checkpoints/checkpoint", "tasks/worker-0"))
    link_to = st.sampled_from(
        [outside / "keep.txt", outside, outside / "missing", Path("/dev/zero"), Path("/")]
    )
    contents = (
        st.sampled_from([10, 1_000, 100_000]).map(nested)
        | st.just(" " * (2 << 20))
        | st.binary(max_size=200).map(lambda data: data.decode("latin-1"))
        | st.text(max_size=200)
    )

    def link(name: str, target: Path) -> Callable[[Path], None]:
        def apply(run_dir: Path) -> None:
            if (path := _replaceable(run_dir, name)) is not None:
                path.symlink_to(target)

        return apply

    def write(name: str, text: str) -> Callable[[Path], None]:
        def apply(run_dir: Path) -> None:
            if (path := _replaceable(run_dir, name)) is not None:
                path.write_text(text, encoding="utf-8", errors="surrogateescape")

        return apply

    def folder(name: str) -> Callable[[Path], None]:
        def apply(run_dir: Path) -> None:
            if (path := _replaceable(run_dir, name)) is not None:
                path.mkdir()

        return apply

    return (
        st.builds(link, targets, link_to)
        | st.builds(write, targets, contents)
        | st.builds(folder, targets)
        | st.builds(write, st.just("checkpoints/checkpoint"), index_texts(outside))
    )


def index_texts(outside: Path) -> st.SearchStrategy[str]:
    """Checkpoint indexes, TensorFlow's own or crafted: paths anywhere, any lines."""
    names = st.sampled_from(
        ["ckpt-1", "ckpt-22", f"{outside}/victim", "../other/ckpt-5", "ckpt-1/../../x", ""]
    ) | st.text(max_size=30)
    keys = st.sampled_from(["model_checkpoint_path", "all_model_checkpoint_paths"])
    line = st.builds(lambda key, name: f'{key}: "{name}"', keys, names) | st.text(max_size=40)
    return st.lists(line, max_size=6).map("\n".join)


def _replaceable(run_dir: Path, name: str) -> Path | None:
    """``run_dir / name`` emptied for a mutation to put something there; None where an earlier
    mutation made a folder on the way a link or a file (the test never writes through one)."""
    path = run_dir
    for part in Path(name).parts[:-1]:
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            return None
        path.mkdir(exist_ok=True)
    path = path / Path(name).name
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def outside_folder(root: Path) -> Path:
    outside = root / "outside"
    (outside / "victim.index").parent.mkdir(parents=True)
    (outside / "keep.txt").write_text("keep")
    (outside / "victim.index").write_text("someone's checkpoint")
    (root / "other" / "ckpt-5.index").parent.mkdir(parents=True)
    (root / "other" / "ckpt-5.index").write_text("another run's checkpoint")
    return outside


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_mutated_run_folder_is_listed_and_resumed_or_refused_touching_nothing_outside(
    data: st.DataObject,
) -> None:
    with tempfile.TemporaryDirectory(prefix="distloop-fuzz-trust-a-") as folder:
        root = Path(folder)
        outside = outside_folder(root)
        run_dir = root / "runs" / "run"
        base_run(run_dir)
        for change in data.draw(st.lists(mutation(outside), min_size=1, max_size=4)):
            change(run_dir)
        before = snapshot(outside), snapshot(root / "other")

        listed = list_runs(root / "runs")
        assert len(listed) <= 1 and summarize(run_dir).path == run_dir
        if os.path.isdir(run_dir):
            lock = RunFolderLock.acquire(run_dir)
            try:
                prepare_resume(run_dir)
            except RunFolderError as exc:
                assert str(exc) and "\n" not in str(exc).strip()
            else:  # what a resume then reads holds no link, and the project is valid or not
                assert not [p for p in run_dir.rglob("*") if p.is_symlink()]
                with contextlib.suppress(ProblemsError):
                    load_project(run_dir / "project.json")
            finally:
                lock.release()
        assert (snapshot(outside), snapshot(root / "other")) == before


@FUZZ
@given(text=st.data())
def test_a_checkpoint_index_is_refused_unless_it_names_only_its_own_checkpoints(
    text: st.DataObject,
) -> None:
    with tempfile.TemporaryDirectory(prefix="distloop-fuzz-trust-a-") as folder:
        root = Path(folder)
        outside = outside_folder(root)
        index = text.draw(index_texts(outside))
        (root / "run" / "checkpoints").mkdir(parents=True)
        (root / "run" / "checkpoints" / "checkpoint").write_text(index)
        named = [
            line.split('"')[1] if line.count('"') == 2 else None
            for line in index.splitlines()
            if line.strip()
        ]
        try:
            check_checkpoint_indexes(root / "run")
        except RunFolderError:
            return
        assert all(name is not None and name.startswith("ckpt-") for name in named), index
        assert all(name.removeprefix("ckpt-").isdigit() for name in named), index
