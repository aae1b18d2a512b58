"""The layering rules: import-linter's contracts (pyproject.toml) on the source, and the
config and protocol modules loading without TensorFlow or Qt when they run."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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
    "distloop.engine.study.runner",
    "distloop.engine.study.folders",
    "distloop.engine.loop",
    "distloop.engine.loop_hooks",
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


def stage_namespace() -> ModuleType:
    """packaging/stage_namespace.py, which lays out ``distloop/`` for import-linter."""
    spec = importlib.util.spec_from_file_location(
        "stage_namespace", REPO / "packaging" / "stage_namespace.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_import_contracts_hold(tmp_path: Path) -> None:
    """pyproject.toml's import-linter contracts, checked by the lint-imports command."""
    result = stage_namespace().lint_imports(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout, result.stdout


# One import that breaks each contract (in the order pyproject lists them), appended to a
# module of a copy, and how lint-imports names it.
VIOLATIONS = [
    (
        "engine/formatting.py",
        "from ..gui.run import series",
        "engine.formatting -> distloop.gui.run.series",
    ),
    (
        "gui/common/settings.py",
        "from ..run import run_controller",
        "gui.common.settings -> distloop.gui.run.run_controller",
    ),
    ("engine/messages.py", "import PySide6", "engine.messages -> PySide6"),
    # engine.config imports no TensorFlow itself; the window would reach it through config
    (
        "engine/config/__init__.py",
        "from ..tf import strategy",
        "engine.config -> distloop.engine.tf.strategy",
    ),
    ("engine/study/space.py", "import keras", "engine.study.space -> keras"),
]


def test_each_contract_catches_its_violation(tmp_path: Path) -> None:
    """A contract naming the wrong modules (a typo, a package renamed since) passes forever:
    each one must break on the import that violates it."""
    staging = stage_namespace()
    copy = tmp_path / "checkout"
    for name in ("packaging/distloop", "engine", "gui", "resources"):
        shutil.copytree(REPO / name, copy / name, ignore=staging.python_only)
    shutil.copy2(REPO / "pyproject.toml", copy / "pyproject.toml")
    for module, line, _ in VIOLATIONS:
        with (copy / module).open("a", encoding="utf-8") as handle:
            handle.write(f"\n{line}\n")
    result = staging.lint_imports(tmp_path / "staged", root=copy)
    assert result.returncode != 0
    assert "0 kept, 5 broken" in result.stdout, result.stdout
    for _, _, reported in VIOLATIONS:
        assert f"distloop.{reported} (l." in result.stdout, result.stdout
