"""Judging the window's forms exactly as the CLI judges a project file (TF-free, Qt-free).

The forms hand over their content as a dict; it goes through the engine's own loader
and the same file checks (:mod:`engine.run_checks`), so the window cannot accept what
``distloop validate`` refuses, and its reasons read the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .config import Project, canonical_device, data_check_part, uneven_batch_warnings
from .data_sources import source_of
from .data_sources.folders import FolderSummary, checked_folder
from .model_shapes import model_file_problems
from .problems import Problem, ProblemsError
from .project_file import load_project_data
from .run_checks import file_findings

if TYPE_CHECKING:  # engine.devices asks the engine process, a layer above this one
    from .devices import DetectedDevices


class FolderScans(Protocol):
    """The window's folder scans, made off its event loop (``gui.files.folder_scans``)."""

    def missing(self, project: Project, *, at_once: bool = False) -> list[str]:
        """The folder fields whose folder is not scanned yet; asks for their scans."""
        ...

    def cached(self, path: str, extensions: tuple[str, ...]) -> FolderSummary:
        """A scanned folder's summary (a ``FolderScanner``)."""
        ...


@dataclass(frozen=True)
class Validation:
    """The project the forms describe, or the problems that keep it from being one."""

    project: Project | None
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checking: list[str] = field(default_factory=list)
    """Folder fields (``data.path``) whose folder is still being scanned: not judged yet."""

    @property
    def valid(self) -> bool:
        """Runnable: a project (which can be saved) and nothing in the way of a run, such
        as a data folder that is missing or holds one class, or still being scanned."""
        return self.project is not None and not self.problems and not self.checking

    def summary(self) -> str:
        """The status line's words: why Run is disabled, or that it is not."""
        if self.valid:
            return "Ready to run"
        if not self.problems:
            return f"Checking {', '.join(self.checking)}…"
        count = len(self.problems)
        return f"Cannot run: {count} problem{'s' if count != 1 else ''}"


def validate(
    data: dict[str, Any],
    base_dir: Path | None = None,
    folders: FolderScans | None = None,
    *,
    at_once: bool = False,
    detected: DetectedDevices | None = None,
) -> Validation:
    """Runs the engine's own loader on the forms' dict: same rules, same messages.

    With ``base_dir`` (where relative paths start), data folders, their images, CSV
    headers and model files are checked too (the folders from ``folders``, the scans the
    window makes off its event loop, else scanned here), as ``distloop validate`` checks
    them: their problems keep the project from running, not from being saved. They are
    checked for a project that fails on other
    rules too, so every problem is listed at once. A folder not scanned yet is asked for
    (now with ``at_once``, else once edits pause) and listed in
    :attr:`Validation.checking`. With ``detected`` (Detect devices' answer), devices in
    ``strategy.devices`` this machine lacks are problems too.
    """
    try:
        project = load_project_data(data, "the project")
    except ProblemsError as exc:
        part = data_check_part(data)
        if part is None or base_dir is None:
            return Validation(None, exc.problems)
        found, _, checking = _disk_problems(part.resolve_paths(base_dir), folders, at_once)
        more = [problem for problem in found if problem not in exc.problems]
        return Validation(None, exc.problems + more, [], checking)
    notes = uneven_batch_warnings(project) + setting_advice(project)
    problems = [] if detected is None else device_problems(project, detected)
    if base_dir is None:
        return Validation(project, problems, notes)
    found, skipped, checking = _disk_problems(project.resolve_paths(base_dir), folders, at_once)
    return Validation(project, problems + found, notes + skipped, checking)


def _disk_problems(
    project: Project, folders: FolderScans | None, at_once: bool
) -> tuple[list[Problem], list[str], list[str]]:
    """(problems, notes, folder fields still being scanned) of the files ``project`` (paths
    resolved) reads, as ``distloop validate`` finds them: unreadable images only once the
    folders themselves are sound. Without ``folders`` the folders are scanned here."""
    checking = [] if folders is None else folders.missing(project, at_once=at_once)
    if checking:
        return model_file_problems(project.model), [], checking
    scanner = checked_folder if folders is None else folders.cached
    found = file_findings(project, scanner, walk_records=False, read_labels=False)
    return found.problems, found.notes, []


UNSAVED_STEPS = 1000
"""Steps a run may go without a checkpoint before the window says what an interruption
costs (the seed example's 100 steps are quicker to run again than to checkpoint)."""


def setting_advice(project: Project) -> list[str]:
    """Settings that are valid but cost the user later: unshuffled folder data (every
    batch one class: a saw-tooth loss) and, on a long run, no periodic checkpoint (an
    interrupted run resumes from step 1; Stop still saves one)."""
    advice = [
        f"{where}.shuffle_buffer is 0: the folder's files are read class by class, so each "
        "batch holds one class and the loss saws; set it (any size shuffles all the file "
        "names every epoch)"
        for where, data in project.data_sources()
        if source_of(data).class_folders is not None and data.shuffle_buffer == 0
    ]
    steps = project.total_steps()
    if (
        project.training.checkpoint_every is None
        and project.strategy.kind != "parameter_server"  # it keeps no checkpoint at all
        and (steps is None or steps > UNSAVED_STEPS)
    ):
        advice.append(
            "training.checkpoint_every is off: a run that is interrupted (a crash, a killed "
            "process, a reboot) resumes from step 1; Stop saves a checkpoint, and "
            f"checkpoint_every {UNSAVED_STEPS} keeps at most {UNSAVED_STEPS} steps at risk"
        )
    return advice


def device_problems(project: Project, detected: DetectedDevices) -> list[Problem]:
    """Devices of ``strategy.devices`` on this machine that Detect devices did not find,
    as the run would refuse them (``engine.tf.strategy.check_devices``); a device of
    another task (``/job:worker/...``) is that machine's to have."""
    strategy = project.strategy
    have = {(d.device_type.upper(), int(d.name.rsplit(":", 1)[1])) for d in detected.devices}
    have |= {("CPU", index) for index in range(strategy.cpu_replicas)}  # its logical CPUs
    missing = [
        device
        for device in strategy.devices or []
        if "/job:" not in device and _type_and_index(canonical_device(device)) not in have
    ]
    if not missing:
        return []
    names = ", ".join(f"{kind}:{index}" for kind, index in sorted(have))
    return [
        Problem(
            ("strategy", "devices"),
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on this machine, "
            f"which has {names} (Detect devices); list some of those, or omit "
            "strategy.devices to use every GPU (else the CPU)",
        )
    ]


def _type_and_index(canonical: str) -> tuple[str, int]:
    """("GPU", 1) of ``/device:GPU:1`` (a canonical name, as the strategy form keeps)."""
    kind, index = canonical.rsplit("/device:", 1)[1].split(":")
    return kind, int(index)


def differences(shown: Any, loaded: Any, path: str = "") -> list[str]:
    """Paths where the forms show something else than the file holds.

    A spin box holds 32-bit integers and twelve decimals; a file may hold more.
    Listing what changed on loading keeps such a change from passing unnoticed.
    """
    if isinstance(shown, dict) and isinstance(loaded, dict):
        return [
            found
            for key in sorted(shown.keys() | loaded.keys())
            for found in differences(shown.get(key), loaded.get(key), f"{path}.{key}".lstrip("."))
        ]
    if isinstance(shown, list) and isinstance(loaded, list) and len(shown) == len(loaded):
        return [
            found
            for index, (a, b) in enumerate(zip(shown, loaded, strict=True))
            for found in differences(a, b, f"{path}.{index}")
        ]
    return [] if shown == loaded else [path or "(project)"]
