"""Writes the ``languages`` example's text folder from Django's translated interface messages.

    python packaging/make_languages.py PATH/django-*.whl     # pip download django --no-deps
    python packaging/make_languages.py PATH/site-packages/django

writes ``resources/examples/languages/<language>/<nnn>.txt`` (committed): the same
MESSAGES messages in English, French, German and Spanish, one message per file, file
``<nnn>`` of every language holding the same message, so the four classes differ in
language only. Files written before are removed first, so a re-run with the same Django
writes the same folder.

Where the text comes from: the gettext catalogs shipped inside Django
(``django/**/locale/<lang>/LC_MESSAGES/django.po``, "distributed under the same license
as the Django package": BSD-3-Clause, (c) Django Software Foundation and individual
contributors). English is each entry's ``msgid`` as Django's developers wrote it; the
other languages are its ``msgstr`` as Django's translators wrote it: real, human-written
sentences, not generated ones. An entry is used when it is neither fuzzy nor plural, its
English has at least MIN_WORDS words, and no language's text holds a placeholder, markup
or a line break (``%``, ``{``, ``<``, ``\\``). Of those, the MESSAGES whose English text
has the smallest SHA-256 are kept: a fixed choice that follows no alphabet or catalog.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "resources" / "examples" / "languages"
LANGUAGES = {"english": None, "french": "fr", "german": "de", "spanish": "es"}
"""Class folder name -> Django's locale code (None: the English msgid itself)."""
MESSAGES = 120
MIN_WORDS = 3
CATALOG = re.compile(r"^django/(?:.+/)?locale/(?P<lang>[^/]+)/LC_MESSAGES/django\.po$")
NOT_PLAIN = re.compile(r"[%{}<>\\\n]")


def catalogs(source: Path) -> Iterator[tuple[str, str]]:
    """(locale code, .po text) of every Django catalog in a wheel or a ``django`` folder."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            for name in sorted(wheel.namelist()):
                match = CATALOG.match(name)
                if match:
                    yield match["lang"], wheel.read(name).decode("utf-8")
    else:
        for path in sorted(source.rglob("django.po")):
            match = CATALOG.match(path.relative_to(source.parent).as_posix())
            if match:
                yield match["lang"], path.read_text(encoding="utf-8")


def po_entries(text: str) -> Iterator[tuple[str, str]]:
    """(msgid, msgstr) of each translated, non-fuzzy, singular entry of a .po file."""
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        fuzzy = False
        for line in block.splitlines():
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            elif line.startswith("#") or not line.strip():
                continue
            elif line.startswith('"') and key is not None:
                fields[key] += ast.literal_eval(line)
            else:
                key, _, literal = line.partition(" ")
                fields[key] = ast.literal_eval(literal)
        if fuzzy or "msgid_plural" in fields or not fields.get("msgid"):
            continue
        if fields.get("msgstr"):
            yield fields["msgid"], fields["msgstr"]


def messages(source: Path, count: int = MESSAGES) -> list[dict[str, str]]:
    """The ``count`` chosen messages, each as {class folder name: text}."""
    wanted = {code: name for name, code in LANGUAGES.items() if code is not None}
    translations: dict[str, dict[str, str]] = {}
    for code, text in catalogs(source):
        if code in wanted:
            for msgid, msgstr in po_entries(text):
                translations.setdefault(msgid, {"english": msgid}).setdefault(wanted[code], msgstr)
    usable = [
        texts
        for msgid, texts in translations.items()
        if len(msgid.split()) >= MIN_WORDS
        and len(texts) == len(LANGUAGES)
        and not any(NOT_PLAIN.search(value) for value in texts.values())
    ]
    if len(usable) < count:
        raise SystemExit(f"make_languages: only {len(usable)} usable messages in {source}")
    usable.sort(key=lambda texts: hashlib.sha256(texts["english"].encode()).hexdigest())
    return usable[:count]


def write_folder(chosen: list[dict[str, str]], out_dir: Path) -> int:
    """Replaces the text files under ``out_dir``; returns how many it wrote."""
    for old in out_dir.glob("*/*.txt"):
        old.unlink()
    for name in LANGUAGES:
        folder = out_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        for index, texts in enumerate(chosen):
            (folder / f"{index:03d}.txt").write_text(texts[name] + "\n", encoding="utf-8")
    return len(chosen) * len(LANGUAGES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a Django wheel or an installed django folder")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="the text folder to write")
    parser.add_argument("--messages", type=int, default=MESSAGES, help="messages per language")
    args = parser.parse_args(argv)
    written = write_folder(messages(args.source, args.messages), args.out)
    size = sum(path.stat().st_size for path in args.out.glob("*/*.txt"))
    print(f"make_languages: {written} texts, {size} bytes, in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
