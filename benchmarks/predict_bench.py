"""Prediction benchmark (issue 21 item 3): Try It's warm prediction process vs a cold one.

Run with ``python -m benchmarks.predict_bench [ROUNDS]`` from the repository root. The
classification example's model (8 features, 4 classes) is saved in a run folder, then:

- cold: ``engine.prediction.predict`` on one pasted row, a new process each time, as
  every Try It prediction was answered before (TensorFlow's start, the model's load,
  the prediction): ROUNDS times;
- warm: one ``PredictionProcess``, as the Try It window keeps it: its first prediction
  (the same start and load), then 10 x ROUNDS predictions of a row and as many
  refusals of a bad row (a row of 2 values), each timed on its own;
- warm image: the same for the digits example's CNN on one 8x8 PNG file (read,
  decoded and scaled as training read it), the kind of model and input Try It is for.

Each time is from the call to the answer in the caller, what the window waits for.
Cold and warm never overlap: the warm process is only started after the cold rounds.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.quick import sized

ROW = ",".join(["0.5"] * 8)
BAD_ROW = "1,2"
WARM_GOAL_S = 0.5


def model_folder(root: Path, example: str) -> Path:
    """A run folder holding an example's model, untrained."""
    from distloop.engine.examples import load_example
    from distloop.engine.tf.model import build_model

    project = load_example(example)
    folder = root / example
    folder.mkdir()
    (folder / "project.json").write_text(project.to_json())
    build_model(project.model, 0).save(folder / "model.keras")
    return folder


def digit_png(path: Path) -> Path:
    import tensorflow as tf

    pixels = tf.constant(np.arange(64, dtype=np.uint8).reshape(8, 8, 1) * 4)
    path.write_bytes(tf.io.encode_png(pixels).numpy())
    return path


def timed(call) -> float:  # type: ignore[no-untyped-def]
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def main() -> None:
    from distloop.engine.prediction import PredictionProcess, predict

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else sized(3, 1)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = model_folder(Path(tmp), "classification")
        image_run = model_folder(Path(tmp), "digits")
        image = digit_png(Path(tmp) / "digit.png")
        cold = [timed(lambda: predict(run_dir, rows=[ROW])) for _ in range(rounds)]
        process = PredictionProcess(run_dir)
        try:
            first = timed(lambda: process.predict(rows=[ROW]))
            warm, refusals = [], []
            for _ in range(10 * rounds):
                warm.append(timed(lambda: process.predict(rows=[ROW])))
                refusals.append(timed(lambda: process.predict(rows=[BAD_ROW])))
        finally:
            process.close()
        process = PredictionProcess(image_run)
        try:
            answer = process.predict([image])
            assert answer.predictions and not answer.errors, answer.errors
            images = [timed(lambda: process.predict([image])) for _ in range(10 * rounds)]
        finally:
            process.close()
    cold_s = statistics.median(cold)
    print(f"cold prediction (new process), median of {rounds}: {cold_s:.2f} s")
    print(f"warm process, first prediction (start and load): {first:.2f} s")
    measured = (
        ("prediction", warm),
        ("refusal of a bad row", refusals),
        ("image prediction (digits CNN, one PNG)", images),
    )
    for name, values in measured:
        median, worst = statistics.median(values), max(values)
        print(
            f"warm {name}, median of {len(values)}: {median * 1000:.1f} ms "
            f"(max {worst * 1000:.1f} ms), ratio to cold {median / cold_s:.2g} "
            f"({cold_s / median:,.0f}x faster)"
        )
    verdict = "ok" if max(*warm, *refusals, *images) <= WARM_GOAL_S else "MISSED"
    print(f"goal: every prediction after the first <= {WARM_GOAL_S} s: {verdict}")


if __name__ == "__main__":
    main()
