"""The system libraries Qt needs (glib, libGL, libEGL, the xcb libraries): a missing one is
named in one line with the command that installs them, instead of a traceback or Qt's abort.

Qt-free: the launcher asks before Qt is loaded, and loading Qt is what fails.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

SCRIPT = "packaging/install-linux-deps.sh"
_NOT_FOUND = re.compile(r"([\w.+-]+\.so[\w.]*): cannot open shared object file")


def missing_library(error: BaseException) -> str | None:
    """The library a failed load names (``libglib-2.0.so.0``), as the dynamic loader says it."""
    match = _NOT_FOUND.search(str(error))
    return match.group(1) if match else None


def install_line(library: str) -> str:
    """One line for the user: what is missing, and the one command that installs it."""
    script = Path(__file__).resolve().parents[2] / SCRIPT  # gui/shell/ -> the checkout
    command = (
        f"bash {script} app"
        if script.is_file()
        else f"bash {SCRIPT} app (in Distloop's source folder)"
    )
    return (
        f"distloop: the window needs the system library {library}, which is missing; "
        f"install the window's system libraries with: {command}"
    )


def uses_xcb(environ: Mapping[str, str]) -> bool:
    """Whether Qt will start its X11 (xcb) platform: asked for, or its default outside a
    Wayland session (there Qt tries Wayland first)."""
    asked = environ.get("QT_QPA_PLATFORM", "")
    if asked:
        return asked.split(";")[0].split(":")[0] == "xcb"
    return environ.get("XDG_SESSION_TYPE") != "wayland"


def missing_for_xcb() -> str | None:
    """The library Qt's xcb platform plugin cannot load, if one is missing.

    Without one (``libxcb-cursor.so.0`` since Qt 6.5) Qt prints a paragraph and aborts
    the process when the window's application is created, too late for a message of
    ours. Loading the plugin first, as Qt will, names the library instead.
    """
    if not sys.platform.startswith("linux") or not uses_xcb(os.environ):
        return None
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    plugin = Path(spec.submodule_search_locations[0]) / "Qt/plugins/platforms/libqxcb.so"
    if not plugin.is_file():
        return None
    try:
        ctypes.CDLL(str(plugin))
    except OSError as error:
        return missing_library(error)
    return None
