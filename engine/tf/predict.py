"""A run's ``model.keras`` on files and pasted rows, in a prediction process (imports TF).

:func:`load_for_prediction` loads the model once in a process of its own
(``engine.child_main.predict_main``, started by ``engine.prediction``), which then
answers request after request on CSV files, ``.npy`` arrays, images and pasted CSV
rows with the protocol's messages (``engine.messages``): a ``Predicted`` per example
(a classifier's classes, most probable first, or the raw values) and an
``InputRefused`` for an input that cannot be used, naming it and why.

An example is read as training read it: an image is decoded, resized and scaled
by the image-folder data's own function (``engine.tf.data_sources.image_folder``), a text (a
``.txt`` file or a pasted row, for a text-folder model) turned into word numbers
with the vocabulary the run saved (``vocabulary.json``); a CSV's
columns are matched to the training CSV's feature columns by name (the label
column is left out), so their order may differ; other CSVs give their columns in
the model's input order.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import LossConfig, Project
from ..data_sources import DataError, source_of
from ..data_sources.folders import IMAGE_EXTENSIONS
from ..messages import ClassScore, InputRefused, ModelLoaded, Predicted
from ..problems import ProblemsError
from ..project_file import load_project
from ..run_folder import MODEL_FILE, PROJECT_FILE, TASKS_DIR, class_names, saved_vocabulary
from .data import load_image_for_model, load_text_for_model
from .data_sources import tf_source_of


class InputError(Exception):
    """An input that cannot be predicted; the message names what is wrong with it."""


Emit = Callable[[InputRefused | Predicted], None]


@dataclass(frozen=True)
class Examples:
    labels: list[str]
    """Each example's name: ``rows.csv:3``, ``x.npy[4]``."""
    features: np.ndarray


@dataclass(frozen=True)
class ModelInputs:
    """What an example must be for the model: its shape, the training CSV's columns, and a
    text model's vocabulary."""

    shape: tuple[int, ...]
    csv_columns: list[str] | None
    label_column: str | None
    label_position: int | None
    """Where the label column was among the training CSV's columns."""
    vocabulary: list[str] | None
    """The words a text model's numbers stand for (the run's ``vocabulary.json``)."""

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


@dataclass(frozen=True)
class PredictionModel:
    """A run's saved model, loaded once, with what its examples must be and its class names."""

    folder: Path
    model: Any
    project: Project | None
    inputs: ModelInputs
    names: list[str] | None
    """A classifier's class names in label order; None for any other model."""

    @property
    def loaded(self) -> ModelLoaded:
        """The message that tells the parent which model runs and what it takes."""
        return ModelLoaded(
            path=str(self.folder / MODEL_FILE),
            input_shape=list(self.inputs.shape),
            csv_columns=self.inputs.csv_columns,
            classifier=self.names is not None,
            classes=self.names,
        )

    def answer(self, inputs: list[Path], rows: list[str], emit: Emit) -> None:
        """Predicts every row and input, emitting a Predicted per example or an InputRefused.

        Whatever goes wrong with one input is that input's refusal (a failure of Keras on
        a crafted array included): the other inputs are still predicted.
        """
        sources: list[tuple[str, str | Path]] = [
            (f"row {number}", row) for number, row in enumerate(rows, 1)
        ]
        sources += [(str(path), path) for path in inputs]
        for name, source in sources:
            try:
                predictions = self._predict(name, source)
            except InputError as exc:
                emit(InputRefused(input=name, error=str(exc)))
                continue
            except Exception as exc:
                emit(InputRefused(input=name, error=f"the prediction failed: {_one_line(exc)}"))
                continue
            for prediction in predictions:
                emit(prediction)

    def _predict(self, name: str, source: str | Path) -> list[Predicted]:
        project = self.project
        if not isinstance(source, str):
            examples = _read_file(source, self.inputs, project)
        elif project is not None and tf_source_of(project.data).takes_text:
            examples = _text_example(name, source, project, self.inputs)  # a pasted text
        else:
            examples = _read_row(name, source, self.inputs)
        predicted = np.asarray(self.model.predict_on_batch(examples.features), dtype=np.float64)
        if len(predicted) != len(examples.labels):
            raise InputError(
                f"the model gave {len(predicted)} outputs for {len(examples.labels)} examples"
            )
        if self.names is not None and project is not None:
            return [
                Predicted(input=label, classes=_classes(output, project.loss, self.names))
                for label, output in zip(examples.labels, predicted, strict=True)
            ]
        return [
            Predicted(input=label, values=output.reshape(-1).tolist())
            for label, output in zip(examples.labels, predicted, strict=True)
        ]


