"""The built-in examples on real data: their folders, the generators, packaging, and runs."""

from __future__ import annotations

import csv
import gzip
import json
import struct
import subprocess
import sys
import zlib
from importlib import resources
from pathlib import Path

import pytest
from distloop.engine.project_file import load_project
from support.distloop_testing import REPO, distloop

EXAMPLES = REPO / "resources" / "examples"
# Examples per digit in scikit-learn's load_digits() (the UCI optdigits test set).
DIGIT_COUNTS = {0: 178, 1: 182, 2: 177, 3: 183, 4: 181, 5: 182, 6: 181, 7: 179, 8: 174, 9: 180}


def decode_gray_png(data: bytes) -> tuple[int, int, list[int]]:
    """(width, height, pixels) of an unfiltered 8-bit grayscale PNG, read without Qt or Pillow."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, header = 8, b"", b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        position += 12 + length
    width, height, depth, color, _, _, _ = struct.unpack(">IIBBBBB", header)
    assert (depth, color) == (8, 0)
    raw = zlib.decompress(idat)
    rows = [raw[y * (width + 1) : (y + 1) * (width + 1)] for y in range(height)]
    assert all(row[0] == 0 for row in rows)
    return width, height, [pixel for row in rows for pixel in row[1:]]


def test_make_digits_writes_one_png_per_row_and_replaces_older_files(tmp_path: Path) -> None:
    counts = [list(range(16)) * 4, [16] * 64]
    rows = [[*counts[0], 7], [*counts[1], 3]]
    source = tmp_path / "digits.csv.gz"
    source.write_bytes(gzip.compress("\n".join(",".join(map(str, r)) for r in rows).encode()))
    out = tmp_path / "digits"
    stale = out / "5" / "0042.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")

    script = REPO / "packaging" / "make_digits.py"
    subprocess.run(
        [sys.executable, str(script), str(source), "--out", str(out)],
        check=True,
        capture_output=True,
    )

    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/*.png")) == [
        "3/0001.png",
        "7/0000.png",
    ]
    assert decode_gray_png((out / "7" / "0000.png").read_bytes()) == (
        8,
        8,
        [round(v * 255 / 16) for v in counts[0]],
    )
    assert decode_gray_png((out / "3" / "0001.png").read_bytes())[2] == [255] * 64


def test_the_shipped_digits_folder_is_the_whole_dataset() -> None:
    folder = EXAMPLES / "digits"
    for digit, expected in DIGIT_COUNTS.items():
        pngs = sorted((folder / str(digit)).glob("*.png"))
        assert len(pngs) == expected, digit
        for png in pngs:
            width, height, pixels = decode_gray_png(png.read_bytes())
            assert (width, height) == (8, 8)
            assert max(pixels) > 0, png
    assert sorted(p.name for p in folder.iterdir()) == [str(d) for d in range(10)]


PO_HEADER = 'msgid ""\nmsgstr ""\n"Language: xx\\n"\n'
ENTRIES = {
    "fr": [
        'msgid "Enter a valid date."\nmsgstr "Saisissez une date valide."',
        '#, fuzzy\nmsgid "Save and add another"\nmsgstr "Enregistrer et ajouter"',
        'msgid "Delete %(name)s now."\nmsgstr "Supprimer %(name)s maintenant."',
        'msgid ""\n"This field is "\n"required."\nmsgstr ""\n"Ce champ est "\n"obligatoire."',
        'msgid "One more thing"\nmsgid_plural "More things"\nmsgstr[0] "Un"\nmsgstr[1] "Des"',
        'msgid "Too short"\nmsgstr "Trop court"',
    ],
    "de": [
        'msgid "Enter a valid date."\nmsgstr "Geben Sie ein gültiges Datum ein."',
        'msgid "Save and add another"\nmsgstr "Sichern und neu hinzufügen"',
        'msgid "This field is required."\nmsgstr "Dieses Feld ist zwingend erforderlich."',
    ],
    "es": [
        'msgid "Enter a valid date."\nmsgstr "Introduzca una fecha válida."',
        'msgid "Save and add another"\nmsgstr "Guardar y añadir otro"',
        'msgid "This field is required."\nmsgstr "Este campo es obligatorio."',
        'msgid "Delete %(name)s now."\nmsgstr "Borrar %(name)s ahora."',
    ],
    "it": ['msgid "Enter a valid date."\nmsgstr "Inserisci una data valida."'],
}


def test_make_languages_keeps_plain_singular_translated_messages(tmp_path: Path) -> None:
    django = tmp_path / "django"
    for lang, entries in ENTRIES.items():
        catalog = django / "contrib" / "admin" / "locale" / lang / "LC_MESSAGES" / "django.po"
        catalog.parent.mkdir(parents=True)
        catalog.write_text("\n\n".join([PO_HEADER, *entries]) + "\n", encoding="utf-8")
    out = tmp_path / "languages"
    script = REPO / "packaging" / "make_languages.py"
    command = [sys.executable, str(script), str(django), "--out", str(out), "--messages"]

    subprocess.run([*command, "2"], check=True, capture_output=True)
    refused = subprocess.run([*command, "3"], capture_output=True, text=True)

    texts = {p.relative_to(out).as_posix(): p.read_text("utf-8") for p in out.glob("*/*.txt")}
    # Only two messages are plain, singular, not fuzzy and translated into all three languages.
    assert sorted(texts.values()) == sorted(
        f"{text}\n"
        for text in [
            "Enter a valid date.",
            "Saisissez une date valide.",
            "Geben Sie ein gültiges Datum ein.",
            "Introduzca una fecha válida.",
            "This field is required.",
            "Ce champ est obligatoire.",
            "Dieses Feld ist zwingend erforderlich.",
            "Este campo es obligatorio.",
        ]
    )
    for number in ("000", "001"):
        english = texts[f"english/{number}.txt"]
        french = (
            "Saisissez une date valide.\n" if "date" in english else "Ce champ est obligatoire.\n"
        )
        assert texts[f"french/{number}.txt"] == french
    assert refused.returncode != 0
    assert "only 2 usable messages" in refused.stderr


def test_the_shipped_languages_folder_is_parallel_text() -> None:
    folder = EXAMPLES / "languages"
    classes = sorted(p.name for p in folder.iterdir())
    assert classes == ["english", "french", "german", "spanish"]
    names = {c: sorted(p.name for p in (folder / c).glob("*.txt")) for c in classes}
    assert all(len(found) == 120 and found == names["english"] for found in names.values())
    for name in names["english"]:
        texts = {c: (folder / c / name).read_text("utf-8").strip() for c in classes}
        assert len(set(texts.values())) == len(classes), texts
        assert len(texts["english"].split()) >= 3, texts


def test_package_data_ships_every_example_file() -> None:
    """A file the globs miss is in a checkout but not in an installed wheel."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["distloop.resources"]
    resources = REPO / "resources"
    shipped = {path for pattern in globs for path in resources.glob(pattern)}
    example_files = {
        path for path in EXAMPLES.rglob("*") if path.is_file() and "__pycache__" not in path.parts
    }
    assert example_files - shipped == set()


