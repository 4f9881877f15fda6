"""docs/compat.md's table of libraries is the one `attention.vit.backbone.table` generates."""

from __future__ import annotations

import re
from pathlib import Path

from attention.vit.backbone.table import table

PAGE = (Path(__file__).resolve().parents[3] / "docs" / "compat.md").read_text()


def test_the_compat_page_shows_the_generated_library_table():
    block = re.search(r"<!-- backbone-table -->\n(.+?)\n<!-- /backbone-table -->", PAGE, re.S)
    assert block is not None and block.group(1) == table()


MODELS = (Path(__file__).resolve().parents[3] / "docs" / "models.md").read_text()
ROOT = Path(__file__).resolve().parents[3]


def test_the_models_page_shows_a_run_of_the_compatibility_table_with_the_scripts_rows():
    from bench.models_compat import ROWS

    block = re.search(r"<!-- models-compat -->\n(.+?)\n<!-- /models-compat -->", MODELS, re.S)
    rows = [line.split(" | ") for line in block.group(1).splitlines()[2:]]
    assert [r[0].removeprefix("| ") for r in rows] == [r.holder for r in ROWS]
    for row, want in zip(rows, ROWS, strict=True):
        assert row[1] == want.oracle and row[2].startswith("exact (")  # the run printed: every test passed
        path, func = want.tests.split("::")
        assert f"\ndef {func}(" in (ROOT / path).read_text(), want.tests


def test_the_models_page_shows_the_custom_vit_of_the_tests_verbatim():
    source = (ROOT / "tests" / "vit" / "backbone" / "custom_vit.py").read_text()
    code = source.split("# docs/models.md: begin\n", 1)[1].split("# docs/models.md: end", 1)[0].strip("\n")
    assert f"```python\n{code}\n```" in MODELS


def test_the_models_pages_usage_runs(monkeypatch):
    import attention
    from tests.vit.backbone import custom_vit

    usage = MODELS.split("```python\nimport attention\n\nattention.register_backbone(MyViT", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    space = vars(custom_vit).copy()
    try:
        exec("import attention\n\nattention.register_backbone(MyViT" + usage, space)
    finally:
        attention.unregister_backbone("my_vit")
    assert space["res"].maps.shape == (4, 4, 4)
    assert space["rel"].names == ("cat", "dog", "bird") and space["rel"].target == 1
