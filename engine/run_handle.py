"""Which launcher drives a run (one engine process or a local cluster): the one rule
that picks it.

Whether a run is one :class:`engine.process.EngineProcess` or a whole
:class:`engine.cluster.LocalCluster` (whose merged stream reads like one run's) is
decided here, once, by :func:`open_run`, for new runs and resumed runs alike, so the
CLI and the window cannot disagree about which projects run as a cluster. Both answer
to :class:`engine.engine_handle.EngineHandle`, below the launchers; this module sits
above them. TensorFlow-free: the window imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .cluster_layout import runs_as_cluster
from .config import Project
from .engine_handle import ClusterFactory, EngineFactory, EngineHandle
from .run_folder import RunFolderLock

if TYPE_CHECKING:
    from .cluster.placement import Placement
    from .process import WarmEngines

Layout = Literal["auto", "single", "cluster"]
"""``auto``: a cluster when the strategy needs one (the window); ``single``: one engine
process, possibly one task of a cluster running elsewhere (``distloop run``);
``cluster``: every task here (``distloop cluster``)."""


def open_run(
    project: Project,
    folder: Path,
    *,
    resume: bool = False,
    layout: Layout = "auto",
    workers: int | None = None,
    folder_lock: RunFolderLock | None = None,
    name_missing_peers: bool = False,
    warm_engines: WarmEngines | None = None,
    engine_factory: EngineFactory | None = None,
    cluster_factory: ClusterFactory | None = None,
    placement: Placement | None = None,
) -> EngineHandle:
    """The handle that runs ``project`` in ``folder``, not started yet.

    A multi-machine project cannot train in one process under ``auto``: its one task
    would wait for peers that never come, so it becomes a local cluster, every task
    its own engine process on this machine; ``resume`` continues the cluster's tasks
    in their folders. A single-process run takes the warm engine of ``warm_engines``
    when one is ready. ``engine_factory`` and ``cluster_factory`` replace the real
    processes (the window's tests). Raises ProblemsError when a cluster cannot be
    laid out (a TF_CONFIG the launcher refuses, a parameter_server resume). ``placement``
    puts the cluster's tasks elsewhere than here (``engine.cluster.placement``), e.g. on
    the hosts its TF_CONFIG names, over SSH.
    """
    # The process modules load when a run opens: `distloop validate` and the like stay quick.
    cluster = layout == "cluster" or (layout == "auto" and runs_as_cluster(project))
    if cluster:
        if cluster_factory is not None:
            return cluster_factory(project, folder, resume=resume)
        from .cluster import LocalCluster

        return LocalCluster(
            project,
            folder,
            workers=workers,
            resume=resume,
            folder_lock=folder_lock,
            placement=placement,
        )
    if engine_factory is not None:
        return engine_factory(project, folder, resume=resume)
    if warm_engines is not None:
        return warm_engines.engine(project, folder, resume=resume)
    from .process import EngineProcess

    return EngineProcess(
        project,
        folder,
        resume=resume,
        folder_lock=folder_lock,
        name_missing_peers=name_missing_peers,
    )
