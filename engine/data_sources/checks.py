"""The project's data checked on disk, each source asked in turn (TensorFlow-free).

Not part of the project's loading rules (:mod:`engine.project_file`): these read the disk,
and a project file names its data relative to itself. The CLI's ``validate``, the window
and the engine call them once the project's paths are resolved.
"""

from __future__ import annotations

from ..config import DataConfig, Project
from ..problems import Problem
from . import source_of
from .folders import FolderError, FolderScanner, FolderSummary, checked_folder, summarize_folder
from .folders import folder_problems as class_folder_problems


def project_folder_problems(
    project: Project, scanner: FolderScanner = summarize_folder
) -> list[Problem]:
    """The data of ``project`` (paths already absolute) checked against its model: its
    files exist and are regular files, a CSV header fits, a folder of class subfolders
    has the model's classes (``scanner`` lists it), a TFRecord pattern matches a file."""
    problems = []
    scans: dict[tuple[str, ...], FolderSummary] = {}
    for where, data in project.data_sources():
        loc = tuple(where.split("."))
        source = source_of(data)
        files = data_file_problems(data)
        problems += [Problem((*loc, "path"), text) for text in files]
        if not files:
            problems += source.content_problems(data, project, loc)
        if source.class_folders is None:
            continue
        try:
            scan = scanner(data.path, source.class_folders.extensions)
        except FolderError as exc:
            problems.append(Problem((*loc, "path"), str(exc)))
            continue
        found = class_folder_problems(scan, f"{where}.path", source.class_folders.files)
        problems += [Problem((*loc, "path"), _without_field(text)) for text in found]
        if not found:
            scans[loc] = scan
            problems += _class_count_problems(scan, project, loc)
    training, held = scans.get(("data",)), scans.get(("evaluation", "source"))
    if held is not None and _learned_apart(project):
        problems.append(
            Problem(
                ("evaluation", "source", "source"),
                "text is evaluated with the training texts' vocabulary: evaluate text_folder "
                "data only when data is a text_folder too, and the other way round",
            )
        )
    elif training is not None and held is not None and training.classes != held.classes:
        problems.append(
            Problem(
                ("evaluation", "source", "path"),
                f"its classes ({', '.join(held.classes)}) are not the training data's "
                f"({', '.join(training.classes)}); class numbers would mean different classes",
            )
        )
    return problems


def _learned_apart(project: Project) -> bool:
    """An evaluation source read with what is learned from training data of another kind."""
    assert project.evaluation is not None and project.evaluation.source is not None
    data, held = project.data, project.evaluation.source
    learns = source_of(data).learned_from_training or source_of(held).learned_from_training
    return learns and data.source != held.source


def data_file_problems(data: DataConfig) -> list[str]:
    """A file source's files that are missing or no regular file (a folder, a FIFO, a
    device): a stat each, cheap enough for every edit in the window."""
    return source_of(data).file_problems(data)


def _without_field(text: str) -> str:
    """A folder problem's message without its leading ``field:`` (a Problem has it)."""
    return text.split(": ", 1)[1]


def _class_count_problems(
    scan: FolderSummary, project: Project, loc: tuple[str, ...]
) -> list[Problem]:
    """The model's outputs must match the classes the folder has."""
    if project.custom_code is not None or not project.loss.is_classification:
        return []  # custom models are the code's to fit; a regression loss is reported already
    classes, units = len(scan.classes), project.model.output_units
    if project.loss.kind == "binary_crossentropy":
        if classes == 2:
            return []
        return [
            Problem(
                ("loss", "kind"),
                f"binary_crossentropy takes two classes, but {'.'.join(loc)}.path has {classes}; "
                f"use sparse_categorical_crossentropy with a last dense layer of {classes} "
                "units",
            )
        ]
    if units in (classes, None):  # None: a .keras file (unread here)
        return []
    return [
        Problem(
            ("model", "layers"),
            f"{project.loss.kind} needs a last dense layer of {classes} units, one per class "
            f"folder in {'.'.join(loc)}.path, not {units}",
        )
    ]


def unreadable_image_problems(
    project: Project, scanner: FolderScanner = checked_folder
) -> tuple[list[Problem], list[str]]:
    """The files the run would fail on (a problem each) or skip (a note), found by reading
    each file's ends: image folders' files cut short, empty or no image.

    For ``distloop validate``, and for the window in its scanning process (``scanner``
    then gives the summaries it made). The run also decodes every file, which finds
    damage inside one as well.
    """
    problems: list[Problem] = []
    notes: list[str] = []
    for where, data in project.data_sources():
        found, noted = source_of(data).unreadable_problems(data, where, scanner)
        problems += found
        notes += noted
    return problems, notes


def oversized_record_problems(project: Project) -> list[Problem]:
    """Each record file's first record whose declared length does not fit its file."""
    return [
        problem
        for where, data in project.data_sources()
        for problem in source_of(data).record_problems(data, where)
    ]
