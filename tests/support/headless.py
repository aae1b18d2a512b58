"""A headless install, simulated: the window's packages (the ``gui`` extra) cannot be imported."""

from __future__ import annotations

import os
from pathlib import Path

# Python imports sitecustomize at start-up: this finder, first on sys.meta_path, answers
# for the gui extra's packages as an environment without them does.
SITECUSTOMIZE = """
import sys

HIDDEN = ("PySide6", "pyqtgraph", "qasync")


class HideGuiPackages:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, HideGuiPackages)
"""


def without_gui_packages(folder: Path) -> dict[str, str]:
    """An environment for subprocesses in which PySide6, pyqtgraph and qasync are missing."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}