def read_eval(run_dir: Path) -> list[dict[str, float]]:
    with (run_dir / "eval.csv").open(encoding="utf-8", newline="") as file:
        return [{key: float(value) for key, value in row.items()} for row in csv.DictReader(file)]


@pytest.mark.slow
def test_digits_example_passes_95_percent_validation_accuracy(tmp_path: Path) -> None:
    """The shipped example, as ``distloop run --example digits`` runs it: its data folder
    resolves against the installed examples, two replicas train, held-out digits score."""
    run_dir = tmp_path / "run"
    result = distloop("run", "--example", "digits", "--out", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert "mirrored with 2 replica(s)" in result.stderr
    ran = load_project(run_dir / "project.json")
    installed = resources.files("distloop.resources").joinpath("examples", "digits")
    assert Path(ran.data.path) == Path(str(installed))
    assert json.loads((run_dir / "classes.json").read_text()) == [str(d) for d in range(10)]
    evaluations = read_eval(run_dir)
    assert [row["step"] for row in evaluations][-1] == ran.training.steps
    assert evaluations[-1]["val_accuracy"] > 0.95


@pytest.mark.slow
def test_languages_example_learns_which_language_a_message_is_in(tmp_path: Path) -> None:
    """The shipped text example as ``distloop run --example languages`` runs it: the loss
    falls and held-out messages are told apart far above chance (1 in 4)."""
    run_dir = tmp_path / "run"
    result = distloop("run", "--example", "languages", "--out", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert json.loads((run_dir / "classes.json").read_text()) == [
        "english",
        "french",
        "german",
        "spanish",
    ]
    # The words' numbers as training gave them, for prediction (the folder may change later).
    vocabulary = json.loads((run_dir / "vocabulary.json").read_text())
    size = load_project(run_dir / "project.json").data.vocabulary_size
    assert vocabulary[:2] == ["", "[UNK]"] and 100 < len(vocabulary) <= size
    steps = [line for line in result.stdout.splitlines() if line.startswith("step=")]
    losses = [float(line.split(" loss=")[1].split()[0]) for line in steps]
    assert len(losses) == load_project(run_dir / "project.json").training.steps
    assert sum(losses[-20:]) / 20 < 0.3 * sum(losses[:5]) / 5
    assert read_eval(run_dir)[-1]["val_accuracy"] > 0.75
