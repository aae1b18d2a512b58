"""Renders the application icon from its SVG master into every size the installers use.

    python packaging/make_icons.py

reads ``resources/icons/distloop.svg`` and writes

- ``resources/icons/distloop-<N>.png`` for N in 16, 32, 48, 64, 128, 256, 512
  (the window icon and the Linux hicolor theme sizes; committed),
- ``packaging/windows/distloop.ico`` (16 to 48 as 32-bit bitmaps, 256 as PNG; for
  PyInstaller's ``EXE(icon=...)`` and Inno Setup's ``SetupIconFile``),
- ``packaging/macos/distloop.icns`` (PNG entries 16 to 1024; for the ``.app``).

Rendering uses Qt's own SVG renderer (PySide6's QtSvg, installed with the app), so
it needs neither librsvg nor Pillow, and runs headless (``offscreen`` platform).
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SVG = ROOT / "resources" / "icons" / "distloop.svg"
PNG_SIZES = (16, 32, 48, 64, 128, 256, 512)
ICO_BITMAP_SIZES = (16, 24, 32, 48)
ICO_PNG_SIZES = (256,)
# ICNS element types holding PNG data, with the pixel size each one holds.
ICNS_TYPES = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"icp6", 64),
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic09", 512),
    (b"ic10", 1024),
    (b"ic11", 32),
    (b"ic12", 64),
    (b"ic13", 256),
    (b"ic14", 512),
)


def png_name(size: int) -> str:
    """The committed PNG for one size, inside ``resources/icons``."""
    return f"distloop-{size}.png"


class Renderer:
    """Renders the SVG master at any square size with QSvgRenderer."""

    def __init__(self, svg: Path) -> None:
        """Loads the SVG (headless QGuiApplication on the offscreen platform)."""
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        from PySide6.QtGui import QGuiApplication
        from PySide6.QtSvg import QSvgRenderer

        self._app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])
        self._renderer = QSvgRenderer(str(svg))
        if not self._renderer.isValid():
            raise SystemExit(f"make_icons: {svg} is not a valid SVG")

    def image(self, size: int):  # -> QImage (PySide6 is imported lazily)
        """A non-premultiplied ARGB32 image of the icon, ``size`` pixels square."""
        from PySide6.QtCore import QRectF
        from PySide6.QtGui import QImage, QPainter

        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(0)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        self._renderer.render(painter, QRectF(0, 0, size, size))
        painter.end()
        return image.convertToFormat(QImage.Format.Format_ARGB32)

    def png(self, size: int) -> bytes:
        """The icon as PNG file bytes."""
        from PySide6.QtCore import QBuffer, QByteArray, QIODevice

        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        if not self.image(size).save(buffer, "PNG"):
            raise SystemExit(f"make_icons: could not encode the {size}px PNG")
        buffer.close()
        return bytes(data.data())

    def dib(self, size: int) -> bytes:
        """The icon as an ICO bitmap entry: BITMAPINFOHEADER, BGRA rows bottom-up, AND mask."""
        image = self.image(size)
        row_bytes = size * 4
        bits = bytes(image.constBits())[: row_bytes * size]
        if sys.byteorder != "little":  # ARGB32 words are BGRA bytes only on little-endian
            raise SystemExit("make_icons: ICO bitmaps are written on little-endian machines only")
        rows = [bits[y * row_bytes : (y + 1) * row_bytes] for y in range(size)]
        pixels = b"".join(reversed(rows))
        mask_row = ((size + 31) // 32) * 4
        mask = bytes(mask_row * size)  # all zero: the alpha channel decides
        header = struct.pack(
            "<IiiHHIIiiII", 40, size, size * 2, 1, 32, 0, len(pixels) + len(mask), 0, 0, 0, 0
        )
        return header + pixels + mask


def ico_bytes(entries: list[tuple[int, bytes]]) -> bytes:
    """A Windows ``.ico`` file from (size, bitmap-or-PNG data) entries."""
    header = struct.pack("<HHH", 0, 1, len(entries))
    offset = len(header) + 16 * len(entries)
    directory = b""
    payload = b""
    for size, data in entries:
        side = 0 if size >= 256 else size  # 0 means 256 in an ICONDIRENTRY
        directory += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(data), offset)
        payload += data
        offset += len(data)
    return header + directory + payload


def icns_bytes(entries: list[tuple[bytes, bytes]]) -> bytes:
    """An Apple ``.icns`` file from (OSType, PNG data) entries."""
    body = b"".join(kind + struct.pack(">I", 8 + len(data)) + data for kind, data in entries)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    """Writes every icon file; prints what it wrote."""
    renderer = Renderer(SVG)
    written: list[Path] = []
    pngs: dict[int, bytes] = {}
    for size in sorted({*PNG_SIZES, *ICO_PNG_SIZES, *(s for _, s in ICNS_TYPES)}):
        pngs[size] = renderer.png(size)
    for size in PNG_SIZES:
        path = SVG.parent / png_name(size)
        path.write_bytes(pngs[size])
        written.append(path)

    ico = ROOT / "packaging" / "windows" / "distloop.ico"
    ico.parent.mkdir(parents=True, exist_ok=True)
    entries = [(size, renderer.dib(size)) for size in ICO_BITMAP_SIZES]
    entries += [(size, pngs[size]) for size in ICO_PNG_SIZES]
    ico.write_bytes(ico_bytes(entries))
    written.append(ico)

    icns = ROOT / "packaging" / "macos" / "distloop.icns"
    icns.parent.mkdir(parents=True, exist_ok=True)
    icns.write_bytes(icns_bytes([(kind, pngs[size]) for kind, size in ICNS_TYPES]))
    written.append(icns)

    for path in written:
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
