"""The rules that join sections (the data must fit the model and the loss, the strategy must
agree with TF_CONFIG, ...): :class:`Project` checks them after its sections validated, and
:func:`load_project_data` runs those whose sections did when others did not."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from ..problems import Problem
from ..tf_config import strategy_problems
from ._strict import MAX_STEPS
from .data import (
    IMAGE_CHANNELS,
    ConstantData,
    DataConfig,
    ImageFolderData,
    SyntheticClassification,
    SyntheticRegression,
    TextFolderData,
    TFRecordData,
)
from .memory import MAX_PROJECT_BYTES, bytes_text, memory_estimate
from .training import SPLIT_SOURCES, split_counts

if TYPE_CHECKING:  # Project's validator calls these rules: project.py imports this module
    from .project import Project


def cross_field_problems(project: Project, usable: Collection[str] | None = None) -> list[Problem]:
    """Rules that join sections: shapes must fit, strategy and TF_CONFIG must agree.

    With ``usable``, only the rules whose sections are all in it run: the others
    would judge a section that did not validate (see :func:`load_project_data`).
    """
    problems = []
    for sections, rule in _CROSS_RULES:
        if usable is None or sections <= set(usable):
            problems += rule(project)
    return problems


def _strategy_problems(project: Project) -> list[Problem]:
    return project.strategy.problems()


def _tf_config_problems(project: Project) -> list[Problem]:
    return strategy_problems(project.tf_config, project.strategy.kind)


def _training_data_problems(project: Project) -> list[Problem]:
    return _data_shape_problems(project.data, project, ("data",))


REAL_VALUED_SOURCES = ("constant", "synthetic_classification", "synthetic_regression")


def _token_id_problems(project: Project) -> list[Problem]:
    """An embedding reads token ids: random real numbers would index outside its table."""
    layers = project.model.layers if project.model.kind == "layers" else []
    if project.custom_code is not None or not layers or layers[0].kind != "embedding":
        return []
    if project.data.source not in REAL_VALUED_SOURCES:
        return []
    return [
        Problem(
            ("model", "layers", 0),
            f"an embedding reads token ids, but {project.data.source} data are real numbers; "
            "use text_folder data, or numpy/csv data holding ids from 0 to input_dim - 1",
        )
    ]


def _length_problems(project: Project) -> list[Problem]:
    epochs, per_epoch = project.training.epochs, project.steps_per_epoch()
    if epochs is None or per_epoch is None or epochs * per_epoch <= MAX_STEPS:
        return []
    return [
        Problem(
            ("training", "epochs"),
            f"{epochs:,} epochs of {per_epoch:,} steps make {epochs * per_epoch:,} steps, "
            f"more than the {MAX_STEPS:,} a run can have",
        )
    ]


def _size_problems(project: Project) -> list[Problem]:
    estimate = memory_estimate(project)
    if estimate.total <= MAX_PROJECT_BYTES:
        return []
    return [
        Problem(
            estimate.loc,
            f"needs about {bytes_text(estimate.total)} of memory, more than the "
            f"{MAX_PROJECT_BYTES // 2**50} PiB any machine has",
        )
    ]


def _batch_problems(project: Project) -> list[Problem]:
    problems = []
    replicas = project.strategy.replica_count_hint()
    if project.steps_per_epoch() == 0 and project.training_example_count():
        problems.append(
            Problem(
                ("data", "drop_remainder"),
                f"the data has fewer examples than one batch of {project.data.global_batch_size}, "
                "and drop_remainder drops it: no step would run",
            )
        )
    if replicas and project.data.global_batch_size < replicas:
        problems.append(
            Problem(
                ("data", "global_batch_size"),
                f"must be at least the number of replicas ({replicas}) so each gets an example",
            )
        )
    return problems


def _custom_code_problems(project: Project) -> list[Problem]:
    if project.custom_code is None:
        return []
    problems = []
    if not project.custom_code.path.endswith(".py"):
        problems.append(Problem(("custom_code", "path"), "must name a Python file (.py)"))
    if project.strategy.kind == "parameter_server":
        problems.append(
            Problem(
                ("custom_code",),
                "parameter_server runs the built-in step only; custom step code runs with "
                "the synchronous strategies",
            )
        )
    return problems


def _evaluation_problems(project: Project) -> list[Problem]:
    evaluation = project.evaluation
    if evaluation is None:
        return []
    problems = []
    if project.strategy.kind == "parameter_server":
        problems.append(
            Problem(("evaluation",), "parameter_server runs do not evaluate; set it to null")
        )
    if evaluation.split is not None:
        if project.data.source not in SPLIT_SOURCES:
            problems.append(
                Problem(
                    ("evaluation", "split"),
                    f"a split holds out examples of {', '.join(SPLIT_SOURCES)} data, not "
                    f"{project.data.source}; give a separate evaluation source instead",
                )
            )
        examples = project.data.example_count()
        if examples is not None and split_counts(examples, evaluation.split)[0] < 1:
            problems.append(
                Problem(
                    ("evaluation", "split"),
                    f"holds out all {examples} example(s); none would be left to train on",
                )
            )
    if evaluation.source is not None:
        loc = ("evaluation", "source")
        for problem in _data_shape_problems(evaluation.source, project, loc):
            if problem.loc[: len(loc)] == loc:
                problems.append(problem)
            else:  # a rule joining data, model and loss: the source is what does not fit
                problems.append(Problem(loc, f"does not fit {problem.path}: {problem.message}"))
    return problems


def _data_shape_problems(data: DataConfig, project: Project, loc: tuple[str, ...]) -> list[Problem]:
    """Whether ``data`` (the training data, or the evaluation source at ``loc``) fits."""
    model, loss = project.model, project.loss
    problems = []
    if isinstance(data, ConstantData):
        if len(data.features) != model.input_size:
            problems.append(
                Problem(
                    (*loc, "features"),
                    f"has {len(data.features)} value(s) but the model's input_shape "
                    f"{model.input_shape} takes {model.input_size}",
                )
            )
        expected = 1 if loss.kind == "sparse_categorical_crossentropy" else model.output_units
        if expected is not None and len(data.labels) != expected:
            problems.append(
                Problem(
                    (*loc, "labels"),
                    f"has {len(data.labels)} value(s) but the model predicts {expected} "
                    f"per example with {loss.kind}",
                )
            )
    elif isinstance(data, SyntheticClassification):
        if not loss.is_classification:
            problems.append(
                Problem(
                    ("loss", "kind"),
                    f"{loss.kind} is a regression loss; classification data "
                    "needs a crossentropy loss",
                )
            )
        elif loss.kind == "binary_crossentropy":
            if data.num_classes != 2:
                problems.append(
                    Problem((*loc, "num_classes"), "binary_crossentropy needs num_classes 2")
                )
            if model.output_units not in (1, None):
                problems.append(
                    Problem(
                        ("model", "layers"),
                        "binary_crossentropy needs a last dense layer of "
                        f"1 unit, not {model.output_units}",
                    )
                )
        elif model.output_units not in (data.num_classes, None):
            problems.append(
                Problem(
                    ("model", "layers"),
                    f"{loss.kind} needs a last dense layer of "
                    f"{data.num_classes} units (num_classes), not {model.output_units}",
                )
            )
    elif isinstance(data, SyntheticRegression) and loss.kind in (
        "categorical_crossentropy",
        "sparse_categorical_crossentropy",
    ):
        problems.append(
            Problem(
                ("loss", "kind"),
                f"{loss.kind} needs class labels; regression data has real-valued targets",
            )
        )
    elif isinstance(data, SyntheticRegression) and model.output_units is None:
        problems.append(
            Problem(
                (*loc, "source"),
                "synthetic regression targets are as wide as the model's output, which a "
                ".keras file tells only when loaded; use numpy or csv data with it",
            )
        )
    elif isinstance(data, ImageFolderData):
        problems += _image_shape_problems(data, project, loc)
    elif isinstance(data, TextFolderData):
        problems += _text_shape_problems(data, project, loc)
    elif isinstance(data, TFRecordData):
        problems += _tfrecord_shape_problems(data, project, loc)
    return problems


def _tfrecord_shape_problems(
    data: TFRecordData, project: Project, loc: tuple[str, ...]
) -> list[Problem]:
    """The spec names the label once, and its other features fill the model's input."""
    model, loss = project.model, project.loss
    names = [spec.name for spec in data.features]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        return [Problem((*loc, "features"), f"names {', '.join(repeated)} more than once")]
    if data.label not in names:
        return [
            Problem(
                (*loc, "label"),
                f"{data.label!r} is not one of the features ({', '.join(names)}); name the "
                "feature that holds the label",
            )
        ]
    problems = []
    label = data.features[names.index(data.label)]
    inputs = sum(spec.size for spec in data.features if spec.name != data.label)
    if inputs != model.input_size:
        problems.append(
            Problem(
                (*loc, "features"),
                f"the features other than the label hold {inputs} value(s) per example, but "
                f"model.input_shape {model.input_shape} takes {model.input_size}",
            )
        )
    if loss.kind == "sparse_categorical_crossentropy" and (label.dtype, label.size) != ("int64", 1):
        problems.append(
            Problem(
                (*loc, "features", names.index(data.label)),
                "sparse_categorical_crossentropy takes one class number per example: give the "
                "label feature dtype int64 and shape []",
            )
        )
    elif loss.kind != "sparse_categorical_crossentropy" and label.size != model.output_units:
        problems.append(
            Problem(
                (*loc, "features", names.index(data.label)),
                f"the label feature holds {label.size} value(s) per example but the model "
                f"predicts {model.output_units} with {loss.kind}",
            )
        )
    return problems


