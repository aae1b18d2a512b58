"""Reading a project (from a file, from text or from parsed JSON): ``engine.config``'s
schema, then the rules that ask the data sources, every problem reported at once.

``engine.config`` is the schema alone: it knows every source's settings but none of its
code. The rules that consult a source (its data fits the model and the loss, it holds
token ids for an embedding, it can split off evaluation examples, the memory it holds)
run here, after parsing, on the sections that validated. Everything that reads a
project (the CLI, ``distloop validate``, the window's per-edit checks, run folders,
studies, exports) loads it through these functions, so each sees every problem.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from .config import DATA_SOURCES, DataConfig, Project, parse_project
from .data_sources import source_named, source_of
from .memory_estimate import MAX_PROJECT_BYTES, bytes_text, memory_estimate
from .problems import Problem, ProblemsError, parse_json_text


def load_project_data(data: object, source: str = "project") -> Project:
    """Validates an already-parsed project; raises ProblemsError listing every problem."""
    return parse_project(data, source, source_problems)


def load_project_text(text: str, source: str = "project") -> Project:
    return load_project_data(parse_json_text(text, source), source)


def load_project(path: str | Path) -> Project:
    """Reads and validates a project file; every failure is a ProblemsError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        message = f"cannot read it: {exc.strerror or exc}"
        raise ProblemsError([Problem((), message)], str(path)) from None
    except UnicodeDecodeError as exc:
        message = f"cannot read it: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#x})"
        raise ProblemsError([Problem((), message)], str(path)) from None
    return load_project_text(text, str(path))


def source_problems(project: Project, usable: Collection[str] | None = None) -> list[Problem]:
    """The rules that join the data to the rest through its source: shapes must fit, an
    embedding needs token ids, a split needs a source that splits, the memory must fit
    some machine.

    With ``usable``, only the rules whose sections are all in it run: the others
    would judge a section that did not validate.
    """
    problems = []
    for sections, rule in _SOURCE_RULES:
        if usable is None or sections <= set(usable):
            problems += rule(project)
    return problems


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


def _evaluation_problems(project: Project) -> list[Problem]:
    evaluation = project.evaluation
    if evaluation is None:
        return []
    problems = []
    if evaluation.split is not None and not source_of(project.data).splits:
        splitting = [name for name in DATA_SOURCES if source_named(name).splits]
        problems.append(
            Problem(
                ("evaluation", "split"),
                f"a split holds out examples of {', '.join(splitting)} data, not "
                f"{project.data.source}; give a separate evaluation source instead",
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


def _data_shape_problems(data: DataConfig, project: Project, loc: tuple[str, ...]) -> list[Problem]:
    """Whether ``data`` (the training data, or the evaluation source at ``loc``) fits."""
    return source_of(data).shape_problems(data, project, loc)


_SOURCE_RULES: tuple[tuple[frozenset[str], Callable[[Project], list[Problem]]], ...] = (
    (frozenset({"data", "model", "loss"}), _training_data_problems),
    (frozenset({"data", "model", "custom_code"}), _token_id_problems),
    (
        frozenset({"evaluation", "strategy", "data", "model", "loss"}),
        _evaluation_problems,
    ),
    (
        frozenset({"strategy", "model", "optimizer", "loss", "data", "evaluation"}),
        _size_problems,
    ),
)
