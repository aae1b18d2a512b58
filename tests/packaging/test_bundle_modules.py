"""Every module of engine/ and gui/ reaches the PyInstaller bundle, without building it.

The analysis of ``packaging/distloop.spec`` follows ``import`` statements from the entry
script and the hidden imports; a module reached only by name (``importlib``: the
data-source plug-ins) is bundled only if the spec names it. An installed app missing
one fails on the first project that uses it (``distloop example seed``:
``No module named 'distloop.engine.data_sources.constant'``). Here the spec runs with
PyInstaller's build steps replaced by recorders, and the modules its analysis would
reach are worked out from the sources: seconds, where a build takes many minutes.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from distloop.engine.config import DATA_SOURCES
from support.distloop_testing import REPO

# Runs the spec with PyInstaller's build steps replaced by recorders; prints the
# Analysis' entry scripts, search path and hidden imports as JSON.
RECORD_ANALYSIS = r"""
import json, sys

class Analysis:
    def __init__(self, scripts, **options):
        Analysis.seen = {"scripts": scripts, **options}
        self.pure, self.binaries, self.datas, self.scripts = [], [], [], []

def build_step(*args, **kwargs):
    return None

spec = sys.argv[1]
names = {"__file__": spec, "SPECPATH": sys.argv[2], "Analysis": Analysis}
names |= {step: build_step for step in ("PYZ", "EXE", "COLLECT", "BUNDLE")}
exec(compile(open(spec, encoding="utf-8").read(), spec, "exec"), names)
seen = Analysis.seen
print(json.dumps({key: seen.get(key, []) for key in ("scripts", "pathex", "hiddenimports")}))
"""


def recorded_analysis(root: Path) -> dict[str, list[str]]:
    """What the spec gives PyInstaller's Analysis, run on a copy of the checkout's layout.

    A copy because the spec stages the package under its root's ``build/``, where a
    real build (``tests/packaging/test_packaging.py``, beside this test) may be reading it.
    """
    (root / "packaging").mkdir(parents=True)
    for name in ("distloop.spec", "stage_namespace.py", "distloop_entry.py"):
        (root / "packaging" / name).write_bytes((REPO / "packaging" / name).read_bytes())
    (root / "packaging" / "distloop").symlink_to(REPO / "packaging" / "distloop")
    for folder in ("engine", "gui", "resources"):
        (root / folder).symlink_to(REPO / folder)
    spec = root / "packaging" / "distloop.spec"
    recorded = subprocess.run(
        [sys.executable, "-c", RECORD_ANALYSIS, str(spec), str(spec.parent)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    return json.loads(recorded.stdout.splitlines()[-1])


def module_file(name: str, search: list[Path]) -> Path | None:
    """The source of module ``name`` (a package's ``__init__.py``) on ``search``, if any."""
    relative = Path(*name.split("."))
    for folder in search:
        for candidate in (folder / relative / "__init__.py", folder / relative.with_suffix(".py")):
            if candidate.is_file():
                return candidate
    return None


def imported_names(source: Path, name: str) -> set[str]:
    """Every module an ``import`` statement of ``source`` (module ``name``) may load, at any
    depth of its code, as PyInstaller's analysis reads them; ``from a import b`` may load
    ``a.b``."""
    package = name if source.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_bytes(), str(source))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: ``from . import x``, ``from ..config import y``
                parts = package.split(".")
                module = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [module])])
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def analysed_distloop_modules(analysis: dict[str, list[str]]) -> set[str]:
    """The ``distloop`` modules the analysis reaches: the entry scripts' imports and the
    hidden imports, followed through every module's own imports."""
    search = [Path(folder) for folder in analysis["pathex"]]
    pending: list[str] = list(analysis["hiddenimports"])
    for script in analysis["scripts"]:
        pending += imported_names(Path(script), "__main__")
    reached: set[str] = set()
    while pending:
        name = pending.pop()
        if not name.startswith("distloop") or name in reached:
            continue
        source = module_file(name, search)
        if source is None:
            continue  # ``from package import function``: not a module
        reached.add(name)
        parts = name.split(".")
        pending += [".".join(parts[:end]) for end in range(1, len(parts))]  # its packages
        pending += imported_names(source, name)
    return reached


def checkout_modules(folder: str) -> set[str]:
    """The installed names of the modules in the checkout's ``folder`` (engine, gui)."""
    names = set()
    for path in (REPO / folder).rglob("*.py"):
        parts = ("distloop", *path.relative_to(REPO).with_suffix("").parts)
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_engine_and_gui_module_is_in_the_bundles_analysis(tmp_path: Path) -> None:
    analysed = analysed_distloop_modules(recorded_analysis(tmp_path))
    for folder in ("engine", "gui"):
        missing = sorted(checkout_modules(folder) - analysed)
        assert not missing, f"packaging/distloop.spec leaves these {folder}/ modules out: {missing}"


def test_every_data_source_plug_in_is_a_module_of_the_checkout() -> None:
    """The registry's names are modules in both places it imports them from, so the test
    above, which lists the modules from the files, covers every plug-in."""
    engine = checkout_modules("engine")
    for source in DATA_SOURCES:
        assert f"distloop.engine.data_sources.{source}" in engine
        assert f"distloop.engine.tf.data_sources.{source}" in engine