def _class_label_problems(project: Project, what: str) -> list[Problem]:
    """A folder's labels are class numbers: the loss must be a crossentropy."""
    model, loss = project.model, project.loss
    if not loss.is_classification:
        return [
            Problem(
                ("loss", "kind"),
                f"{loss.kind} is a regression loss; {what}'s labels are classes "
                "(its subfolders), so it needs a crossentropy loss",
            )
        ]
    if loss.kind == "binary_crossentropy" and model.output_units != 1:
        return [
            Problem(
                ("model", "layers"),
                f"binary_crossentropy needs a last dense layer of 1 unit, not {model.output_units}",
            )
        ]
    return []


def _text_shape_problems(
    data: TextFolderData, project: Project, loc: tuple[str, ...]
) -> list[Problem]:
    """Each text becomes ``sequence_length`` word numbers below ``vocabulary_size``."""
    problems = []
    if project.model.input_shape != [data.sequence_length]:
        problems.append(
            Problem(
                ("model", "input_shape"),
                f"text data gives {data.sequence_length} word numbers per example "
                f"({'.'.join(loc)}.sequence_length); the input_shape must be "
                f"[{data.sequence_length}], not {project.model.input_shape}",
            )
        )
    for index, layer in enumerate(project.model.layers):
        input_dim = getattr(layer, "input_dim", None)
        if getattr(layer, "kind", None) == "embedding" and input_dim < data.vocabulary_size:
            problems.append(
                Problem(
                    ("model", "layers", index, "input_dim"),
                    f"is {input_dim}, but word numbers run up to "
                    f"{data.vocabulary_size - 1} ({'.'.join(loc)}.vocabulary_size "
                    f"{data.vocabulary_size}); make it at least {data.vocabulary_size}",
                )
            )
    return problems + _class_label_problems(project, "a text folder")


