"""Predictions of a run's saved model for ``distloop predict`` and the Try it panel (TF-free).

The window never loads TensorFlow, and ``engine.cli`` is imported by the window's
launcher, so the model runs in a subprocess of its own (``python -m
distloop.engine.tf.predict``) that prints one JSON object a line on stdout: first
the model's description, then one line per example, or per input that could not be
read (with ``error``). This module finds a run's model, starts that process and
reads its lines back; the command line and the window both call :func:`predict`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .run_folder import CLASSES_FILE, CONFUSION_FILE, MODEL_FILE, MODEL_RECORD_FILE, TASKS_DIR

PREDICT_TIMEOUT_S = 300.0
"""TensorFlow's start takes seconds; thousands of rows take a few more."""
MODULE = "distloop.engine.tf.predict"


class PredictionError(Exception):
    """Nothing could be predicted (no model, a model that does not load): one line to show."""


@dataclass(frozen=True)
class ClassScore:
    name: str
    probability: float


@dataclass(frozen=True)
class Prediction:
    """One example's prediction: classes best first for classifiers, else the raw outputs."""

    input: str
    """Where it came from: ``rows.csv:3`` (a line), ``x.npy[4]``, ``cat.png``, ``row 1``."""
    classes: list[ClassScore] | None = None
    values: list[float] | None = None

    @property
    def top(self) -> ClassScore | None:
        return self.classes[0] if self.classes else None


@dataclass
class PredictionResult:
    """What a prediction run gave: the model's description, the predictions, bad inputs."""

    model: dict[str, Any] = field(default_factory=dict)
    predictions: list[Prediction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """One line per input that could not be predicted, naming the input."""


def model_folder(run_dir: Path) -> Path:
    """The folder holding the run's ``model.keras``: the run's own, or its chief task's.

    A local cluster's top-level folder records the run; its chief's task folder
    (``tasks/worker-0``, ``tasks/chief-0``) holds what the chief saved.
    """
    if not run_dir.is_dir():
        raise PredictionError(f"{run_dir}: no such run folder")
    if (run_dir / MODEL_FILE).is_file():
        return run_dir
    tasks = run_dir / TASKS_DIR
    if tasks.is_dir():
        for name in ("chief-0", "worker-0"):
            if (tasks / name / MODEL_FILE).is_file():
                return tasks / name
    others = sorted(path.name for path in run_dir.glob("model-*.keras"))
    named = f" (it has {', '.join(others)}: custom code's models by name)" if others else ""
    raise PredictionError(
        f"{run_dir}: no {MODEL_FILE} in this run folder{named}; a run saves it when it "
        "finishes or is stopped"
    )


def has_model(run_dir: Path) -> bool:
    """Whether the run left a ``model.keras`` to predict with (cheap: a few ``stat`` calls)."""
    try:
        model_folder(run_dir)
    except PredictionError:
        return False
    return True


def class_names(folders: Sequence[Path], count: int) -> list[str]:
    """The data's class names from ``classes.json`` when it has ``count`` of them, else numbers.

    ``classes.json`` is a list of names, or an object whose ``classes`` is one.
    """
    for folder in folders:
        try:
            names = json.loads((folder / CLASSES_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(names, dict):
            names = names.get("classes")
        if (
            isinstance(names, list)
            and len(names) == count
            and all(isinstance(name, str) for name in names)
        ):
            return names
    return [str(index) for index in range(count)]


def read_confusion(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``confusion.json`` (classes, matrix), or None when it has none that reads."""
    try:
        folder = model_folder(run_dir)
        report = json.loads((folder / CONFUSION_FILE).read_text(encoding="utf-8"))
    except (PredictionError, OSError, ValueError):
        return None
    matrix = report.get("matrix") if isinstance(report, dict) else None
    classes = report.get("classes") if isinstance(report, dict) else None
    if not (
        isinstance(matrix, list)
        and isinstance(classes, list)
        and len(matrix) == len(classes)
        and all(isinstance(row, list) and len(row) == len(classes) for row in matrix)
    ):
        return None
    return report


def read_model_record(run_dir: Path) -> dict[str, Any] | None:
    """``model.json``: which step the saved weights are, and how they were chosen."""
    try:
        record = json.loads((model_folder(run_dir) / MODEL_RECORD_FILE).read_text("utf-8"))
    except (PredictionError, OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def predict_command(run_dir: Path, inputs: Sequence[Path], rows: Sequence[str] = ()) -> list[str]:
    """The subprocess's command line: the model's folder, the input files, pasted rows."""
    command = [sys.executable, "-m", MODULE, str(model_folder(run_dir))]
    for row in rows:
        command += ["--row", row]
    return [*command, "--", *map(str, inputs)] if inputs else command


def parse_output(stdout: str) -> PredictionResult:
    """The subprocess's JSON lines; anything else on stdout (a library's chatter) is skipped."""
    result = PredictionResult()
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "model" in item:
            result.model = item["model"]
        elif "error" in item:
            where = item.get("input")
            result.errors.append(f"{where}: {item['error']}" if where else item["error"])
        elif "input" in item:
            classes = item.get("classes")
            result.predictions.append(
                Prediction(
                    input=item["input"],
                    classes=[ClassScore(c["name"], float(c["probability"])) for c in classes]
                    if classes is not None
                    else None,
                    values=item.get("values"),
                )
            )
    return result


def predict(
    run_dir: Path,
    inputs: Sequence[Path] = (),
    rows: Sequence[str] = (),
    *,
    timeout_s: float = PREDICT_TIMEOUT_S,
) -> PredictionResult:
    """Runs the run's model on ``inputs`` (files) and ``rows`` (CSV text) in a subprocess.

    A whole-run failure (no model, a model that does not load, TensorFlow dying)
    raises :class:`PredictionError`; an input that cannot be read is one of the
    result's ``errors`` and the others are still predicted.
    """
    command = predict_command(run_dir, inputs, rows)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise PredictionError(f"{run_dir}: the prediction took over {timeout_s:.0f} s") from None
    except OSError as exc:
        raise PredictionError(f"cannot start the prediction: {exc}") from None
    result = parse_output(done.stdout)
    if not result.model:
        reason = result.errors[0] if result.errors else _last_line(done.stderr)
        raise PredictionError(f"{run_dir}: {reason}")
    return result


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "the prediction process ended without an answer"


def format_prediction(prediction: Prediction, *, shown: int = 5) -> str:
    """One line: the input, the top class and its probability, then the runners-up."""
    if prediction.classes:
        top, *rest = prediction.classes
        text = f"{prediction.input}: {top.name} {top.probability:.4f}"
        if rest:
            others = ", ".join(f"{c.name} {c.probability:.4f}" for c in rest[: shown - 1])
            more = f", +{len(rest) - shown + 1} more" if len(rest) > shown - 1 else ""
            text += f"  ({others}{more})"
        return text
    values = prediction.values or []
    shown_values = " ".join(f"{value:.6g}" for value in values[:shown])
    more = f" +{len(values) - shown} more" if len(values) > shown else ""
    return f"{prediction.input}: {shown_values}{more}"


def prediction_json(prediction: Prediction) -> str:
    """The machine form of one prediction (``distloop predict --json``)."""
    item: dict[str, Any] = {"input": prediction.input}
    if prediction.classes is not None:
        top = prediction.classes[0]
        item["class"] = top.name
        item["probability"] = top.probability
        item["classes"] = {c.name: c.probability for c in prediction.classes}
    else:
        item["values"] = prediction.values
    return json.dumps(item)
