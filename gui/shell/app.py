"""Starts the desktop app: a QApplication whose event loop also runs asyncio (qasync)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from importlib import resources

import qasync
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import QApplication

from ..common.garbage import MainThreadCollector
from ..common.settings import APPLICATION, ORGANIZATION
from .interrupts import Interrupts


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="distloop", description="Distloop: TensorFlow distributed training, with a GUI."
    )
    parser.add_argument("file", nargs="?", help="a project file to open")
    parser.add_argument("--project", dest="project_option", help="a project file to open")
    return parser.parse_args(argv)


def app_icon() -> QIcon:
    """Distloop's icon from ``resources/icons`` (every size there); empty when none ships.

    Read through importlib.resources, so it is found in a checkout, a wheel and the
    frozen bundle alike.
    """
    icon = QIcon()
    folder = resources.files("distloop.resources") / "icons"
    if not folder.is_dir():
        return icon
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.startswith("distloop") and entry.name.endswith((".png", ".svg")):
            pixmap = QPixmap()
            if pixmap.loadFromData(entry.read_bytes()):
                icon.addPixmap(pixmap)
    return icon


def application() -> QApplication:
    """The Qt application as the window expects it: its names (where settings are kept),
    the Fusion style, the icon, and cyclic garbage collected on its thread only (see
    ``gui/common/garbage.py``)."""
    app = QApplication.instance() or QApplication([sys.argv[0]])
    if app.findChild(MainThreadCollector) is None:
        MainThreadCollector(app)
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("Distloop")
    app.setStyle("Fusion")
    app.setWindowIcon(app_icon())
    return app


def main(argv: list[str]) -> int:
    """Shows the main window until it closes; the exit code is Qt's."""
    args = parse_args(argv)
    app = application()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)

    from ...engine.process import WarmEngines
    from .main_window import MainWindow

    window = MainWindow(warm_engines=WarmEngines())
    app.aboutToQuit.connect(window.controller.shutdown)
    interrupts = Interrupts(window.interrupt)
    window.show()
    window.open_startup_project(args.project_option or args.file)
    try:
        with loop:
            return int(loop.run_forever())
    finally:
        interrupts.close()
