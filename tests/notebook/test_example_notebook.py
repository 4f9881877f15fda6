"""examples/attention.ipynb run top to bottom in a real kernel (nbclient + ipykernel): every result type shows
itself as a picture or HTML (not only text), the widget's view is in the outputs with a static picture beside it
for a saved notebook."""

from __future__ import annotations

import base64
import os

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]
NOTEBOOK = ROOT / "examples" / "attention.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def executed():
    """The example notebook executed in a fresh python3 kernel, in examples/, the package on its path."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
        ).execute()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return nb


def outputs(nb, needle: str) -> list[dict]:
    """The results (a cell's last line shown) of the code cell whose source is, or else holds, `needle`."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    (cell,) = [c for c in code if c.source == needle] or [c for c in code if needle in c.source]
    return [o for o in cell.outputs if o.output_type == "execute_result"]


def png_size(data: str) -> tuple[int, int]:
    """(width, height) of a base64 PNG, read from its header."""
    raw = base64.b64decode(data)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


@pytest.mark.parametrize(
    "needle, words",
    [
        ("keep_qk=True)", ["Per-head grid", "query: CLS", "head 3"]),  # AttentionMaps
        ('view="masks"', ["Threshold masks", "large: head 1"]),
        ("query=(3, 4), layer=2", ["query: patch (3, 4)", "layer 2/3"]),
        ('view="rollout"', ["Rollout"]),  # rollout, from the kept q and k
        ("rel", ["Why &#x27;3&#x27;?", "top classes"]),  # Relevance, its class named
        ("text_relevance", ["Where is &#x27;a 3&#x27;?", "&#x27;a 7&#x27;"]),  # TextRelevance, prompts named
        ("frames[0]", ["Frame 0"]),  # VideoFrameMaps
    ],
)
def test_each_result_shows_a_captioned_picture(executed, needle, words):
    (out,) = outputs(executed, needle)
    html, png = out["data"]["text/html"], out["data"]["image/png"]
    w, h = png_size(png)
    assert 100 <= h <= 400 and w <= 1200, (w, h)  # small: the large map reduced, the others beside it
    assert f"data:image/png;base64,{png}" in html  # the same picture, captioned
    for word in words:
        assert word in html, (word, html[-400:])


def test_the_step_by_step_row_shows_its_tables(executed):
    (out,) = outputs(executed, "explain_row")
    html = out["data"]["text/html"]
    assert "Step by step: layer 3, head 0, query patch (3, 4)" in html
    assert "softmax" in html and "<table" in html


def test_the_widget_is_in_the_outputs_with_a_static_picture(executed):
    (out,) = outputs(executed, "attention.explore")
    assert out["data"][WIDGET]["model_id"]
    w, h = png_size(out["data"]["image/png"])  # what a saved notebook shows without a kernel
    assert h >= 100 and w >= 100


def test_the_notebook_ran_without_an_error(executed):
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