def _image_shape_problems(
    data: ImageFolderData, project: Project, loc: tuple[str, ...]
) -> list[Problem]:
    """Images are resized to the model's input, so the input must name a size and a color
    mode; their labels are class numbers, so the loss must be a crossentropy."""
    problems = []
    shape = project.model.input_shape
    if len(shape) != 3 or shape[-1] not in IMAGE_CHANNELS.values():
        problems.append(
            Problem(
                ("model", "input_shape"),
                f"image data needs [height, width, channels] with 1 (grayscale) or 3 (rgb) "
                f"channels, not {shape}",
            )
        )
    elif data.color_mode != "auto" and IMAGE_CHANNELS[data.color_mode] != shape[-1]:
        problems.append(
            Problem(
                (*loc, "color_mode"),
                f"{data.color_mode} images have {IMAGE_CHANNELS[data.color_mode]} channel(s) but "
                f"model.input_shape {shape} takes {shape[-1]}; choose auto or change the shape",
            )
        )
    return problems + _class_label_problems(project, "an image folder")


_CROSS_RULES: tuple[tuple[frozenset[str], Callable[[Project], list[Problem]]], ...] = (
    (frozenset({"strategy"}), _strategy_problems),
    (frozenset({"strategy", "tf_config"}), _tf_config_problems),
    (frozenset({"data", "model", "loss"}), _training_data_problems),
    (frozenset({"data", "model", "custom_code"}), _token_id_problems),
    (frozenset({"custom_code", "strategy"}), _custom_code_problems),
    (
        frozenset({"evaluation", "strategy", "data", "model", "loss"}),
        _evaluation_problems,
    ),
    (frozenset({"data", "evaluation", "strategy"}), _batch_problems),
    (frozenset({"training", "data", "evaluation"}), _length_problems),
    (
        frozenset({"strategy", "model", "optimizer", "loss", "data", "evaluation"}),
        _size_problems,
    ),
)
