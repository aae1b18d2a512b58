"""Images that declare more pixels than any photograph: refused from their header, before a
decoder allocates what it declares (a prediction process, or a training run, dying of
memory on a file of a few hundred kilobytes)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from distloop.engine.data_sources.folders import image_file_problem
from support.distloop_testing import REPO, distloop, example_data, model_run_folder


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png(width: int, height: int) -> bytes:
    """A valid grayscale PNG of zeros, compressed row by row (never held decoded here)."""
    packer = zlib.compressobj(9)
    row = b"\0" * (width + 1)
    pixels = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", pixels)
        + _chunk(b"IEND", b"")
    )


def headers(width: int, height: int) -> dict[str, bytes]:
    """Each format's header declaring ``width`` x ``height``, then a few bytes."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0" + b"\1\1\0\0\1\0\1\0\0"
    sof = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\1\x11\0"
    return {
        "bomb.png": b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + b"\0" * 64,
        "bomb.gif": b"GIF89a" + struct.pack("<HH", width, height) + b"\0" * 64,
        "bomb.bmp": b"BM" + struct.pack("<I", 90) + b"\0" * 12
        + struct.pack("<ii", width, -height) + b"\0" * 64,
        "bomb.jpg": b"\xff\xd8" + app0 + b"\xff\xff" + sof + b"\0" * 64 + b"\xff\xd9",
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(headers(1, 1)))
def test_an_image_declaring_a_bomb_s_pixels_is_refused_from_its_header(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / name
    path.write_bytes(headers(60_000, 60_000)[name])
    assert image_file_problem(path) == (
        "declares 60,000 x 60,000 pixels, more than the 100,000,000 an image may have here "
        "(decoding it would take more memory than a photograph)"
    )
    path.write_bytes(headers(4000, 3000)[name])
    assert "pixels" not in (image_file_problem(path) or "")


@pytest.mark.slow
def test_predict_refuses_a_png_bomb_in_one_line_and_predicts_the_others(tmp_path: Path) -> None:
    """A valid 12,000 x 12,000 PNG of 140 KB: decoded and resized it is 720 MB here (and
    a 60,000 x 60,000 one 18 GB); refused from its header, the digit beside it predicted."""
    run_dir = model_run_folder(tmp_path / "run", example_data("digits"))
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png(12_000, 12_000))
    digit = REPO / "resources" / "examples" / "digits" / "0" / "0000.png"
    done = distloop("predict", str(run_dir), str(bomb), str(digit), "--json")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"distloop: {bomb}: it declares 12,000 x 12,000 pixels, more than the 100,000,000 an "
        "image may have here (decoding it would take more memory than a photograph)"
    ]
    [predicted] = [json.loads(line) for line in done.stdout.splitlines()]
    assert predicted["input"] == str(digit)
