"""Past runs in the window: their curves from the run folder, and whether they can resume.

Everything here reads what the engine left on disk (``metrics.csv``, ``eval.csv``,
``project.json``), so a run looks the same whether it ran a minute ago in this
window, last week from the command line, or on another machine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.config import Project, load_project
from engine.run_folder import EVAL_FILE, METRICS_COLUMNS, PROJECT_FILE, read_eval, read_metrics
from engine.run_history import INTERRUPTED, RunSummary
from gui.loss_plot import LossPlot

# A finished run has nothing left; a running one is busy (an interrupted one is not: its
# owner was killed, engine.run_history).
RESUMABLE = ("stopped", "failed", INTERRUPTED)
# Strategies whose tasks are separate processes (engine.tf_config's multi-machine ones).
CLUSTER_STRATEGIES = ("multi_worker_mirrored", "parameter_server")
REPLICA_PREFIX = "replica_"


def plot_run(plot: LossPlot, run_dir: Path) -> None:
    """Appends the run's steps and evaluations to ``plot`` exactly as the files hold them.

    Raises OSError when ``metrics.csv`` cannot be read.
    """
    metrics = read_metrics(run_dir)
    steps = metrics.get("step", [])
    replicas = sorted(
        (name for name in metrics if name.startswith(REPLICA_PREFIX)),
        key=lambda name: int(name.removeprefix(REPLICA_PREFIX) or 0),
    )
    named = {
        name: values
        for name, values in metrics.items()
        if name not in METRICS_COLUMNS and not name.startswith(REPLICA_PREFIX)
    }
    plot.append(
        steps,
        metrics.get("loss", []),
        np.column_stack([metrics[name] for name in replicas]) if replicas else None,
        named or None,
    )
    if (run_dir / EVAL_FILE).is_file():
        evaluations = read_eval(run_dir)
        for step, val_loss in zip(
            evaluations.get("step", []), evaluations.get("val_loss", []), strict=False
        ):
            plot.add_evaluation(int(step), val_loss)


def compare_runs(plot: LossPlot, runs: list[RunSummary]) -> list[str]:
    """Overlays each run's loss on ``plot``; returns what could not be read, one line a run.

    Two runs with the same name are told apart by their folder's name.
    """
    problems: list[str] = []
    names = plot.comparison_names()
    for run in runs:
        try:
            metrics = read_metrics(run.path)
        except OSError as exc:
            problems.append(f"{run.name}: {exc.strerror or exc}")
            continue
        key = str(run.path)
        others = {name for other, name in names.items() if other != key}
        name = run.name if run.name not in others else f"{run.name} ({run.path.name})"
        plot.add_comparison(key, name, metrics.get("step", []), metrics.get("loss", []))
        names[key] = name
    return problems


def can_resume(run: RunSummary) -> bool:
    """Stopped, failed and interrupted runs continue from their last checkpoint."""
    return run.status in RESUMABLE


def resume_project(run_dir: Path) -> Project:
    """The project the run ran, from its folder (raises ProblemsError when unreadable)."""
    return load_project(run_dir / PROJECT_FILE)


def resume_refusal(project: Project, run_dir: Path) -> str | None:
    """Why the window cannot continue this run; None when it can."""
    kind = project.strategy.kind
    if kind in CLUSTER_STRATEGIES:
        return (
            f"{kind} runs as a cluster of processes, and the window resumes single-process "
            f"runs only; continue it with `distloop cluster --resume {run_dir}`."
        )
    return None
