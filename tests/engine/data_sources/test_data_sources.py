"""Data sources are plug-ins: every source the registry (``engine/config/data.py``) names has
its TensorFlow-free part and its TensorFlow part, found by its name, and the first loads
without TensorFlow or Qt (the window and ``distloop validate`` use it)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from distloop.engine.config import DATA_MODELS, DATA_SOURCES
from distloop.engine.data_sources import DataSource, source_named, source_of
from support.distloop_testing import REPO


def test_the_registry_names_each_source_by_its_model() -> None:
    assert list(DATA_MODELS) == list(DATA_SOURCES)
    for name, model in DATA_MODELS.items():
        assert model.model_fields["source"].default == name


@pytest.mark.parametrize("name", DATA_SOURCES)
def test_each_source_has_its_tensorflow_free_part(name: str) -> None:
    source = source_named(name)
    assert isinstance(source, DataSource)
    assert type(source).__module__ == f"distloop.engine.data_sources.{name}"


def test_a_settings_model_finds_its_source() -> None:
    data = DATA_MODELS["csv"](path="x.csv", label_column="y")
    assert source_of(data) is source_named("csv")


def test_the_tensorflow_free_parts_load_without_tensorflow_or_qt() -> None:
    code = (
        "import sys\n"
        "from distloop.engine.config import DATA_SOURCES\n"
        "from distloop.engine.data_sources import source_named\n"
        "for name in DATA_SOURCES: source_named(name)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'keras', 'PySide6', 'pyqtgraph', 'qasync'))\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


@pytest.mark.slow
def test_each_source_has_its_tensorflow_part() -> None:
    from distloop.engine.tf.data_sources import TFDataSource, tf_source_of

    for name, model in DATA_MODELS.items():
        data = model.model_construct(source=name)
        part = tf_source_of(data)
        assert isinstance(part, TFDataSource)
        assert type(part).__module__ == f"distloop.engine.tf.data_sources.{name}"
