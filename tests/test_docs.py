"""Spec of the documentation as a visitor follows it: every relative link and picture of README.md and of the
pages of docs/ leads to a file of the repository (and to a heading of it, where it names one), and every page
of docs/ is reachable from README.md in one click."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)


def prose(text: str) -> str:
    """`text` without its fenced code blocks and inline code, where brackets are code, not links."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), re.M)}


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


def test_slugs_are_githubs():
    assert slug("A whole dataset: `extract`, on one GPU or many") == "a-whole-dataset-extract-on-one-gpu-or-many"
    assert slug('Where is "a cat"? Text relevance') == "where-is-a-cat-text-relevance"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_picture_resolves(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or ROOT not in file.parents:
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, broken


def test_readme_links_every_docs_page_and_shows_a_picture():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in relative_links(ROOT / "README.md")}
    assert set(PAGES[1:]) <= linked, sorted(str(p.relative_to(ROOT)) for p in set(PAGES[1:]) - linked)
    pictures = [t for t in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())]
    assert len(pictures) >= 3 and all((ROOT / p).stat().st_size > 10_000 for p in pictures)


def test_settings_page_names_every_variable_the_settings_read():
    """docs/settings.md is the list of settings: every environment variable attention/config.py reads is on it."""
    names = set(re.findall(r'"(ATTENTION_[A-Z_]*[A-Z])"', (ROOT / "attention" / "config.py").read_text()))
    page = (ROOT / "docs" / "settings.md").read_text()
    assert len(names) >= 40
    assert not {n for n in names if not re.search(rf"`{n}[`=]", page)}, "not on docs/settings.md"


def test_compat_page_lists_timms_families_as_compat_groups_them():
    """docs/compat.md's family table (`python -m attention.vit.compat`): its families in compat's order, the
    number of timm names in each and the names checked, as this timm lists them (the verdicts need the tiny
    builds: tests/vit/test_families.py checks them per family)."""
    import timm

    from attention.vit import compat

    page = (ROOT / "docs" / "compat.md").read_text()
    rows = re.findall(r"^\| ([^|`]+?) \| (\d+) \| (.+?) \|", page, re.M)
    groups: dict[str, list[str]] = {}
    for name in timm.list_models():
        if (fam := compat.family(name)) is not None:
            groups.setdefault(fam, []).append(name)
    assert [r[0] for r in rows] == [fam for fam, _ in compat.FAMILIES if fam in groups]
    for fam, count, checked in rows:
        assert int(count) == len(groups[fam]), fam
        assert set(re.findall(r"`(\w+)`", checked)) <= set(compat._spread(groups[fam], 3)), fam
