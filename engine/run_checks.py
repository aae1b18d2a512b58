"""What keeps a project from running here, judged once for every way a run starts (TF-free).

``distloop validate``, ``distloop run``, ``distloop cluster``, the window and the engine
process itself ask this module, so a project refused by one is refused by all, with the
same words, and a bad folder or a project too big for the machine costs no TensorFlow
start and leaves no run folder behind. Launchers that run the tasks on other machines
(SSH, Slurm) check those machines' files there (``engine.cluster.preflight``): only
the project's own rules hold here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import Project
from .data_sources.checks import (
    oversized_record_problems,
    project_folder_problems,
    unreadable_image_problems,
)
from .data_sources.folders import FolderScanner, checked_folder
from .data_sources.label_order import label_order_notes
from .memory_check import counting_problems, memory_problems
from .model_shapes import model_file_problems
from .problems import Problem


@dataclass(frozen=True)
class FileFindings:
    """The project's files as a run would meet them: what refuses it, and what it skips."""

    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def file_findings(
    project: Project,
    scanner: FolderScanner = checked_folder,
    *,
    read_images: bool = True,
    walk_records: bool = True,
    read_labels: bool = True,
) -> FileFindings:
    """The data folders, data files and model file of ``project`` (paths resolved).

    The contents of files are judged only once the folders themselves are sound: a
    missing folder is one problem, not one per file. ``read_images`` reads each image's
    ends (``distloop validate``; the window, from its scanning process through
    ``scanner``); a run skips that, since decoding meets a damaged image anyway.
    ``walk_records`` follows every TFRecord's lengths: a run and ``validate`` do; the
    window does not at each edit (a big dataset would freeze it), and the engine walks
    them as it starts. ``read_labels`` reads the first labels of a CSV, ``.npz`` or
    TFRecord file to note an order by label that its shuffle buffer cannot mix
    (``validate``; the engine's log says it too, so the window's edits skip that read).
    """
    problems = (
        project_folder_problems(project, scanner)
        + model_file_problems(project.model)
        + counting_problems(project)
    )
    if problems:
        return FileFindings(problems)
    found, notes = unreadable_image_problems(project, scanner) if read_images else ([], [])
    records = oversized_record_problems(project) if walk_records else []
    order = label_order_notes(project) if read_labels and not found + records else []
    return FileFindings(found + records, notes + order)


def pre_run_problems(project: Project, *, processes: int = 1) -> list[Problem]:
    """Why ``project`` cannot start on this machine, [] when it can: its files, then
    whether ``processes`` engines of it (every task of a local cluster) fit the memory
    left here."""
    problems = file_findings(project, read_images=False, read_labels=False).problems
    return problems or memory_problems(project, processes=processes)
