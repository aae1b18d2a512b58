"""Predictions of a run's saved model for ``distloop predict`` and the Try it panel (TF-free).

The window never loads TensorFlow, and ``engine.cli`` is imported by the window's
launcher, so the model runs in a process of its own, spawned as engine processes
are (``engine.child_main.predict_main`` runs ``engine.tf.predict``). It answers
through a pipe with the protocol's messages (``engine.messages``: ``ModelLoaded``,
then a ``Predicted`` per example or an ``InputRefused`` per input that could not be
read). This module finds a run's model, starts that process and reads its messages
back; the command line and the window both call :func:`predict`.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .child_main import predict_main
from .messages import InputRefused, ModelLoaded, Predicted, parse_message
from .run_folder import MODEL_FILE, find_model_folder

PREDICT_TIMEOUT_S = 300.0
"""TensorFlow's start takes seconds; thousands of rows take a few more."""
POLL_S = 0.5
_ctx = multiprocessing.get_context("spawn")


class PredictionError(Exception):
    """Nothing could be predicted (no model, a model that does not load): one line to show."""


@dataclass
class PredictionResult:
    """What a prediction run gave: the model's description, the predictions, bad inputs."""

    model: ModelLoaded | None = None
    predictions: list[Predicted] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """One line per input that could not be predicted, naming the input."""


def model_folder(run_dir: Path) -> Path:
    """The folder holding the run's ``model.keras`` (:func:`find_model_folder`), or why none."""
    if not run_dir.is_dir():
        raise PredictionError(f"{run_dir}: no such run folder")
    folder = find_model_folder(run_dir)
    if folder is not None:
        return folder
    others = sorted(path.name for path in run_dir.glob("model-*.keras"))
    named = f" (it has {', '.join(others)}: custom code's models by name)" if others else ""
    raise PredictionError(
        f"{run_dir}: no {MODEL_FILE} in this run folder{named}; a run saves it when it "
        "finishes or is stopped"
    )


def parse_items(items: Iterable[dict[str, Any]]) -> PredictionResult:
    """The prediction process's messages, in the order it sent them."""
    result = PredictionResult()
    for item in items:
        message = parse_message(item)
        if isinstance(message, ModelLoaded):
            result.model = message
        elif isinstance(message, Predicted):
            result.predictions.append(message)
        elif isinstance(message, InputRefused):
            where = message.input
            result.errors.append(f"{where}: {message.error}" if where else message.error)
    return result


def predict(
    run_dir: Path,
    inputs: Sequence[Path] = (),
    rows: Sequence[str] = (),
    *,
    timeout_s: float = PREDICT_TIMEOUT_S,
) -> PredictionResult:
    """Runs the run's model on ``inputs`` (files) and ``rows`` (CSV text) in a new process.

    The process is spawned as engine processes are, so the frozen app runs it too.
    A whole-run failure (no model, a model that does not load, the process dying)
    raises :class:`PredictionError`; an input that cannot be read is one of the
    result's ``errors`` and the others are still predicted.
    """
    folder = model_folder(run_dir)
    receiver, sender = _ctx.Pipe(duplex=False)
    process = _ctx.Process(
        target=predict_main,
        args=(sender, str(folder), [str(path) for path in inputs], list(rows)),
        name="distloop-predict",
        daemon=True,
    )
    process.start()
    sender.close()
    items: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if time.monotonic() > deadline:
                raise PredictionError(f"{run_dir}: the prediction took over {timeout_s:.0f} s")
            if receiver.poll(POLL_S):
                try:
                    items.append(receiver.recv())
                except EOFError:
                    break
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join()
    result = parse_items(items)
    if result.model is None:
        reason = (
            result.errors[0]
            if result.errors
            else f"the prediction process ended (exit code {process.exitcode}) without an answer"
        )
        raise PredictionError(f"{run_dir}: {reason}")
    return result


def format_prediction(prediction: Predicted, *, shown: int = 5) -> str:
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


def prediction_json(prediction: Predicted) -> str:
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
