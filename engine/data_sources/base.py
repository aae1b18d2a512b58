"""What every data source answers before TensorFlow starts (:class:`DataSource`), and the
error a source raises when its data cannot feed the model (:class:`DataError`).

The defaults fit data that reads no file: a source overrides what it knows. Sources sit
above ``engine.config`` (the schema names their settings, never their code); the rules
that ask them run above both, in ``engine.project_file``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

import numpy as np

from ..problems import Problem

if TYPE_CHECKING:
    from ..config import DataConfig, Project
    from .folders import FolderScanner

D = TypeVar("D", bound="DataConfig")

FLOAT32 = 4
"""Bytes of one value as the pipeline holds it: every source's counts are in float32."""


class DataError(ValueError):
    """The data cannot feed this model; the message says which file and field."""


class CannotCount(ValueError):
    """The memory a file takes loaded cannot be counted from it (:meth:`DataSource.loaded_bytes`
    raises it); the message says why."""


@dataclass(frozen=True)
class ClassFolders:
    """A source whose examples are files in one subfolder per class (the subfolder names are
    the classes, in sorted order): the words its messages use for its files, and the
    extensions it reads."""

    files: str
    """``images``, ``text files``: as in "holds no images"."""
    extensions: tuple[str, ...]


@dataclass(frozen=True)
class LabelSample:
    """The first labels of a file, one number an example, in the file's order."""

    labels: np.ndarray
    whole: bool
    """They are all the file's labels (else the read stopped at its limit)."""


@dataclass
class ScriptData:
    """What "Export as script" writes for a source: the lines that make ``dataset`` (one
    pass of examples, before shuffling), the standard modules they use, and whether the
    examples are file names that ``load_example`` (defined in ``lines``) reads after the
    shuffle; ``after_repeat``: lines that map the repeated, batched ``dataset``."""

    lines: list[str]
    imports: set[str] = field(default_factory=set)
    load_after_shuffle: bool = False
    after_repeat: list[str] = field(default_factory=list)


class DataSource(ABC, Generic[D]):
    """The TensorFlow-free part of one data source (its TensorFlow part, the ``tf.data``
    pipeline, is ``engine/tf/data_sources/<source>.py``).

    One instance per source, ``SOURCE`` in ``engine/data_sources/<source>.py``, found by
    :func:`~engine.data_sources.source_of` from a settings model's ``source``.
    """

    splits: bool = True
    """An evaluation split can hold out some of its examples."""
    real_valued: bool = False
    """Its features are real numbers by construction (never token ids for an embedding)."""
    class_folders: ClassFolders | None = None
    """Set for a folder of class subfolders: its labels are class numbers, the window
    scans it in another process, and a split or separate source must have its classes."""
    learned_from_training: bool = False
    """Its examples are read with something learned from the training data (a text
    vocabulary): it is evaluated only against training data of its own kind."""
    file_types: str | None = None
    """Its path names a file of these types (a file dialog's filter, ``Name (*.ext)``
    entries joined by ``;;``); None: a folder, or no path."""
    preview: Literal["generated", "images", "texts", "table", "none"] = "none"
    """What the window's Dataset preview shows: ``generated`` (nothing to read yet),
    ``images`` or ``texts`` (a class folder's classes, counts and first files), ``table``
    (the first rows of a CSV file), or ``none``."""

    def form_start(self) -> dict[str, object]:
        """What the window's form for it shows before the user fills it in: a value for
        each field without a default."""
        return {}

    # -- from the project alone: validation, on every edit --------------------------------

    def shape_problems(self, data: D, project: Project, loc: tuple[str, ...]) -> list[Problem]:
        """Whether ``data`` (the training data, or the evaluation source at ``loc``) fits
        the model and the loss."""
        return []

    def held_bytes(self, data: D, project: Project, example_bytes: int) -> int | None:
        """Bytes the pipeline holds of the data itself, before caching and shuffling; None
        when only reading a file tells (the memory check adds :meth:`loaded_bytes`)."""
        return None

    # -- from the disk: validation, the window's checks, the memory check ------------------

    def file_problems(self, data: D) -> list[str]:
        """Its files that are missing or no regular file: a stat each, cheap enough for
        every edit in the window."""
        return []

    def content_problems(self, data: D, project: Project, loc: tuple[str, ...]) -> list[Problem]:
        """What the file's first lines already show (after :meth:`file_problems` found
        none): the checks a run makes first."""
        return []

    def unreadable_problems(
        self, data: D, where: str, scanner: FolderScanner
    ) -> tuple[list[Problem], list[str]]:
        """Files the run would fail on (problems) or skip (notes), found by reading each
        file's ends: for ``distloop validate`` and the window's scanning process."""
        return [], []

    def record_problems(self, data: D, where: str) -> list[Problem]:
        """Records that declare more bytes than their file holds (walked without reading
        them): a reader would allocate what they declare."""
        return []

    def loaded_bytes(self, data: D) -> int:
        """At least what loading the data whole holds in memory (0 when it streams or
        reads no file); raises what counting met (the memory check says it in one line)."""
        return 0

    def label_sample(self, data: D, limit: int, max_bytes: int) -> LabelSample | None:
        """The labels of the file's first ``limit`` examples in its order (fewer when that
        takes more than ``max_bytes`` of the file): the label-order check reads them. None
        when the order is not the user's (generated data, folders, which the pipeline
        shuffles whole) or the labels cannot be read (the run says why)."""
        return None

    def columns(self, data: D) -> tuple[str, list[str] | None] | None:
        """A table's label column and its header's names (None when the header cannot be
        read): prediction names a row's values by them. None for data that is no table."""
        return None

    # -- Export as script -----------------------------------------------------------------

    @abstractmethod
    def script(self, data: D, project: Project) -> ScriptData:
        """The standalone script's data lines (``engine.script_export``)."""
