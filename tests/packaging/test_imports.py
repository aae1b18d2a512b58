"""The layering rules: import-linter's contracts (pyproject.toml) on the source, the
engine's import graph without a circle, and the config and protocol modules loading
without TensorFlow or Qt when they run."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support.distloop_testing import REPO

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
    assert "7 kept, 0 broken" in result.stdout, result.stdout


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
    # a view reading the wire again, as 13 of the window's modules did
    (
        "gui/run/log_panel.py",
        "from ...engine.messages import Log",
        "gui.run.log_panel -> distloop.engine.messages",
    ),
    # engine.config imports no TensorFlow itself; the window would reach it through config
    (
        "engine/config/__init__.py",
        "from ..tf import strategy",
        "engine.config -> distloop.engine.tf.strategy",
    ),
    # the schema asking a data source: the circle engine/config had with engine/data_sources
    (
        "engine/config/project.py",
        "from ..data_sources import source_of",
        "engine.config.project -> distloop.engine.data_sources",
    ),
    ("engine/study/space.py", "import keras", "engine.study.space -> keras"),
]

# The arrows that ran against the engine's layer order before it had a contract, each put
# back: the layers contract must name every one.
ENGINE_ARROWS = [
    (
        "engine/cluster/run_plans.py",
        "from ..run_handle import open_run",
        "engine.cluster.run_plans -> distloop.engine.run_handle",
    ),
    (
        "engine/exports/json.py",
        "from ..cluster import LocalCluster",
        "engine.exports.json -> distloop.engine.cluster",
    ),
    (
        "engine/export.py",
        "from .cluster import LocalCluster",
        "engine.export -> distloop.engine.cluster",
    ),
    (
        "engine/data_sources/numpy.py",
        "from ..memory_check import memory_problems",
        "engine.data_sources.numpy -> distloop.engine.memory_check",
    ),
    (
        "engine/engine_handle.py",
        "from .cluster import LocalCluster",
        "engine.engine_handle -> distloop.engine.cluster",
    ),
    (
        "engine/tf/data.py",
        "from ..cluster import LocalCluster",
        "engine.tf.data -> distloop.engine.cluster",
    ),
]


def checkout_copy(tmp_path: Path, additions: list[tuple[str, str, str]]) -> Path:
    """A copy of the package's folders and pyproject.toml with each line appended to its
    module."""
    copy = tmp_path / "checkout"
    for name in ("packaging/distloop", "engine", "gui", "resources"):
        shutil.copytree(REPO / name, copy / name, ignore=stage_namespace().python_only)
    shutil.copy2(REPO / "pyproject.toml", copy / "pyproject.toml")
    for module, line, _ in additions:
        with (copy / module).open("a", encoding="utf-8") as handle:
            handle.write(f"\n{line}\n")
    return copy


def test_each_contract_catches_its_violation(tmp_path: Path) -> None:
    """A contract naming the wrong modules (a typo, a package renamed since) passes forever:
    each one must break on the import that violates it."""
    copy = checkout_copy(tmp_path, VIOLATIONS)
    result = stage_namespace().lint_imports(tmp_path / "staged", root=copy)
    assert result.returncode != 0
    assert "0 kept, 7 broken" in result.stdout, result.stdout
    for _, _, reported in VIOLATIONS:
        assert f"distloop.{reported} (l." in result.stdout, result.stdout


def test_the_engine_layers_refuse_each_arrow_that_ran_against_them(tmp_path: Path) -> None:
    """The imports that went against the engine's order (a launcher's plan asking how runs
    open, exports reaching into the launchers, a data source into the memory check, the
    handle protocol or TensorFlow's side into the launchers) each break the contract."""
    copy = checkout_copy(tmp_path, ENGINE_ARROWS)
    result = stage_namespace().lint_imports(tmp_path / "staged", root=copy)
    assert result.returncode != 0
    assert "the engine in layers: the project schema at the bottom" in result.stdout
    assert " kept, 1 broken" in result.stdout, result.stdout  # this contract alone
    for _, _, reported in ENGINE_ARROWS:
        assert f"distloop.{reported} (l." in result.stdout, result.stdout


# Prints the engine's imports, module to module, as JSON, from a staged copy on sys.path:
# those that run, or (argument "hints") those under `if TYPE_CHECKING:` too.
ENGINE_IMPORTS = r"""
import json, sys, grimp
graph = grimp.build_graph(
    "distloop", exclude_type_checking_imports=sys.argv[1:] != ["hints"], cache_dir=None
)
engine = sorted(m for m in graph.modules if m.startswith("distloop.engine."))
print(json.dumps({m: sorted(i for i in graph.find_modules_directly_imported_by(m)
                            if i.startswith("distloop.engine.")) for m in engine}))
"""


def engine_imports(
    tmp_path: Path, root: Path = REPO, *, hints: bool = False
) -> dict[str, list[str]]:
    """Each module of ``distloop.engine`` -> the engine modules it imports (grimp's graph,
    which import-linter builds too), read from a staged copy of ``root``; with ``hints``,
    the imports made for type hints only as well."""
    target = stage_namespace().stage(tmp_path / "staged", root)
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", ENGINE_IMPORTS, *(["hints"] if hints else [])],
        cwd=target,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def circles(imports: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan's algorithm): each is a
    set of modules that import one another round a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in imports.get(node, []):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(imports):
        if node not in index:
            visit(node)
    return found


def by_package(imports: dict[str, list[str]]) -> dict[str, list[str]]:
    """The same imports between the engine's top-level modules and packages
    (``distloop.engine.cluster.ssh`` counts as ``distloop.engine.cluster``)."""

    def top(module: str) -> str:
        return ".".join(module.split(".")[:3])

    joined: dict[str, set[str]] = {}
    for module, imported in imports.items():
        joined.setdefault(top(module), set()).update(
            top(other) for other in imported if top(other) != top(module)
        )
    return {module: sorted(imported) for module, imported in joined.items()}


def test_the_engine_imports_in_no_circle(tmp_path: Path) -> None:
    """No module of the engine, and no top-level module or package of it, reaches itself
    through what it imports: each could be understood, tested and moved from the bottom
    up. (The contracts keep an order between the packages they name; this covers every
    module.)"""
    imports = engine_imports(tmp_path)
    assert "distloop.engine.cluster.supervisor" in imports
    assert circles(imports) == []
    assert circles(by_package(imports)) == []
    # A type hint may name a module of its own package that imports it (Project's rules
    # name Project), never one of a package above its own.
    hinted = engine_imports(tmp_path, hints=True)
    assert "distloop.engine.config.project" in hinted["distloop.engine.config.cross_field"]
    assert circles(by_package(hinted)) == []


def test_a_circle_in_the_engine_is_found(tmp_path: Path) -> None:
    """The list of past runs reading the study package again (it read its folder names
    there while the study package reads the list) is found, as a circle of modules and
    as one of packages."""
    back = ("engine/run_history.py", "from .study import runner", "")
    imports = engine_imports(tmp_path, checkout_copy(tmp_path, [back]))
    modules = circles(imports)
    assert len(modules) == 1, modules
    assert {"distloop.engine.run_history", "distloop.engine.study.runner"} <= set(modules[0])
    packages = circles(by_package(imports))
    assert len(packages) == 1, packages
    assert {"distloop.engine.run_history", "distloop.engine.study"} <= set(packages[0])
