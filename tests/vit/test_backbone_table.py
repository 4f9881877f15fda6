"""docs/compat.md's table of libraries is the one `attention.vit.backbone.table` generates."""

from __future__ import annotations

import re
from pathlib import Path

from attention.vit.backbone.table import table

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "compat.md").read_text()


def test_the_compat_page_shows_the_generated_library_table():
    block = re.search(r"<!-- backbone-table -->\n(.+?)\n<!-- /backbone-table -->", PAGE, re.S)
    assert block is not None and block.group(1) == table()
