"""The README's table of libraries is the one `attention.vit.backbone.table` generates."""

from __future__ import annotations

import re
from pathlib import Path

from attention.vit.backbone.table import table

README = (Path(__file__).resolve().parents[3] / "README.md").read_text()


def test_readme_shows_the_generated_library_table():
    block = re.search(r"<!-- backbone-table -->\n(.+?)\n<!-- /backbone-table -->", README, re.S)
    assert block is not None and block.group(1) == table()
