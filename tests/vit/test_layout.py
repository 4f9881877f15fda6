"""The layout of `attention/vit/` (issue 33, docs/layout.md), read from the source by `bench.bench_imports`:
no import cycle in `attention/`, no arrow from a lower floor to a higher one, no module of `attention/vit/`
over 300 lines, about ten entries at its top level, and every module of `docs/layout.md`'s tree exists."""

from __future__ import annotations

import re
from pathlib import Path

from bench.bench_imports import MAX_LINES, report

ROOT = Path(__file__).resolve().parents[2]
R = report()


def test_no_import_cycle():
    assert R["cycles"] == []


def test_no_arrow_runs_upward():
    assert R["upward"] == []


def test_no_module_of_vit_is_over_300_lines():
    assert [(m, n) for m, n in R["over"] if m.startswith("attention.vit.")] == [], MAX_LINES


def test_vit_has_about_ten_entries_at_its_top_level():
    assert len(R["vit_entries"]) <= 10, R["vit_entries"]


def test_the_layout_page_names_every_module_of_the_four_role_packages():
    page = (ROOT / "docs" / "layout.md").read_text()
    for role in ("models", "engine", "draw", "serve"):
        for path in sorted((ROOT / "attention" / "vit" / role).glob("*.py")):
            if path.name != "__init__.py":
                assert re.search(rf"^\s+{re.escape(path.name)}\s", page, re.M), (
                    f"docs/layout.md lacks {role}/{path.name}"
                )
