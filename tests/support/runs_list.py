"""Run folders made for the window's Runs list: several named, with evaluations,
failures and replica counts, as a real runs folder holds."""

from __future__ import annotations

from pathlib import Path

from distloop.engine.examples import load_example
from distloop.engine.run_folder import (
    EvalWriter,
    MetricsWriter,
    write_status,
)


def fake_run(
    root: Path,
    folder: str,
    *,
    name: str,
    started: float,
    losses: list[float],
    status: str = "finished",
    error: str | None = None,
    replicas: int | None = None,
    named: dict[str, list[float]] | None = None,
    evaluations: dict[int, float] | None = None,
) -> Path:
    """A run folder as the engine leaves one, written without TensorFlow."""
    run_dir = root / folder
    run_dir.mkdir(parents=True)
    project = load_example("seed").model_copy(update={"name": name})
    (run_dir / "project.json").write_text(project.to_json(), encoding="utf-8")
    writer = MetricsWriter(run_dir / "metrics.csv", replicas, named=list(named or ()))
    steps = list(range(1, len(losses) + 1))
    writer.write(
        steps,
        losses,
        [0.25 * step for step in steps],
        [[loss + r for r in range(replicas)] for loss in losses] if replicas else None,
        named,
    )
    writer.close()
    if evaluations:
        eval_writer = EvalWriter(run_dir / "eval.csv", ["val_loss"])
        for step, val_loss in evaluations.items():
            eval_writer.write(step, {"val_loss": val_loss})
        eval_writer.close()
    write_status(
        run_dir, "running", started_at=started, strategy="MirroredStrategy", num_replicas=2
    )
    details = {"error_type": "InvalidArgumentError", "error": error} if error else {}
    write_status(run_dir, status, last_step=len(losses), **details)
    return run_dir
