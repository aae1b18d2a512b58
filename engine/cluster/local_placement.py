"""Every task of a cluster on this machine, in a private network: the placement of
``distloop cluster`` and the window's Run (``engine.cluster.placement``).

The tasks get ``127.0.0.1`` addresses on free ports and start inside one network
namespace whose only interface is its own loopback (``engine.netns``), so no port of
the cluster is open on the machine's network. Where the system does not allow that,
they run in the machine's network, and the log says their ports are open there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..cluster_layout.plan import local_cluster_config, task_dir_name
from ..config import Project
from ..netns import PrivateNetwork, PrivateNetworkUnavailable, start_private_network
from ..process import EngineProcess
from ..run_folder import TASKS_DIR
from ..stack_dumps import TaskStack, ask_for_stacks
from ..tf_config import TaskSpec, TFConfig
from .blame import stopped_tasks
from .placement import Note
from .top_folder import ClusterFolder


class LocalPlacement:
    """The tasks of the cluster run in ``run_dir`` as engine processes here, each in its
    folder ``run_dir/tasks/TASK``; ``workers`` (a multi-worker cluster's size) as
    :func:`~engine.cluster_layout.plan.local_cluster_config` takes it; ``fresh_ports`` lays the
    cluster out on new ports (a resume: the old ones may be taken by now)."""

    def __init__(self, run_dir: Path, *, workers: int | None = None, fresh_ports: bool = False):
        self.run_dir = run_dir
        self._workers = workers
        self._fresh_ports = fresh_ports
        self._network: PrivateNetwork | None = None

    def _task_dir(self, task: TaskSpec) -> Path:
        return self.run_dir / TASKS_DIR / task_dir_name(task)

    def tf_config(self, project: Project) -> TFConfig:
        return local_cluster_config(project, self._workers, fresh_ports=self._fresh_ports)

    def engine(
        self, project: Project, task: TaskSpec, config: TFConfig, *, resume: bool = False
    ) -> EngineProcess:
        return EngineProcess(project, self._task_dir(task), task=str(task), resume=resume)

    def share_checkpoint(self, config: TFConfig, chief: TaskSpec, others: list[TaskSpec]) -> None:
        ClusterFolder(self.run_dir, lambda _exc: None).share_chief_checkpoint(
            task_dir_name(chief), [task_dir_name(task) for task in others]
        )

    def open_network(self) -> Note:
        """The private network, or the machine's with a warning where there is none."""
        try:
            self._network = start_private_network()
        except PrivateNetworkUnavailable as exc:
            return Note(
                "warning",
                f"the tasks run in this machine's network ({exc}), so TensorFlow's "
                "unauthenticated gRPC ports are open on every interface while the run lasts: "
                "run it on a trusted network or behind a firewall",
            )
        return Note(
            "info", "the tasks run in a private network: their ports are open on its loopback only"
        )

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        with self._network.spawning() if self._network else contextlib.nullcontext():
            yield

    def close_network(self) -> None:
        """Ends the holder of the network namespace."""
        if self._network is not None:
            self._network.close()
            self._network = None

    def ask_for_stacks(
        self, config: TFConfig, tasks: list[TaskSpec], pids: Mapping[str, int]
    ) -> list[TaskStack]:
        return ask_for_stacks(
            {str(task): (pids[str(task)], self._task_dir(task)) for task in tasks}
        )

    def stacks_where(self, stacks: list[TaskStack]) -> str:
        return f"{TASKS_DIR}/*/stacks.txt"

    def stopped_tasks(self, pids: Mapping[str, int | None]) -> list[str]:
        return stopped_tasks(pids)

    def settings(self, project: Project) -> None:
        """A local cluster's resume lays it out anew: it needs nothing recorded."""
        return None

    def bring_back(self, project: Project, run_dir: Path) -> None:
        """Every task wrote its folder here: nothing to collect."""
        return None

    def close(self) -> None:
        self.close_network()
