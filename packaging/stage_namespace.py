"""Lays out ``distloop/`` as installed, for tools that read folders instead of pyproject.

The checkout keeps ``engine/``, ``gui/`` and ``resources/`` at its top level and
``pyproject.toml`` maps them under ``distloop`` (``packaging/distloop/__init__.py``
says why). pip and the editable install follow that mapping; PyInstaller's analysis
and grimp (import-linter's graph) do not: they look for ``distloop``'s submodules in
``distloop``'s own folder. This copies the four pieces into ``TARGET/distloop/``, so
``TARGET`` on ``sys.path`` gives them the installed layout.

    python packaging/stage_namespace.py             # stage into build/namespace, print it
    python packaging/stage_namespace.py --lint      # stage, then run lint-imports on it

:func:`module_names` lists the staged package's modules: the PyInstaller spec collects
them all, because some are imported only by name (the data-source plug-ins) and the
analysis, which follows ``import`` statements, would leave those out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIECES = {"": "packaging/distloop", "engine": "engine", "gui": "gui", "resources": "resources"}
"""Folder under ``distloop/`` -> folder in the checkout (as pyproject's ``package-dir``)."""


def stage(target: Path, root: Path = ROOT) -> Path:
    """Copies the package's modules into ``target/distloop`` (replacing an older copy);
    returns ``target``.

    Copies, not links: PyInstaller keeps what it collects, and a fresh copy per call
    can never show a tool files that the checkout no longer has. Only ``.py`` files:
    both tools read modules, and the spec takes the data files from the checkout.
    """
    package = target / "distloop"
    if package.exists():
        shutil.rmtree(package)
    for inside, source in PIECES.items():
        shutil.copytree(root / source, package / inside, ignore=python_only, dirs_exist_ok=True)
    return target


def module_names(target: Path) -> list[str]:
    """Every module of the staged ``target/distloop``, dotted, except ``distloop.resources``.

    Read from the files, without importing anything: a module only ``importlib`` reaches
    (a plug-in found by its registry name) is as present here as one that is imported.
    ``distloop.resources`` holds data; its ``.py`` files are step code for users to read
    and copy, which the spec ships as data files.
    """
    names = []
    for path in sorted((target / "distloop").rglob("*.py")):
        parts = path.relative_to(target).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[:2] != ("distloop", "resources"):
            names.append(".".join(parts))
    return names


def python_only(folder: str, names: list[str]) -> set[str]:
    """A ``copytree`` ignore function: leaves out caches and every file that is not a module."""
    return {
        name
        for name in names
        if name == "__pycache__" or (not name.endswith(".py") and Path(folder, name).is_file())
    }


def lint_imports(target: Path, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Runs ``lint-imports`` with the checkout's contracts on a fresh copy in ``target``."""
    stage(target, root)
    path = os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; "
            "sys.exit(lint_imports_command())",
            str(root / "pyproject.toml"),
            "--no-cache",
            "--no-logo",
        ],
        cwd=target,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=Path, default=ROOT / "build" / "namespace")
    parser.add_argument("--lint", action="store_true", help="run lint-imports on the copy")
    args = parser.parse_args(argv)
    if not args.lint:
        print(stage(args.target.resolve()))
        return 0
    result = lint_imports(args.target.resolve())
    print(result.stdout, end="")
    print(result.stderr, end="", file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
