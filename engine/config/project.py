"""The whole project (:class:`Project`, every section in one model) and parsing it from
JSON with every problem of the schema found at once (``engine.project_file`` reads it
from a file or text, and adds the rules that ask the data sources)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from ..problems import (
    Problem,
    ProblemsError,
    problems_from_validation_error,
    raise_problems,
    register_union_tags,
)
from ..tf_config import TFConfig
from ._strict import _Strict
from .cross_field import cross_field_problems
from .data import DATA_SOURCES, DataConfig
from .launch import LaunchConfig
from .loss import LossConfig
from .model import LAYER_KINDS, ModelConfig
from .optimizer import OPTIMIZER_KINDS, OptimizerConfig, SGDConfig
from .strategy import StrategyConfig
from .training import CustomCode, EvaluationConfig, TrainingConfig, split_counts

SCHEMA_VERSION = 1


class Project(_Strict):
    """One training run, as the user describes it."""

    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field("Untitled", max_length=200)
    description: str = ""
    strategy: StrategyConfig = Field(default_factory=StrategyConfig)
    tf_config: TFConfig | None = None
    model: ModelConfig
    optimizer: OptimizerConfig = Field(default_factory=SGDConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    data: DataConfig
    training: TrainingConfig
    custom_code: CustomCode | None = Field(
        None, description="A Python file with the training step; null runs the guide's step."
    )
    evaluation: EvaluationConfig | None = Field(
        None, description="Validation data evaluated every N steps; null evaluates nothing."
    )
    launch: LaunchConfig | None = Field(
        None,
        description="How distloop launch reaches TF_CONFIG hosts over SSH; null: by their "
        "TF_CONFIG names.",
    )

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    @model_validator(mode="after")
    def _cross_field(self) -> Project:
        raise_problems("Project", cross_field_problems(self))
        return self

    def training_example_count(self) -> int | None:
        """Examples that train in one pass: the data's, less those an evaluation split holds out."""
        examples = self.data.example_count()
        if examples is None or self.evaluation is None or self.evaluation.split is None:
            return examples
        return split_counts(examples, self.evaluation.split)[0]

    def steps_per_epoch(self) -> int | None:
        """Steps in one pass over the data, when the example count is known up front."""
        examples = self.training_example_count()
        if examples is None:
            return None
        full, rest = divmod(examples, self.data.global_batch_size)
        return full if self.data.drop_remainder or not rest else full + 1

    def total_steps(self) -> int | None:
        """Run length for progress bars; None when it depends on a file's length."""
        if self.training.steps is not None:
            return self.training.steps
        per_epoch = self.steps_per_epoch()
        return None if per_epoch is None else per_epoch * (self.training.epochs or 0)

    def data_sources(self) -> list[tuple[str, DataConfig]]:
        """The data a run reads, each with its field: ``data``, and an evaluation source."""
        sources: list[tuple[str, DataConfig]] = [("data", self.data)]
        if self.evaluation is not None and self.evaluation.source is not None:
            sources.append(("evaluation.source", self.evaluation.source))
        return sources

    def resolve_paths(self, base_dir: Path) -> Project:
        """A copy whose file paths are absolute, as the engine and run folders need.

        Relative paths in a project file (data files, the evaluation source's file,
        the custom code) are relative to the file, not to the directory the user
        happened to start Distloop from.
        """
        update: dict[str, object] = {}
        data = _with_absolute_path(self.data, base_dir)
        if data is not self.data:
            update["data"] = data
        if self.evaluation is not None and self.evaluation.source is not None:
            source = _with_absolute_path(self.evaluation.source, base_dir)
            if source is not self.evaluation.source:
                update["evaluation"] = self.evaluation.model_copy(update={"source": source})
        if self.custom_code is not None:
            code = _with_absolute_path(self.custom_code, base_dir)
            if code is not self.custom_code:
                update["custom_code"] = code
        model = _with_absolute_path(self.model, base_dir)
        model = _with_absolute_path(model, base_dir, "weights")
        if model is not self.model:
            update["model"] = model
        return self.model_copy(update=update) if update else self

    def to_json(self) -> str:
        """The project file's text: strict JSON, so a NaN that got past validation raises here
        instead of writing a ``NaN`` token other JSON readers refuse."""
        data = self.model_dump(mode="json", exclude_none=False)
        return json.dumps(data, indent=2, allow_nan=False) + "\n"


_PathT = TypeVar("_PathT", bound=BaseModel)


def _with_absolute_path(section: _PathT, base_dir: Path, name: str = "path") -> _PathT:
    """``section`` itself, or a copy whose relative ``name`` (a path) is made absolute."""
    path_text = getattr(section, name, None)
    if path_text is None:
        return section
    path = Path(path_text).expanduser()
    if path.is_absolute():
        return section
    return section.model_copy(update={name: str((base_dir / path).resolve())})


