"""The rules that join sections (the data must fit the model and the loss, the strategy must
agree with TF_CONFIG, ...): :class:`Project` checks them after its sections validated, and
:func:`load_project_data` runs those whose sections did when others did not."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from ..data_sources import source_named, source_of
from ..problems import Problem
from ..tf_config import strategy_problems
from ._strict import MAX_STEPS
from .data import DATA_SOURCES, DataConfig
from .memory import MAX_PROJECT_BYTES, bytes_text, memory_estimate
from .training import split_counts

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


def _token_id_problems(project: Project) -> list[Problem]:
    """An embedding reads token ids: random real numbers would index outside its table."""
    layers = project.model.layers if project.model.kind == "layers" else []
    if project.custom_code is not None or not layers or layers[0].kind != "embedding":
        return []
    if not source_of(project.data).real_valued:
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
        if not source_of(project.data).splits:
            splitting = [name for name in DATA_SOURCES if source_named(name).splits]
            problems.append(
                Problem(
                    ("evaluation", "split"),
                    f"a split holds out examples of {', '.join(splitting)} data, not "
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
    return source_of(data).shape_problems(data, project, loc)


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
