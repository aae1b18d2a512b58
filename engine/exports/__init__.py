"""Cluster exports as plug-ins: one module per format behind one protocol, found by name as
data sources are (``engine/data_sources/``).

A format is ``engine/exports/<name>.py``, whose ``FORMAT`` is an
:class:`~engine.exports.base.ExportFormat`: what it writes, its description, the options
it takes. Its name in :data:`FORMATS` is its registration: the CLI's ``--format``
choices and the export dialog's list are :data:`FORMATS`, so a new format is its module
plus its name here. :func:`engine.export.export_cluster` writes any of them.

``base``    the protocol, the request every format gets, the README and security note
``pods``    what the Kubernetes formats share: the image, volumes, containers, YAML
``storage`` where an exported cluster reads its data and keeps its runs (volumes, notes)
"""

from __future__ import annotations

from importlib import import_module

from .base import ExportFormat, ExportRequest

__all__ = ["FORMATS", "ExportFormat", "ExportRequest", "format_named", "pod_formats"]

FORMATS = ("json", "shell", "k8s", "tfjob", "trainjob", "slurm")
"""Every format, in the order the CLI and the export dialog offer them."""


def format_named(name: str) -> ExportFormat:
    """The format called ``name`` (one of :data:`FORMATS`); imported when first asked for,
    so that listing the formats loads none of them."""
    if name not in FORMATS:
        raise ValueError(f"unknown export format {name!r}; use one of {', '.join(FORMATS)}")
    found = import_module(f"{__name__}.{name}").FORMAT
    assert isinstance(found, ExportFormat) and found.name == name
    return found


def pod_formats() -> str:
    """The formats whose pods take an image and mount volumes, in words (``k8s, tfjob and
    trainjob``); the others run on hosts with their own disks."""
    names = [name for name in FORMATS if format_named(name).pods]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