def uneven_batch_warnings(project: Project, replicas: int | None = None) -> list[str]:
    """What users should know but that is not an error: how short or uneven batches behave."""
    notes = []
    replicas = replicas or project.strategy.replica_count_hint()
    batch = project.data.global_batch_size
    if replicas and batch % replicas:
        notes.append(
            f"data.global_batch_size {batch} is not divisible by {replicas} replicas: "
            f"tf.distribute gives some replicas one example more; the loss stays exact because "
            f"compute_average_loss divides by the global batch size {batch}"
        )
    examples = project.training_example_count()
    if examples is not None and examples % batch and not project.data.drop_remainder:
        notes.append(
            f"the last batch of each epoch holds {examples % batch} of {batch} examples; its loss "
            f"is still divided by {batch} (set data.drop_remainder to skip it)"
        )
    return notes


# pydantic puts the tag of a union's member into error locations; problems leave it out
register_union_tags([*LAYER_KINDS, *OPTIMIZER_KINDS, *DATA_SOURCES])


JoiningRules = Callable[["Project", Collection[str] | None], list[Problem]]
"""Rules that join sections, given the project and the sections that validated (None:
all of them), as :func:`~engine.config.cross_field.cross_field_problems` takes them."""


def parse_project(data: object, source: str, more_rules: JoiningRules) -> Project:
    """Validates an already-parsed project; raises ProblemsError listing every problem.

    Every problem means every one: when a section fails, the rules joining the
    sections that did validate still run, so a bad ``training.epochs`` does not
    hide a data shape that does not fit the model. ``more_rules`` are the joining rules
    of the layers above the schema (those that ask a data source): they run on the same
    sections, after :class:`Project`'s own.
    """
    if not isinstance(data, dict):
        raise ProblemsError([Problem((), "a project must be a JSON object")], source)
    version = data.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            message = (
                f"schema_version {version} was written by a newer Distloop; this one reads "
                f"version {SCHEMA_VERSION}"
            )
        else:
            message = f"schema_version must be {SCHEMA_VERSION}, not {version!r}"
        raise ProblemsError([Problem(("schema_version",), message)], source)
    try:
        project = Project.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_validation_error(exc, model=Project)
    else:
        found = more_rules(project, None)
        if found:
            raise ProblemsError(found, source)
        return project
    sections, complete = _valid_sections(data)
    partial = Project.model_construct(**sections)
    usable = None if complete else sections
    if not complete:  # Project's joining rules did not run: run those that can
        problems += [p for p in cross_field_problems(partial, sections) if p not in problems]
    problems += [p for p in more_rules(partial, usable) if p not in problems]
    raise ProblemsError(problems, source)


DATA_CHECK_SECTIONS = ("model", "loss", "data", "custom_code", "evaluation")
"""The sections the checks of the data on disk read (classes against outputs, a CSV's
columns against the input)."""


def data_check_part(data: object) -> Project | None:
    """The sections of a project that does not load, as a project for the checks of its
    data on disk, when the sections those read validate; else None.

    A project that fails on one rule still has its data folder judged: a binary loss on a
    folder of three classes then shows the folder's problem (and its fix) beside the
    loss's, not only the loss's, which points to the wrong fix.
    """
    if not isinstance(data, dict):
        return None
    sections: dict[str, Any] = {}
    for name in DATA_CHECK_SECTIONS:
        info = Project.model_fields[name]
        if name not in data:
            if info.is_required():
                return None
            sections[name] = info.get_default(call_default_factory=True)
            continue
        try:
            sections[name] = _SECTIONS[name].validate_python(data[name])
        except ValidationError:
            return None
    return Project.model_construct(**sections)


def _section_adapter(name: str) -> TypeAdapter[Any]:
    info = Project.model_fields[name]
    annotation = Annotated[info.annotation, info]
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
        return TypeAdapter(annotation)  # the section's model brings its own config
    return TypeAdapter(annotation, config=_Strict.model_config)


_SECTIONS = {name: _section_adapter(name) for name in Project.model_fields}


def _valid_sections(data: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The top-level sections that validate on their own, and whether that is every one
    with nothing else there (then Project's own cross-field rules have run)."""
    valid: dict[str, Any] = {}
    for name, adapter in _SECTIONS.items():
        info = Project.model_fields[name]
        if name not in data:
            if not info.is_required():
                valid[name] = info.get_default(call_default_factory=True)
            continue
        try:
            valid[name] = adapter.validate_python(data[name])
        except ValidationError:
            continue
    return valid, len(valid) == len(_SECTIONS) and set(data) <= set(_SECTIONS)
