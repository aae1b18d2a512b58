"""Where an exported cluster reads its data and keeps its runs (TF-free).

A project names files on the machine it was made on (``data.path``, a ``.keras``
model, custom step code, ...). Exported as is, hosts and pods look for them at that
path and find nothing; on Kubernetes the run folders were an ``emptyDir``, so the
trained model went with the pod. This module lists those paths and says, per format,
what each one needs (:func:`storage_notes`); for the pod formats
(:func:`engine.exports.pod_formats`) a PersistentVolumeClaim can hold the run folders
(the runs volume) and another the files the project reads (the data volume, mounted
read-only, the project's paths rewritten to it: :func:`data_volume_paths`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from ..config import Project

RUNS_MOUNT = "/var/lib/distloop/runs"
DATA_MOUNT = "/var/lib/distloop/data"
_KUBERNETES_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KUBERNETES_NAME_MAX = 253


def volume_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a PersistentVolumeClaim (a DNS subdomain), or None."""
    if len(name) <= _KUBERNETES_NAME_MAX and _KUBERNETES_NAME.fullmatch(name):
        return None
    return (
        f"{name!r} is not a Kubernetes name: lowercase letters, digits, '-' and '.', "
        f"starting and ending with a letter or digit, at most {_KUBERNETES_NAME_MAX} characters"
    )


def local_paths(project: Project) -> list[tuple[str, str]]:
    """Every file or folder the project reads from disk, as ``(field, path as written)``."""
    found = [
        (f"{field}.path", source.path)
        for field, source in project.data_sources()
        if isinstance(getattr(source, "path", None), str)
    ]
    model = project.model
    if model.kind == "keras_file" and model.path is not None:
        found.append(("model.path", model.path))
    if model.kind == "backbone" and model.weights is not None:
        found.append(("model.weights", model.weights))
    if project.custom_code is not None:
        found.append(("custom_code.path", project.custom_code.path))
    return found


def _absolute(path: str, base_dir: Path | None) -> str:
    expanded = Path(path).expanduser()
    if expanded.is_absolute() or base_dir is None:
        return str(expanded)
    return str((base_dir / expanded).resolve())


def data_volume_paths(project: Project, base_dir: Path | None) -> dict[str, str]:
    """Each local path's place on the data volume, by field: ``/var/lib/distloop/data/<rel>``.

    ``<rel>`` is the path below the deepest folder holding every path's parent, so one
    image folder ``/home/me/digits`` becomes ``digits`` and two files keep their
    places relative to each other. Relative paths are taken from ``base_dir`` (the
    project file's folder) first.
    """
    absolute = {field: _absolute(path, base_dir) for field, path in local_paths(project)}
    rooted = [Path(path) for path in absolute.values() if Path(path).is_absolute()]
    root = Path(os.path.commonpath([str(path.parent) for path in rooted])) if rooted else None
    moved = {}
    for field, path in absolute.items():
        relative = Path(path).relative_to(root) if root and Path(path).is_absolute() else path
        moved[field] = str(PurePosixPath(DATA_MOUNT, *Path(relative).parts))
    return moved


def storage_notes(
    project: Project,
    fmt: str,
    *,
    base_dir: Path | None = None,
    runs_volume: str | None = None,
    data_volume: str | None = None,
) -> list[str]:
    """What the user must do so the exported cluster finds its files and keeps its runs.

    One line each; empty when nothing is needed. The CLI prints them, the export
    dialog shows them as the format and volumes change, and the export's README
    lists them.
    """
    from . import format_named  # the package lists the formats, which import this module

    notes = []
    pods = format_named(fmt).pods
    if pods and runs_volume is None:
        notes.append(
            "the run folders are in each pod's emptyDir: model.keras, the checkpoints and "
            "metrics.csv are lost with the pod; give a runs volume (a PersistentVolumeClaim) "
            "to keep them"
        )
    moved = data_volume_paths(project, base_dir) if pods and data_volume else {}
    for field, written in local_paths(project):
        path = _absolute(written, base_dir)
        if field in moved:
            inside = PurePosixPath(moved[field]).relative_to(DATA_MOUNT)
            notes.append(
                f"{field}: {path} is read from the data volume {data_volume} as {moved[field]}: "
                f"copy it into the claim as {inside}"
            )
        elif pods:
            notes.append(
                f"{field}: {path} is a path on this machine, which the pods cannot see: "
                "build it into the image at that path, or give a data volume "
                "(a PersistentVolumeClaim holding it)"
            )
        elif Path(written).expanduser().is_absolute():
            notes.append(f"{field}: {path} is a path on this machine: every host needs it there")
        else:
            notes.append(
                f"{field}: {written} is relative to project.json: copy {path} there, "
                "beside the exported project.json, on every host"
            )
    return notes
