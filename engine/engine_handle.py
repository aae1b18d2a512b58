"""What every launcher's run answers to: :class:`EngineHandle` (one engine process, or a
cluster read as one run), and :class:`TaskInfo`, one task of a cluster as views show it.

The CLI and the window follow a run the same way: ``start``, ``poll`` until ``done``,
``request_stop`` (then ``kill`` if it does not stop), ``close``. The launchers
(``engine.process``, ``engine.cluster``) implement these and the views read them, so
they live below both; which launcher opens a run is :func:`engine.run_handle.open_run`'s
choice, above the launchers. TensorFlow-free: the window imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from .config import Project
from .messages import Message, Resources

POLL_S = 0.1
STOP_GRACE_S = 5.0


class EngineHandle(Protocol):
    """A run being driven: one engine process, or a local cluster read as one run."""

    @property
    def done(self) -> bool: ...

    def start(self) -> None: ...

    def poll(self, timeout_s: float = POLL_S) -> list[Message]: ...

    def request_stop(self) -> None: ...

    def kill(self) -> None: ...

    def stop(self, grace_s: float = STOP_GRACE_S) -> None: ...

    def close(self) -> None: ...


TaskState = Literal["starting", "running", "serving", "finished", "stopped", "failed"]


@dataclass(frozen=True)
class TaskInfo:
    """One task as a cluster panel shows it."""

    name: str
    address: str
    state: TaskState
    pid: int | None
    last_line: str
    last_step: int | None
    run_dir: Path
    resources: Resources | None = None
    """Its latest resource sample (``engine.system_metrics``), once one came."""


@runtime_checkable
class ClusterHandle(EngineHandle, Protocol):
    """A run of several tasks, which also lists them (for the window's cluster panel)."""

    def tasks(self) -> list[TaskInfo]: ...


class EngineFactory(Protocol):
    """Makes the handle of a single-process run (a stand-in in the window's tests)."""

    def __call__(
        self, project: Project, run_dir: Path, *, resume: bool = False
    ) -> EngineHandle: ...


class ClusterFactory(Protocol):
    """Lays out a local cluster in ``run_dir``; ``resume`` continues the one there."""

    def __call__(
        self, project: Project, run_dir: Path, *, resume: bool = False
    ) -> ClusterHandle: ...