def load_for_prediction(folder: Path) -> PredictionModel:
    """``folder``'s model and what it takes; InputError says in one line why it cannot be used."""
    model, project = _load(folder)
    # A cluster task's folder (tasks/worker-0) has the run's folder above it.
    folders = [folder]
    if folder.parent.name == TASKS_DIR:
        folders.append(folder.parent.parent)
    inputs, outputs = _signature(model, folder)
    classifier = project is not None and project.loss.is_classification
    names = (
        class_names(folders, _class_count(project, outputs))
        if classifier and project is not None
        else None
    )
    return PredictionModel(folder, model, project, _model_inputs(inputs, project, folders), names)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _load(folder: Path) -> tuple[Any, Project | None]:
    """The saved model and the project it was trained from (None when that cannot be read)."""
    import tensorflow as tf

    path = folder / MODEL_FILE
    if not path.is_file():
        raise InputError(f"{folder}: no {MODEL_FILE}")
    try:
        model = tf.keras.models.load_model(path, compile=False)
    except Exception as exc:  # Keras raises ValueError, TypeError, OSError, zip errors...
        raise InputError(f"cannot load {path}: {_one_line(exc)}") from None
    try:
        project: Project | None = load_project(folder / PROJECT_FILE)
    except (ProblemsError, OSError, ValueError, RecursionError):
        project = None
    return model, project


def _signature(model: Any, folder: Path) -> tuple[tuple[int, ...], int]:
    """The shape of one example and the number of outputs, for a model prediction can run:
    one input and one output, every size known but the batch's."""
    path = folder / MODEL_FILE
    inputs = list(getattr(model, "inputs", None) or [])
    outputs = list(getattr(model, "outputs", None) or [])
    if len(inputs) != 1 or len(outputs) != 1:
        raise InputError(
            f"{path}: the model takes {len(inputs)} input(s) and gives {len(outputs)} "
            "output(s); prediction runs models of one input and one output"
        )
    shapes = []
    for what, tensor in (("takes examples", inputs[0]), ("gives outputs", outputs[0])):
        shape = tuple(tensor.shape)[1:]
        if any(size is None for size in shape):
            shown = ", ".join("None" if size is None else str(size) for size in shape)
            raise InputError(
                f"{path}: the model {what} of shape [{shown}], a size left open; prediction "
                "needs every size but the batch's"
            )
        shapes.append(tuple(int(size) for size in shape))
    return shapes[0], int(np.prod(shapes[1]))


def _model_inputs(
    shape: tuple[int, ...], project: Project | None, folders: list[Path]
) -> ModelInputs:
    columns = label = position = None
    sources = [] if project is None else [data for _, data in project.data_sources()]
    tables = (source_of(source).columns(source) for source in sources)
    trained_on = next((table for table in tables if table is not None), None)
    if trained_on is not None:
        label, header = trained_on
        if header is not None and label in header and len(header) - 1 == int(np.prod(shape)):
            columns = [name for name in header if name != label]
            position = header.index(label)
    return ModelInputs(shape, columns, label, position, saved_vocabulary(folders))


def _class_count(project: Project, outputs: int) -> int:
    return 2 if project.loss.kind == "binary_crossentropy" and outputs == 1 else outputs


def _classes(output: np.ndarray, loss: LossConfig, names: list[str]) -> list[ClassScore]:
    """Each class and its probability, most probable first (softmax/sigmoid of logits)."""
    output = output.reshape(-1)
    if loss.kind == "binary_crossentropy" and len(output) == 1:
        positive = 1 / (1 + np.exp(-output[0])) if loss.from_logits else output[0]
        probabilities = np.asarray([1 - positive, positive])
    elif loss.from_logits:
        shifted = np.exp(output - output.max())
        probabilities = shifted / shifted.sum()
    else:
        probabilities = output
    order = np.argsort(-probabilities, kind="stable")
    return [ClassScore(name=names[i], probability=float(probabilities[i])) for i in order]


def _read_file(path: Path, inputs: ModelInputs, project: Project | None) -> Examples:
    if path.is_dir():
        raise InputError(f"is a folder; name the files in it instead (such as {path}/*.png)")
    if path.exists() and not path.is_file():  # a FIFO or a device would never end
        raise InputError("is not a regular file")
    suffix = path.suffix.lower()
    if project is not None and tf_source_of(project.data).takes_text and suffix == ".txt":
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read it: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise InputError("is not UTF-8 text") from None
        return _text_example(str(path), text, project, inputs)
    if suffix == ".npy":
        return _read_npy(path, inputs)
    if suffix in (".csv", ".txt"):
        return _read_csv(path, inputs)
    if suffix in IMAGE_EXTENSIONS:
        return _read_image(path, project)
    raise InputError(
        f"cannot read {path.suffix or 'a file without an extension'}: give a .csv file "
        f"(one example a row), an .npy array or an image ({' '.join(IMAGE_EXTENSIONS)})"
    )


def _read_image(path: Path, project: Project | None) -> Examples:
    """One image, decoded, resized and scaled exactly as training read the project's."""
    if project is None or not tf_source_of(project.data).takes_images:
        raise InputError("is an image, but the model was not trained on an image folder")
    try:
        image = load_image_for_model(path, project)
    except DataError as exc:
        raise InputError(str(exc).replace(str(path), "it")) from None
    return Examples([str(path)], image[np.newaxis])


