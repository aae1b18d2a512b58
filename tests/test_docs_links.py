"""The guide's pages link to each other and to the repository's files: every such link
leads somewhere (Help ▸ Distloop Guide follows them in the window)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings, as GitHub and Qt's Markdown name them."""
    found = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [link for link in LINK.findall(text) if not link.startswith(("http", "mailto"))]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_link_of_a_page_leads_to_a_file_and_heading_there(page: Path) -> None:
    broken = []
    for link in links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or (
            anchor and (target.suffix != ".md" or anchor not in anchors(target))
        ):
            broken.append(link)
    assert not broken, f"{page.name}: {broken}"


def test_the_readme_links_every_page_of_the_docs() -> None:
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in links(ROOT / "README.md")}
    assert set((ROOT / "docs").glob("*.md")) <= linked
