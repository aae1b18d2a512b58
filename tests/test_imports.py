"""The layering rules: config and protocol modules load without TensorFlow or Qt."""

from __future__ import annotations

import subprocess
import sys

import pytest
from distloop_testing import REPO

TF_FREE = [
    "distloop.engine.config",
    "distloop.engine.messages",
    "distloop.engine.tf_config",
    "distloop.engine.problems",
    "distloop.engine.process",
    "distloop.engine.examples",
    "distloop.engine.run_folder",
    "distloop.engine.cli",
    "distloop.engine.cluster",
    "distloop.engine.export",
    "distloop.engine.user_code",
    "distloop.engine.sweep",
]


@pytest.mark.parametrize("module", TF_FREE)
def test_module_imports_without_tensorflow_or_qt(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'keras', 'PySide6', 'pyqtgraph', 'qasync'))\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "", f"{module} imported {result.stdout.strip()}"


def test_engine_package_never_imports_qt() -> None:
    offenders = []
    for path in (REPO / "engine").rglob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")) and any(
                name in stripped.split()[1] for name in ("PySide6", "pyqtgraph", "qasync")
            ):
                offenders.append(f"{path.name}: {stripped}")
    assert offenders == []


def test_gui_package_never_imports_tensorflow() -> None:
    offenders = []
    for path in (REPO / "gui").rglob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")) and stripped.split()[1].split(".")[0] in (
                "tensorflow",
                "keras",
            ):
                offenders.append(f"{path.name}: {stripped}")
    assert offenders == []