def _read_npy(path: Path, inputs: ModelInputs) -> Examples:
    """The examples of an ``.npy`` array, its header checked against the file first: a
    crafted header declaring terabytes is refused, not allocated."""
    try:
        with path.open("rb") as handle:
            version = np.lib.format.read_magic(handle)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(handle)
            data_bytes = path.stat().st_size - handle.tell()
        declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if declared > data_bytes:
            raise InputError(
                f"declares an array of shape {list(shape)} ({declared} bytes) but holds "
                f"{data_bytes} bytes: a cut-short or damaged .npy file"
            )
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except OSError as exc:
        raise InputError(f"cannot read it: {exc.strerror or exc}") from None
    except InputError:
        raise
    except Exception as exc:  # numpy names a bad header with ValueError, EOFError, ...
        raise InputError(f"cannot read it as .npy: {_one_line(exc)}") from None
    if np.issubdtype(array.dtype, np.complexfloating):
        raise InputError("holds complex numbers; the model takes real ones")
    if not np.issubdtype(array.dtype, np.number):
        raise InputError("holds no numeric array; save one with numpy.save")
    if array.shape == inputs.shape:
        array = array[np.newaxis]
    elif array.ndim == 2 and array.shape[1] == inputs.size:
        array = array.reshape((len(array), *inputs.shape))
    elif array.shape[1:] != inputs.shape:
        raise InputError(
            f"has shape {list(array.shape)}; the model takes examples of shape "
            f"{list(inputs.shape)} (one array of that shape, or a stack of them)"
        )
    if len(array) == 0:
        raise InputError(f"holds no examples (shape {list(array.shape)})")
    features = _finite(np.asarray(array, dtype=np.float32), "holds")
    return Examples([f"{path}[{i}]" for i in range(len(features))], features)


def _read_csv(path: Path, inputs: ModelInputs) -> Examples:
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows = [(number, row) for number, row in enumerate(csv.reader(handle), 1) if row]
    except OSError as exc:
        raise InputError(f"cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read it as CSV: {exc}") from None
    if not rows:
        raise InputError("is empty")
    first = rows[0][1]
    if not _numbers(first):
        rows = rows[1:]
        pick = _columns(first, inputs)
    else:
        pick = None
    if not rows:
        raise InputError("has a header but no rows")
    labels, features = [], []
    for number, row in rows:
        values = _row_values(row, inputs, pick, f"line {number}")
        labels.append(f"{path}:{number}")
        features.append(values)
    return Examples(labels, np.stack(features))


def _text_example(name: str, text: str, project: Project, inputs: ModelInputs) -> Examples:
    """One text as training turned it into word numbers (the run's saved vocabulary)."""
    try:
        return Examples([name], load_text_for_model(text, project, inputs.vocabulary)[np.newaxis])
    except DataError as exc:
        raise InputError(str(exc)) from None


def _read_row(name: str, text: str, inputs: ModelInputs) -> Examples:
    try:
        row = next(csv.reader([text.strip()]), [])
    except csv.Error as exc:
        raise InputError(f"is not a CSV row: {exc}") from None
    if not row:
        raise InputError("is empty")
    return Examples([name], _row_values(row, inputs, None, "")[np.newaxis])


def _columns(header: list[str], inputs: ModelInputs) -> list[int] | None:
    """The header's feature columns in the model's order; None when all are features."""
    names = [name.strip() for name in header]
    if inputs.csv_columns is not None:
        missing = [name for name in inputs.csv_columns if name not in names]
        if missing:
            raise InputError(
                f"has no column {', '.join(map(repr, missing))}; the model was trained on "
                f"the columns {', '.join(inputs.csv_columns)}"
            )
        return [names.index(name) for name in inputs.csv_columns]
    if inputs.label_column is not None and inputs.label_column in names:
        return [i for i, name in enumerate(names) if name != inputs.label_column]
    return None


def _numbers(row: list[str]) -> bool:
    try:
        [float(value) for value in row]
    except ValueError:
        return False
    return True


def _row_values(row: list[str], inputs: ModelInputs, pick: list[int] | None, where: str) -> Any:
    """The row's features in the model's shape; ``where`` names the line (empty: a pasted row)."""
    where = f"{where} " if where else ""
    if pick is None and inputs.label_position is not None and len(row) == inputs.size + 1:
        # A row of the training CSV, label included: the label's place is left out.
        pick = [i for i in range(len(row)) if i != inputs.label_position]
    if pick is not None:
        if max(pick) >= len(row):
            raise InputError(f"{where}has {len(row)} value(s), fewer than the header's columns")
        row = [row[i] for i in pick]
    if len(row) != inputs.size:
        raise InputError(
            f"{where}has {len(row)} value(s); the model takes {inputs.size} feature(s)"
            + (f" ({', '.join(inputs.csv_columns)})" if inputs.csv_columns else "")
        )
    try:
        values = np.asarray([float(value) for value in row], dtype=np.float32)
    except ValueError:
        raise InputError(f"{where}holds a value that is not a number") from None
    return _finite(values.reshape(inputs.shape), f"{where}holds")


def _finite(array: np.ndarray, what: str) -> np.ndarray:
    if not np.isfinite(array).all():
        raise InputError(f"{what} a value that is not a finite number (NaN or infinity)")
    return array
