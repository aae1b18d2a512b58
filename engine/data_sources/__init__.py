"""Data sources as plug-ins: one module per source behind one protocol, as Keras keeps one
data adapter per kind of input.

A source is its settings model in ``engine/config/data.py`` (the registry: the
``DataConfig`` union, discriminated by ``source``), its TensorFlow-free part here,
``engine/data_sources/<source>.py`` (a :class:`~engine.data_sources.base.DataSource`:
validation, memory, preview, the exported script's lines), and its TensorFlow part,
``engine/tf/data_sources/<source>.py`` (the ``tf.data`` examples). Both parts are found
by the model's ``source``, so nothing else names a source:

``base``     the protocol, and DataError
``arrays``   the checks the array sources share (numbers, class ids, the model's shape)
``folders``  folders of class subfolders, listed and checked (image and text folders)
``checks``   the project's data checked on disk: every source's files, one call each
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .base import DataError, DataSource

if TYPE_CHECKING:
    from ..config import DataConfig

__all__ = ["DataError", "DataSource", "source_named", "source_of"]


def source_of(data: DataConfig) -> DataSource[Any]:
    """The TensorFlow-free part of ``data``'s source."""
    return source_named(data.source)


def source_named(source: str) -> DataSource[Any]:
    """The TensorFlow-free part of the source called ``source`` (a ``DATA_SOURCES`` name),
    imported when first asked for: only the sources a project names are loaded."""
    found = import_module(f"{__name__}.{source}").SOURCE
    assert isinstance(found, DataSource)
    return found
