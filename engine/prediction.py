"""A run's saved model in a prediction process, for ``distloop predict`` and Try It (TF-free).

The window never loads TensorFlow, and ``engine.cli`` is imported by the window's
launcher, so the model runs in a process of its own, spawned and read as every
child is (``engine.child_process``; ``engine.child_main.predict_main`` runs
``engine.tf.predict``). It loads the model once and answers request after request, in
the protocol's messages (``engine.messages``): a
:class:`PredictionProcess` keeps it while the Try It window is open, so only the first
prediction waits for TensorFlow; ``distloop predict`` sends it all its inputs as one
request. Whatever the process does (refuses the model, fails, dies), the caller
gets one line: a :class:`PredictionError`, or an input's own entry in
:attr:`PredictionResult.errors` while the other inputs are still predicted. Each answer
is handed on as a plain :class:`Prediction`: its readers (Try It, ``distloop predict``)
read names and numbers, never the wire; the terminal's forms of one are here too
(:func:`format_prediction`, :func:`prediction_json`).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .child_main import predict_main
from .child_process import ChildProcess, describe_exit
from .messages import (
    InputRefused,
    Message,
    ModelLoaded,
    Predicted,
    PredictionDone,
    PredictRequest,
    RunFailed,
)
from .run_folder import RunFolderError, saved_model_folder

PREDICT_TIMEOUT_S = 300.0
"""TensorFlow's start takes seconds; thousands of rows take a few more."""
POLL_S = 0.25
PROCESS = "the prediction process"


class PredictionError(Exception):
    """Nothing could be predicted (no model, a model that does not load, the process
    failing or dying): one line to show."""


@dataclass(frozen=True)
class ClassChance:
    """A class a classifier's example may be, and how likely it is."""

    name: str
    probability: float


@dataclass(frozen=True)
class Prediction:
    """One example's prediction: where it came from (``rows.csv:3``, ``x.npy[4]``,
    ``cat.png``), a classifier's classes best first, else the model's raw outputs."""

    input: str
    classes: tuple[ClassChance, ...] | None = None
    values: tuple[float, ...] | None = None


