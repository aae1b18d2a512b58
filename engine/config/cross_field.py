"""The rules that join sections from the settings alone (the strategy must agree with
TF_CONFIG, a batch must give each replica an example, ...): :class:`Project` checks them
after its sections validated, and :func:`parse_project` runs those whose sections did
when others did not. The rules that ask a data source (does its data fit the model and
the loss) sit above the data sources, in ``engine.project_file``: the schema imports no
source's code."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from ..problems import Problem
from ..tf_config import strategy_problems
from ._strict import MAX_STEPS
from .training import split_counts

if TYPE_CHECKING:  # Project's validator calls these rules: project.py imports this module
    from .project import Project


def cross_field_problems(project: Project, usable: Collection[str] | None = None) -> list[Problem]:
    """Rules that join sections: strategy and TF_CONFIG must agree, batches must fill.

    With ``usable``, only the rules whose sections are all in it run: the others
    would judge a section that did not validate (see :func:`parse_project`).
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
        examples = project.data.example_count()
        if examples is not None and split_counts(examples, evaluation.split)[0] < 1:
            problems.append(
                Problem(
                    ("evaluation", "split"),
                    f"holds out all {examples} example(s); none would be left to train on",
                )
            )
    return problems


_CROSS_RULES: tuple[tuple[frozenset[str], Callable[[Project], list[Problem]]], ...] = (
    (frozenset({"strategy"}), _strategy_problems),
    (frozenset({"strategy", "tf_config"}), _tf_config_problems),
    (frozenset({"custom_code", "strategy"}), _custom_code_problems),
    (
        frozenset({"evaluation", "strategy", "data", "model", "loss"}),
        _evaluation_problems,
    ),
    (frozenset({"data", "evaluation", "strategy"}), _batch_problems),
    (frozenset({"training", "data", "evaluation"}), _length_problems),
)
