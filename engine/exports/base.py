"""What every export format answers (:class:`ExportFormat`), what it is asked
(:class:`ExportRequest`), and what every format's files share: the security note and the
README.

Security: TensorFlow's gRPC servers are unauthenticated, so every file that can carry a
comment, and every README, says so (:data:`SECURITY_NOTE`).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..code_text import inert

if TYPE_CHECKING:
    from ..config import Project
    from ..tf_config import TFConfig
    from .slurm import SlurmJob

SECURITY_NOTE = (
    "SECURITY: TensorFlow's gRPC servers are unauthenticated and unencrypted: anyone who "
    "can reach a task's port can run code in it. They listen on every network interface, "
    "whatever host TF_CONFIG names. Run the cluster only on a trusted network (a private "
    "subnet, a VPN, a Kubernetes namespace whose NetworkPolicy admits only the cluster's "
    "own pods), never on ports reachable from the internet."
)


class PodStorage(NamedTuple):
    """The PersistentVolumeClaims a pod mounts; None: an emptyDir (runs) or none (data)."""

    runs_volume: str | None = None
    data_volume: str | None = None


@dataclass(frozen=True)
class ExportRequest:
    """One export, as ``distloop export`` or the export dialog asks for it: the project,
    its folder (``base_dir``: its relative paths start there), and every option a format
    may take: the image and volumes (read by the formats whose ``pods`` is set; the others
    refuse volumes) and the Slurm job's shape (read by ``slurm``)."""

    project: Project
    base_dir: Path | None
    tf_config: TFConfig | None
    image: str
    storage: PodStorage
    slurm: SlurmJob | None


class ExportFormat(ABC):
    """One way to write a project's cluster for real hosts (``engine/exports/<name>.py``).

    One instance per format, ``FORMAT`` in its module, found by
    :func:`~engine.exports.format_named`.
    """

    name: str
    """Its name in ``--format`` and in :data:`~engine.exports.FORMATS`."""
    description: str
    """One line: the files it writes and what reads them (the dialog and ``--help``)."""
    pods: bool = False
    """Its tasks run in Kubernetes pods: it takes an image, a runs volume and a data volume."""
    needs_tf_config: bool = True
    """It exports the project's cluster; False: its tasks learn the cluster where they run."""

    @abstractmethod
    def files(self, request: ExportRequest) -> dict[str, str]:
        """Every file it writes, by path relative to the export folder. Raises
        ProblemsError when the project cannot be exported this way."""


def comment_lines(text: str, prefix: str, width: int = 88) -> list[str]:
    """``text`` wrapped into comment lines that start with ``prefix``."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(prefix + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, prefix + line]


def readme_text(project: Project, fmt: str, usage: str, notes: list[str]) -> str:
    """The export folder's README.md: the format's usage, what the hosts need first
    (``notes``), and the security note."""
    storage = ""
    if notes:
        listed = "\n".join(f"- {inert(note)}" for note in notes)
        storage = f"\n## Before you start\n\n{listed}\n"
    return (
        f"# Distloop cluster export: {inert(project.name)}\n\n"
        f"Strategy `{project.strategy.kind}`, format `{fmt}`. {usage}{storage}\n"
        f"## Security\n\n{SECURITY_NOTE}\n"
    )


def cluster_name(project: Project) -> str:
    """A Kubernetes name for the project's cluster: ``distloop-<project-name>``.

    Short enough (at most 50 characters) that ``<name>-worker-99`` is a valid
    label value and DNS label (63 characters).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", project.name.lower()).strip("-")[:41].strip("-")
    return f"distloop-{slug}" if slug else "distloop"
