"""The top level of a local cluster's run folder, which the launcher writes.

Each task's engine process writes its own folder under ``tasks/`` (``engine.run_folder``
describes one). The top level reads like a single run's folder, for the chief, so the
runs list, the plots and ``distloop cluster --resume`` treat a cluster run like any run::

    project.json   the chief's project, with the TF_CONFIG it ran with
    metrics.csv    the chief's trace (worker 0's when there is no chief), from its messages
    eval.csv       the chief's evaluations, when the project evaluates
    status.json    the cluster's status; a failure names the task that failed
    engine.log     the launcher's notes and every task's warnings and errors

The launcher writes it, not the chief's engine: the cluster's status and log say what
only the launcher sees (which task failed or died first, which were killed, that the
chief itself was killed), and they must be written when the chief's process is gone.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..config import Project
from ..fileio import atomic_write_text
from ..messages import EvalMetrics, RunStarted, StepMetrics
from ..run_folder import (
    CHECKPOINT_DIR,
    EVAL_FILE,
    METRICS_FILE,
    PROJECT_FILE,
    TASKS_DIR,
    EvalWriter,
    MetricsWriter,
    RunFolderError,
    log_line,
    open_log,
    remove_path,
    truncate_eval,
    truncate_metrics,
    write_status,
)


class ClusterFolder:
    """Writes the cluster run folder's top level as the merged stream goes by.

    A write that fails while the run goes on (a full disk) is handed to ``on_failure``
    once, and nothing more is written but the end: the launcher fails the run with one
    clear line rather than ending with a traceback.
    """

    def __init__(self, run_dir: Path, on_failure: Callable[[RunFolderError], None]) -> None:
        self.run_dir = run_dir
        self._on_failure = on_failure
        self._failed = False
        self._metrics: MetricsWriter | None = None
        self._evaluations: EvalWriter | None = None
        self._log: TextIO | None = None

    def share_chief_checkpoint(self, chief_dir: str, other_dirs: Sequence[str]) -> None:
        """Copies the chief's checkpoints into the other trainers' task folders.

        Only the chief keeps checkpoints, but every task restores from its own
        folder (``engine.tf.checkpoint``), and all must start from the same step
        with the same weights. Without a chief checkpoint, all start from step 1.
        Links are neither followed nor copied through (``refuse_links`` ran first).
        """
        tasks_dir = self.run_dir / TASKS_DIR
        source = tasks_dir / chief_dir / CHECKPOINT_DIR
        for name in other_dirs:
            target = tasks_dir / name / CHECKPOINT_DIR
            if target.is_symlink() or target.exists():
                remove_path(target)
            if source.is_dir() and not source.is_symlink():
                shutil.copytree(source, target, symlinks=True)

    def write_project(self, project: Project) -> None:
        """The chief's project, with the TF_CONFIG it runs with (raises if it cannot)."""
        atomic_write_text(self.run_dir / PROJECT_FILE, project.to_json(), follow_symlinks=False)

    def open_log(self) -> None:
        self._log = open_log(self.run_dir)

    def log(self, level: str, text: str) -> None:
        """One line of the launcher's log; a full disk drops the log, not the run."""
        if self._log is None:
            return
        try:
            self._log.write(log_line(level, "cluster", text))
            self._log.flush()
        except OSError:  # the lines still reach the message stream
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def tasks_started(self, started_at: float, tasks: dict[str, dict[str, Any]]) -> None:
        """Every task's process is up: where each serves, its pid and its folder."""
        write_status(self.run_dir, "running", started_at=started_at, tasks=tasks)

    def resumed_at(self, first_step: int) -> None:
        """The chief restarts from ``first_step``: its later rows are trained again."""
        self._guarded(truncate_metrics, self.run_dir, first_step - 1)
        self._guarded(truncate_eval, self.run_dir, first_step - 1)

    def run_started(self, started: RunStarted) -> None:
        """Records what runs (strategy, replicas, devices), as a single engine's status does."""
        details = started.model_dump(include={"num_replicas", "devices", "total_steps"})
        self._guarded(
            write_status,
            self.run_dir,
            "running",
            strategy=started.strategy_kind or started.strategy,
            strategy_class=started.strategy,
            **details,
        )

    def record(self, message: StepMetrics) -> None:
        """Appends the chief's steps to the top-level trace."""
        self._guarded(self._record, message)

    def _record(self, message: StepMetrics) -> None:
        if self._metrics is None:
            replicas = len(message.replica_losses[0]) if message.replica_losses else None
            # The first report names custom step code's losses: the same columns as
            # the chief's own metrics.csv (a resumed run's header has them already).
            named = list(message.named_losses or ())
            self._metrics = MetricsWriter(self.run_dir / METRICS_FILE, replicas, named=named)
        self._metrics.write(
            message.steps,
            message.losses,
            message.elapsed_s,
            message.replica_losses,
            message.named_losses,
        )

    def evaluated(self, message: EvalMetrics) -> None:
        """Appends the chief's evaluation to the top-level ``eval.csv``."""
        self._guarded(self._evaluated, message)

    def _evaluated(self, message: EvalMetrics) -> None:
        if self._evaluations is None:
            self._evaluations = EvalWriter(self.run_dir / EVAL_FILE, list(message.metrics))
        self._evaluations.write(message.step, message.metrics)

    def _guarded(self, write: Callable[..., object], *args: Any, **kwargs: Any) -> None:
        if self._failed:
            return
        try:
            write(*args, **kwargs)
        except RunFolderError as exc:
            self._failed = True
            self._on_failure(exc)

    def finish(self, status: str, **details: Any) -> None:
        """The cluster's end; should even that fail, the run's last message says why."""
        with contextlib.suppress(OSError):
            write_status(self.run_dir, status, **details)

    def close(self) -> None:
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
        if self._evaluations is not None:
            self._evaluations.close()
            self._evaluations = None
        if self._log is not None:
            self._log.close()
            self._log = None
