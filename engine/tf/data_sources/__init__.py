"""The TensorFlow part of each data source: ``<source>.py`` turns the source's settings into
``tf.data`` examples (:class:`~engine.tf.data_sources.base.TFDataSource`); the batching,
shuffling and repeating all sources share is ``engine.tf.data``'s.

Found by the settings model's ``source``, as the TensorFlow-free part is
(``engine.data_sources``). Helpers several sources share: ``base`` (the protocol, the
examples and the split), ``arrays`` (arrays in memory), ``class_folders`` (files of class
subfolders, and labels as the loss takes them).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .base import TFDataSource

__all__ = ["TFDataSource", "tf_source_of"]

if TYPE_CHECKING:
    from ...config import DataConfig


def tf_source_of(data: DataConfig) -> TFDataSource[Any]:
    """The TensorFlow part of ``data``'s source (``engine/tf/data_sources/<source>.py``)."""
    found = import_module(f"{__name__}.{data.source}").SOURCE
    assert isinstance(found, TFDataSource)
    return found
