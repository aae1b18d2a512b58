"""The wheel as pip installs it: one top-level package, its data, its command, its extras.

The wheel is built from a copy of the sources (the build writes ``build/`` and
``*.egg-info`` next to them), with this environment's setuptools
(``--no-isolation``: no download). Then it installs it into a fresh
virtual environment that sees this one's packages (TensorFlow, pydantic) but has
its own ``distloop``, and runs the installed command there.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from distloop.engine import __version__
from support.distloop_testing import REPO
from support.headless import without_gui_packages

# pyproject's package-dir: where each installed folder comes from in the checkout
SOURCES = {
    "distloop": "packaging/distloop",
    "distloop/engine": "engine",
    "distloop/gui": "gui",
    "distloop/resources": "resources",
}


def build_wheel(root: Path) -> Path:
    """The wheel built from a copy of the checkout's package sources."""
    source = root / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in SOURCES.values():
        shutil.copytree(REPO / folder, source / folder, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            # pyproject asks isolated builds for a newer setuptools than some environments
            # have; any that reads [tool.setuptools] (61 and later) builds the same wheel
            "--skip-dependency-check",
            "--outdir",
            str(root / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (built,) = (root / "dist").glob("*.whl")
    assert built.name == f"distloop-{__version__}-py3-none-any.whl"
    return built


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if not name.endswith("/")}


def dist_info(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(f"distloop-{__version__}.dist-info/{name}").decode()


def check_only_top_level_package_is_distloop(wheel: Path) -> None:
    """Nothing of ours lands in site-packages as engine/, gui/ or resources/ (issue 15)."""
    top = {name.split("/")[0] for name in wheel_files(wheel)}
    assert top == {"distloop", f"distloop-{__version__}.dist-info"}
    assert dist_info(wheel, "top_level.txt").split() == ["distloop"]


def check_every_source_file_is_in_the_wheel(wheel: Path) -> None:
    """Every module (a new subpackage needs its line in pyproject's ``packages``), every
    example, icon and the desktop entry, under the installed names."""
    files = wheel_files(wheel)
    expected = set()
    for installed, folder in SOURCES.items():
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                expected.add(f"{installed}/{path.relative_to(REPO / folder).as_posix()}")
    assert sorted(expected - files) == []
    for shipped in (
        "examples/seed.json",
        "examples/gan.json",
        "examples/gan_step.py",
        "icons/distloop.svg",
        "icons/distloop-256.png",
        "distloop.desktop",
    ):
        assert f"distloop/resources/{shipped}" in files


def check_entry_point_and_extras(wheel: Path) -> None:
    """``distloop`` is the launcher; Qt and its friends come only with the ``gui`` extra."""
    assert "distloop = distloop.gui.launcher:main" in dist_info(wheel, "entry_points.txt")
    metadata = Parser().parsestr(dist_info(wheel, "METADATA"))
    requires = metadata.get_all("Requires-Dist") or []
    for package in ("PySide6", "pyqtgraph", "qasync"):
        lines = [line for line in requires if line.startswith(package)]
        assert lines, f"{package} is not in the metadata"
        assert all('extra == "gui"' in line for line in lines), lines
    assert "gui" in (metadata.get_all("Provides-Extra") or [])
    assert any(line.startswith("tensorflow") and "extra" not in line for line in requires)


def see_this_environments_packages(python: Path) -> None:
    """The new venv's Python finds TensorFlow, pydantic and pip where this one does, after its
    own site-packages (so its own ``distloop`` comes first).

    Not ``--system-site-packages``: that shows the base interpreter's packages, which a
    venv's base (a fresh Debian's /usr/bin/python3) lacks. A ``.pth`` file's lines are
    plain paths: this environment's own ``.pth`` hooks (its editable ``distloop``) stay out.
    """
    own = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    lines = [path for path in site.getsitepackages() if Path(path).is_dir()]
    (Path(own) / "this_environments_packages.pth").write_text("\n".join(lines) + "\n")


def check_installed_in_a_fresh_venv_beside_a_users_engine_py(wheel: Path, folder: Path) -> None:
    """The installed command works next to a user's own engine.py, gui.py and resources.py,
    which it never imports, and without the gui extra it says how to get the window."""
    venv = folder / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    python = venv / "bin" / "python"
    see_this_environments_packages(python)
    prefix = subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix != sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert prefix.stdout.strip() == "True"  # pip below installs into the venv, nowhere else
    install = subprocess.run(
        [
            *(str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall"),
            *("--disable-pip-version-check", "--quiet", str(wheel)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    user = folder / "my project"
    user.mkdir(parents=True)
    for name in ("engine", "gui", "resources"):
        (user / f"{name}.py").write_text(f"raise SystemExit('the user\\'s {name}.py ran')\n")

    def installed(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(args), cwd=user, capture_output=True, text=True, timeout=120, env=env
        )

    where = installed(
        str(python), "-c", "import distloop.engine.cli as m, distloop.gui as g; print(m.__file__)"
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout

    command = str(venv / "bin" / "distloop")
    seed = installed(command, "example", "seed")
    assert seed.returncode == 0, seed.stderr
    (user / "seed.json").write_text(seed.stdout, encoding="utf-8")
    # the console script, and `python -m distloop`, which puts the folder first on sys.path
    for valid in (
        installed(command, "validate", "seed.json"),
        installed(str(python), "-m", "distloop", "validate", "seed.json"),
    ):
        assert valid.returncode == 0, valid.stdout + valid.stderr
        assert "valid" in valid.stdout

    headless = installed(command, env=without_gui_packages(folder / "site"))
    assert headless.returncode == 1
    assert "pip install 'distloop[gui]'" in headless.stderr
    assert "Traceback" not in headless.stderr


def test_wheel_is_one_namespace_and_installs_beside_a_users_engine_py(tmp_path: Path) -> None:
    """One test, so the wheel is built once even when pytest-xdist splits a module's tests."""
    wheel = build_wheel(tmp_path / "build")
    check_only_top_level_package_is_distloop(wheel)
    check_every_source_file_is_in_the_wheel(wheel)
    check_entry_point_and_extras(wheel)
    check_installed_in_a_fresh_venv_beside_a_users_engine_py(wheel, tmp_path / "install")
