"""Writes the ``digits`` example's image folder from scikit-learn's copy of the UCI digits.

    python packaging/make_digits.py                      # finds scikit-learn's file
    python packaging/make_digits.py PATH/scikit_learn-*.whl
    python packaging/make_digits.py PATH/digits.csv.gz

writes ``resources/examples/digits/<digit>/<row>.png`` (committed): 1797 grayscale
8x8 PNGs in ten class folders ``0`` .. ``9``, each pixel the dataset's 0..16 count
scaled to 0..255, ``<row>`` the example's zero-padded row in the dataset (row *i* is
``sklearn.datasets.load_digits().images[i]``). Files written before are removed first,
so the folder is exactly the dataset; the PNGs hold no timestamp, so a re-run writes
the same bytes.

Where the data comes from: ``sklearn/datasets/data/digits.csv.gz``, shipped inside
scikit-learn (BSD-3-Clause, (c) the scikit-learn developers), a copy of the test set
of the UCI "Optical Recognition of Handwritten Digits" dataset (E. Alpaydin,
C. Kaynak, 1998; https://archive.ics.uci.edu/dataset/80, which the UCI repository
licenses under CC BY 4.0). Each row is 64 pixel values (0..16: the on-pixels of a
4x4 block of a 32x32 NIST bitmap) and the label. scikit-learn need not be installed:
``pip download scikit-learn --no-deps`` and pass the wheel; Pillow is not needed
either, the PNGs are encoded here with zlib.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import struct
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "resources" / "examples" / "digits"
MEMBER = "sklearn/datasets/data/digits.csv.gz"
SIDE = 8
MAX_COUNT = 16  # a pixel counts the on-pixels of a 4x4 block


def read_rows(source: Path | None) -> list[tuple[int, list[int]]]:
    """(label, 64 pixel counts) per example, in the dataset's order."""
    if source is None:
        import sklearn  # only to find its data file

        raw = (Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz").read_bytes()
    elif source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            raw = wheel.read(MEMBER)
    else:
        raw = source.read_bytes()
    text = gzip.decompress(raw).decode("ascii")
    rows: list[tuple[int, list[int]]] = []
    for line_number, fields in enumerate(csv.reader(io.StringIO(text)), start=1):
        values = [int(float(field)) for field in fields]
        if len(values) != SIDE * SIDE + 1 or not all(0 <= v <= MAX_COUNT for v in values[:-1]):
            raise SystemExit(f"make_digits: line {line_number} is not 64 counts 0..16 + a label")
        rows.append((values[-1], values[:-1]))
    return rows


def png_gray8(pixels: list[int], width: int, height: int) -> bytes:
    """A grayscale 8-bit PNG (no filter, no ancillary chunks: the bytes depend on pixels only)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    scanlines = b"".join(
        b"\x00" + bytes(pixels[y * width : (y + 1) * width]) for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(scanlines, 9))
        + chunk(b"IEND", b"")
    )


def write_folder(rows: list[tuple[int, list[int]]], out_dir: Path) -> int:
    """Replaces the PNGs under ``out_dir`` with one per row; returns how many it wrote."""
    for old in out_dir.glob("*/*.png"):
        old.unlink()
    for index, (label, counts) in enumerate(rows):
        folder = out_dir / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        gray = [round(count * 255 / MAX_COUNT) for count in counts]
        (folder / f"{index:04d}.png").write_bytes(png_gray8(gray, SIDE, SIDE))
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "source", nargs="?", type=Path, help="a scikit-learn wheel or digits.csv.gz"
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="the image folder to write")
    args = parser.parse_args(argv)
    written = write_folder(read_rows(args.source), args.out)
    size = sum(path.stat().st_size for path in args.out.glob("*/*.png"))
    print(f"make_digits: {written} PNGs, {size} bytes, in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
