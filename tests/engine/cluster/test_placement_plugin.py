"""A placement is a plug-in: one defined wholly in this module, passed as ``placement``, runs
a real two-worker cluster through :class:`LocalCluster`, which asks it for everything that
depends on where the tasks run and never which placement it has
(``engine.cluster.placement``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from distloop.engine.cluster import LocalCluster
from distloop.engine.cluster.placement import Note
from distloop.engine.cluster_layout import local_cluster_config, task_dir_name
from distloop.engine.config import Project
from distloop.engine.messages import Log, RunFinished
from distloop.engine.process import EngineProcess
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import TASKS_DIR, read_status
from distloop.engine.stack_dumps import TaskStack, ask_for_stacks
from distloop.engine.tf_config import TaskSpec, TFConfig
from support.clusters import multi_worker

NOTE = "the tasks run where this test's placement puts them: in this machine's network"


class MachineNetworkPlacement:
    """Every task here, in the machine's own network (no private one), in its folder of the
    run folder's ``tasks/``; it keeps the calls the cluster made, in order."""

    def __init__(self, run_dir: Path) -> None:
        self.tasks_root = run_dir / TASKS_DIR
        self.calls: list[str] = []

    def tf_config(self, project: Project) -> TFConfig:
        self.calls.append("tf_config")
        return local_cluster_config(project, None)

    def engine(
        self, project: Project, task: TaskSpec, config: TFConfig, *, resume: bool = False
    ) -> EngineProcess:
        self.calls.append(f"engine {task}")
        return EngineProcess(project, self.tasks_root / task_dir_name(task), task=str(task))

    def share_checkpoint(self, config: TFConfig, chief: TaskSpec, others: list[TaskSpec]) -> None:
        self.calls.append("share_checkpoint")

    def open_network(self) -> Note:
        self.calls.append("open_network")
        return Note("info", NOTE)

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        self.calls.append("spawning")
        yield

    def close_network(self) -> None:
        self.calls.append("close_network")

    def ask_for_stacks(
        self, config: TFConfig, tasks: list[TaskSpec], pids: Mapping[str, int]
    ) -> list[TaskStack]:
        return ask_for_stacks(
            {str(t): (pids[str(t)], self.tasks_root / task_dir_name(t)) for t in tasks}
        )

    def stacks_where(self, stacks: list[TaskStack]) -> str:
        return f"{self.tasks_root}/*/stacks.txt"

    def stopped_tasks(self, pids: Mapping[str, int | None]) -> list[str]:
        return []

    def settings(self, project: Project) -> None:
        return None

    def bring_back(self, project: Project, run_dir: Path) -> None:
        return None

    def close(self) -> None:
        self.calls.append("close")


@pytest.mark.slow
def test_a_placement_defined_here_runs_a_real_cluster(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    placement = MachineNetworkPlacement(run_dir)
    cluster = LocalCluster(load_project_data(multi_worker(steps=6)), run_dir, placement=placement)
    cluster.start()
    messages = []
    try:
        deadline = time.monotonic() + 300
        while not cluster.done:
            assert time.monotonic() < deadline, "the cluster run timed out"
            messages += cluster.poll(0.2)
    finally:
        cluster.close()
    assert isinstance(messages[-1], RunFinished) and messages[-1].last_step == 6, messages[-1]
    assert Log(level="info", source="engine", text=NOTE) in messages
    assert placement.calls[:5] == [
        "tf_config", "engine worker:0", "engine worker:1", "open_network", "spawning"
    ]  # fmt: skip
    # The network ends with the run (again on close: the cluster's close may come first);
    # no checkpoint is shared on a fresh run, and closing the placement is its caller's.
    assert set(placement.calls[5:]) == {"close_network"}
    for task in ("worker-0", "worker-1"):
        assert read_status(run_dir / TASKS_DIR / task)["status"] == "finished"
    assert read_status(run_dir)["status"] == "finished"