@dataclass
class PredictionResult:
    """What a prediction request gave: the model's description, the predictions, bad inputs."""

    model: ModelLoaded | None = None
    predictions: list[Prediction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """One line per input that could not be predicted, naming the input."""

    def add(self, message: Predicted | InputRefused) -> None:
        if isinstance(message, Predicted):
            self.predictions.append(_prediction(message))
        else:
            where = message.input
            self.errors.append(f"{where}: {message.error}" if where else message.error)


def _prediction(message: Predicted) -> Prediction:
    classes = message.classes
    return Prediction(
        message.input,
        None if classes is None else tuple(ClassChance(c.name, c.probability) for c in classes),
        None if message.values is None else tuple(message.values),
    )


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
    values = prediction.values or ()
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


def model_folder(run_dir: Path) -> Path:
    """The folder holding the run's ``model.keras`` (:func:`saved_model_folder`); why there
    is none is a PredictionError, the one kind of error a prediction's caller shows."""
    try:
        return saved_model_folder(run_dir)
    except RunFolderError as exc:
        raise PredictionError(str(exc)) from None


class PredictionProcess:
    """One run's model, loaded once in a prediction process kept for many requests.

    The process starts with :meth:`start` (or the first :meth:`predict`) and lives until
    :meth:`close`. When it refuses the model, fails or dies, the :meth:`predict` that
    finds out raises a PredictionError saying so (a death: how it ended, and that the
    next prediction starts it again), and the next :meth:`predict` starts a new one.
    Requests are answered one at a time; :meth:`close` may come from another thread,
    and ends a request in progress with a PredictionError.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._lock = threading.Lock()
        self._closed = False
        self._child: ChildProcess | None = None
        self._model: ModelLoaded | None = None

    @property
    def model(self) -> ModelLoaded | None:
        """The loaded model's description, once the process has answered with it."""
        return self._model

    @property
    def pid(self) -> int | None:
        """The process's id while this object holds one (None before, and once it ended)."""
        return self._child.pid if self._child is not None else None

    def start(self) -> None:
        """Starts the process unless one is running, so TensorFlow loads ahead of a request."""
        with self._lock:
            self._ensure_started()

    def _ensure_started(self) -> None:
        if self._closed:
            raise PredictionError(f"{self.run_dir}: the prediction was closed")
        if self._child is not None:  # alive, or dead with its last words still to read
            return
        folder = model_folder(self.run_dir)
        self._child = ChildProcess(predict_main, str(folder), name="distloop-predict", daemon=True)

    def predict(
        self,
        inputs: Sequence[Path] = (),
        rows: Sequence[str] = (),
        *,
        timeout_s: float = PREDICT_TIMEOUT_S,
    ) -> PredictionResult:
        """Runs the model on ``inputs`` (files) and ``rows`` (CSV text, or texts).

        Raises :class:`PredictionError` when nothing could be predicted; an input that
        cannot be read is one of the result's ``errors``, and the others are predicted.
        A process that dies or fails partway keeps the answers it gave: its reason and
        the inputs left unanswered are one more line of ``errors``.
        """
        with self._lock:
            self._ensure_started()
            deadline = time.monotonic() + timeout_s
            if self._model is None:
                self._await_model(deadline)
            elif self._child is not None and not self._child.is_alive():
                raise PredictionError(self._ended())  # it died while idle
            request = PredictRequest(inputs=[str(path) for path in inputs], rows=list(rows))
            try:
                assert self._child is not None
                self._child.send(request)
            except (OSError, ValueError):  # it died, or close() closed the pipe meanwhile
                raise PredictionError(self._ended()) from None
            result = PredictionResult(model=self._model)
            answered: list[str] = []
            while True:
                try:
                    message = self._next(deadline)
                except PredictionError as exc:
                    if not answered:
                        raise
                    # What was answered stays; one line says why the rest was not.
                    left = ", ".join(_unanswered(request, answered))
                    result.errors.append(f"{exc}; not answered: {left}" if left else str(exc))
                    return result
                if isinstance(message, PredictionDone):
                    return result
                if isinstance(message, Predicted | InputRefused):
                    result.add(message)
                    answered.append(message.input or "")

    def _await_model(self, deadline: float) -> None:
        message = self._next(deadline)
        if isinstance(message, ModelLoaded):
            self._model = message
            return
        reason = message.error if isinstance(message, InputRefused) else "no model"
        self._end_process()
        raise PredictionError(f"{self.run_dir}: {reason}")

    def _next(self, deadline: float) -> Message:
        """The process's next message; a failure, a death or the deadline raise."""
        child = self._child
        assert child is not None
        while True:
            try:
                message = child.receive(POLL_S)
            except queue.Empty:
                if self._closed:
                    self._end_process()
                    raise PredictionError(f"{self.run_dir}: the prediction was closed") from None
                if not child.is_alive():
                    try:  # what it sent just before it ended
                        message = child.receive(POLL_S)
                    except queue.Empty:
                        raise PredictionError(self._ended()) from None
                    except ValueError as exc:
                        raise self._not_a_message(exc) from None
                elif time.monotonic() > deadline:
                    self._end_process()
                    raise PredictionError(
                        f"{self.run_dir}: the prediction took too long; it was stopped"
                    ) from None
                else:
                    continue
            except ValueError as exc:  # ProtocolError, or a message that does not validate
                raise self._not_a_message(exc) from None
            except (OSError, EOFError):  # close() closed the queue meanwhile
                raise PredictionError(f"{self.run_dir}: the prediction was closed") from None
            if isinstance(message, RunFailed):
                self._end_process()
                lines = message.message.splitlines()
                reason = f"{message.error_type}: {lines[0]}" if lines else message.error_type
                raise PredictionError(f"{self.run_dir}: the prediction failed: {reason}")
            return message

    def _not_a_message(self, exc: ValueError) -> PredictionError:
        self._end_process()
        return PredictionError(
            f"{self.run_dir}: {PROCESS} sent something that is not a message "
            f"of this Distloop: {str(exc).splitlines()[0]}"
        )

    def _ended(self) -> str:
        """Why the process is gone, once it is, and that the next prediction starts it again."""
        child = self._child
        code = None
        if child is not None:
            child.join(1)
            code = child.exitcode
        self._end_process()
        return (
            f"{self.run_dir}: {describe_exit(code, PROCESS)}; the next prediction starts it again"
        )

    def _end_process(self) -> None:
        child, self._child = self._child, None
        self._model = None
        if child is not None:
            child.close()

    def close(self) -> None:
        """Ends the process (the Try It window closes, the command is done)."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                self._end_process()
            finally:
                self._lock.release()
        elif self._child is not None:  # a request in progress ends with the process
            self._child.kill()


def _unanswered(request: PredictRequest, answered: list[str]) -> list[str]:
    """The request's rows and inputs that got no answer. An input's answers name it, or
    one of its examples (``x.npy[3]``, ``rows.csv:7``); they come whole, input by input."""
    names = [f"row {number}" for number in range(1, len(request.rows) + 1)] + request.inputs
    return [
        name
        for name in names
        if not any(seen == name or seen.startswith((f"{name}[", f"{name}:")) for seen in answered)
    ]


def predict(
    run_dir: Path,
    inputs: Sequence[Path] = (),
    rows: Sequence[str] = (),
    *,
    timeout_s: float = PREDICT_TIMEOUT_S,
) -> PredictionResult:
    """Runs the run's model on ``inputs`` and ``rows`` in a process of its own, once.

    All of them go in one request to one process, so TensorFlow starts once however
    many inputs a command names.
    """
    predictor = PredictionProcess(run_dir)
    try:
        return predictor.predict(inputs, rows, timeout_s=timeout_s)
    finally:
        predictor.close()
