"""What the learning-rate finder costs against the run it tunes (issue 38, RESULTS row 16).

Run with ``python -m benchmarks.finder_bench 2`` from the repository root (the number is
the rounds, interleaved). The digits example as shipped (adam, 2 CPU replicas): ``distloop
lr-find`` with its defaults (100 steps, 1e-07 to 10) against the full ``distloop run`` of
the same project, each a real command from Python's start to its exit: wall time, steps
and the training clock (``elapsed_s`` of the last step in each folder's metrics.csv). The
ratios are the finder's share of the run; start-up (TensorFlow's import, the images'
decoding) is most of both on a busy machine, so the training clock says more than wall.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distloop.engine.examples import portable_example_text
from distloop.engine.run_folder import read_metrics

from benchmarks.quick import quick, sized

ROOT = Path(__file__).resolve().parents[1]
FINDER_STEPS = sized(100, 10)
RUN_STEPS = sized(None, 16)
"""The full run's steps: the example's own in a real run, a few in quick mode."""


def _project() -> dict:
    project = json.loads(portable_example_text("digits"))  # its data folder's whole path
    if RUN_STEPS is not None:
        project["training"] = {**project["training"], "steps": RUN_STEPS}
        project["evaluation"] = None
    return project


def _timed(command: list[str]) -> float:
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return time.monotonic() - began


def measure(folder: Path) -> dict[str, tuple[int, float, float]]:
    """``name -> (steps, wall s, training clock s)`` for the finder and the run."""
    project = folder / "project.json"
    project.write_text(json.dumps(_project()))
    distloop = [
        sys.executable,
        "-c",
        "import sys; from distloop.engine.cli import main; sys.exit(main())",
    ]
    found = {}
    wall = _timed(
        [*distloop, "lr-find", str(project), "--steps", str(FINDER_STEPS), "--out", f"{folder}/f"]
    )
    metrics = read_metrics(folder / "f")
    found["lr-find"] = (int(metrics["step"][-1]), wall, float(metrics["elapsed_s"][-1]))
    wall = _timed([*distloop, "run", str(project), "--out", f"{folder}/r", "--quiet"])
    metrics = read_metrics(folder / "r")
    found["run"] = (int(metrics["step"][-1]), wall, float(metrics["elapsed_s"][-1]))
    return found


def main(rounds: int) -> None:
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    for round_number in range(1, rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            found = measure(Path(tmp))
        (f_steps, f_wall, f_clock), (r_steps, r_wall, r_clock) = found["lr-find"], found["run"]
        print(
            f"round {round_number}: lr-find {f_steps} steps, wall {f_wall:.1f} s, training "
            f"clock {f_clock:.1f} s; run {r_steps} steps, wall {r_wall:.1f} s, training clock "
            f"{r_clock:.1f} s; ratios: steps {f_steps / r_steps:.2f}x, training clock "
            f"{f_clock / r_clock:.2f}x, wall {f_wall / r_wall:.2f}x"
        )
    if quick():
        print("quick mode: a few steps of each, no result")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
