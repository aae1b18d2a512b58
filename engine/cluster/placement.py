"""Where a cluster's tasks run: the one interface :class:`~engine.cluster.LocalCluster` starts,
follows and ends them through, whatever machines they are on.

A placement answers for one cluster run, as torchrun's agent and Ray Train's worker group
keep the *where* apart from the *what*: the TF_CONFIG (which hosts, which ports), each
task's engine (a process here, or one started on its host), the chief's checkpoints
shared with the other trainers on a resume, where the tasks' ports are open (the note
said at start), the tasks' stacks on request, and, for the caller at the end, the
chief's folder collected into the run folder, the settings a resume needs and closing
what the placement holds. The supervisor never asks which placement it has.

Two placements: :class:`~engine.cluster.local_placement.LocalPlacement`, every task on
this machine in a private network namespace (``distloop cluster``, the window's Run), and
:class:`~engine.cluster.ssh.SshLaunch`, each task on the host TF_CONFIG names, over SSH
(``distloop launch``, Run on Hosts). Another (containers, a cloud's machines) is one
module with these methods, passed as ``placement``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from ..config import Project
    from ..messages import Message
    from ..stack_dumps import TaskStack
    from ..tf_config import TaskSpec, TFConfig


class Note(NamedTuple):
    """A line of the launcher's log (``info`` or ``warning``)."""

    level: str
    text: str


class TaskEngine(Protocol):
    """One task's engine as the supervisor drives it: ``EngineProcess`` here,
    ``RemoteEngine`` on a host."""

    project: Project

    @property
    def pid(self) -> int | None: ...

    @property
    def exit_code(self) -> int | None: ...

    @property
    def done(self) -> bool: ...

    def lock_folder(self) -> None: ...

    def start(self) -> None: ...

    def poll(self, timeout_s: float = 0.1) -> list[Message]: ...

    def request_stop(self) -> None: ...

    def kill(self) -> None: ...

    def close(self) -> None: ...


class Placement(Protocol):
    """Where each task of a cluster run runs, and what that takes (see the module)."""

    def tf_config(self, project: Project) -> TFConfig:
        """The cluster the tasks form; ProblemsError when ``project`` cannot run here."""
        ...

    def engine(
        self, project: Project, task: TaskSpec, config: TFConfig, *, resume: bool = False
    ) -> TaskEngine:
        """``task``'s engine, not started (``project`` is the task's own); ``resume``
        continues the task's run in its folder."""
        ...

    def share_checkpoint(self, config: TFConfig, chief: TaskSpec, others: list[TaskSpec]) -> None:
        """Before a resume: the chief's checkpoints into the other trainers' folders (only
        the chief keeps them, every task restores from its own folder)."""
        ...

    def open_network(self) -> Note:
        """Readies the network the tasks start in; what it means for their ports, said
        in the run's log at start (TensorFlow's gRPC ports are unauthenticated)."""
        ...

    def spawning(self) -> AbstractContextManager[None]:
        """Around the tasks' starts: what they start inside (a private network's)."""
        ...

    def close_network(self) -> None:
        """The run has ended: releases what :meth:`open_network` holds."""
        ...

    def ask_for_stacks(
        self, config: TFConfig, tasks: list[TaskSpec], pids: Mapping[str, int]
    ) -> list[TaskStack]:
        """Every running task (``pids``: its engine's, by task name) writes its Python
        stacks into its folder, where it runs; where each stands. Takes seconds."""
        ...

    def stacks_where(self, stacks: list[TaskStack]) -> str:
        """Where the log says the stacks of :meth:`ask_for_stacks` are."""
        ...

    def stopped_tasks(self, pids: Mapping[str, int | None]) -> list[str]:
        """The tasks (by name, with their engines' pids) a signal has stopped (SIGSTOP),
        where that can be seen: a failure is blamed on them."""
        ...

    def settings(self, project: Project) -> dict[str, str | None] | None:
        """What a resume needs to place the tasks the same way (kept in ``status.json``'s
        ``launch``); None when a resume needs nothing."""
        ...

    def bring_back(self, project: Project, run_dir: Path) -> str | None:
        """After the run: the chief's folder collected into ``run_dir`` (what Try It and
        Resume read); the line that says so, None when it is there already. OSError with
        the line that says why it could not."""
        ...

    def close(self) -> None:
        """Ends whatever the placement still holds (connections, a network)."""
        ...
