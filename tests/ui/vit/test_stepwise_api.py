"""/explain_row and /export_view through gradio_client: the package's numbers as JSON, one self-contained
HTML page (every picture inline, nothing fetched, the model's name escaped); bad parameters refused by name."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from gradio_client import handle_file

from attention.crowd.visitors import Visitor
from attention.vit.draw.stepwise_html import export_html
from attention.vit.engine import stepwise
from attention.vit.serve import passes
from tests.conftest import DIGIT


def test_explain_row_answers_the_packages_numbers_as_json(client):
    got = client.predict(
        handle_file(DIGIT), model="mnist_vit", layer=2, head=1, query_row=3, query_col=2, k=5, temperature=0.5,
        key_row=0, key_col=0, api_name="/explain_row",
    )  # fmt: skip
    want = stepwise.explain_row(
        passes.get_pass(DIGIT, "mnist_vit", "auto"), query=(3, 2), layer=2, head=1, k=5, key=(0, 0), temperature=0.5
    )
    assert got["model"] == "mnist_vit" and got["query"] == [3, 2] and got["layer"] == 2 and got["head"] == 1
    assert got["keys"] == list(want.names) and got["keys"][got["selected"]] == "patch (0, 0)"
    for name, a in (("q", want.q), ("k", want.k), ("v", want.v), ("products", want.products), ("dots", want.dots)):
        np.testing.assert_allclose(got[name], a, atol=1e-7)
    np.testing.assert_allclose(got["map"], want.map, atol=1e-7)
    np.testing.assert_allclose(got["restricted_output"], want.output, atol=1e-7)
    assert got["bias"] is None and got["temperature"] == 0.5 and got["scale"] == pytest.approx(want.scale)
    assert got["top_share"] == pytest.approx(want.top_share) and got["entropy_bits"] == pytest.approx(want.entropy)


def test_empty_k_temperature_and_head_are_the_defaults_of_the_tab(client):
    """null k, temperature and head (an API client's empty fields): the tab's defaults, 16 patches, T = 1, head 0."""
    got = client.predict(
        handle_file(DIGIT), model="mnist_vit", head=None, k=None, temperature=None, api_name="/explain_row"
    )
    want = stepwise.explain_row(passes.get_pass(DIGIT, "mnist_vit", "auto"), head=0, k=16, temperature=1.0)
    assert got["head"] == 0 and got["temperature"] == 1.0 and got["keys"] == list(want.names)
    np.testing.assert_allclose(got["map"], want.map, atol=1e-7)


@pytest.mark.parametrize(
    "kw, says",
    [({"k": 0}, "from 1 to 64"), ({"temperature": -1}, "temperature"), ({"head": 9}, "0 to 3")],
)
def test_explain_row_refuses_a_bad_parameter_naming_it(client, kw, says):
    with pytest.raises(Exception, match=says):
        client.predict(handle_file(DIGIT), model="mnist_vit", **kw, api_name="/explain_row")


def test_export_view_is_one_self_contained_page(client):
    path = client.predict(handle_file(DIGIT), model="mnist_vit", query_row=2, query_col=4, api_name="/export_view")
    page = Path(path).read_text(encoding="utf-8")
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) == 1 + 5 + 1  # the large map, 4 heads and their mean, the step-by-step map
    assert all(s.startswith("data:image/") for s in srcs)
    assert not re.search(r"(href|src)=\"(https?:|//)", page) and "<script" not in page and "<link" not in page
    assert "Step by step" in page and "patch (row 2, col 4)" in page
    assert "mnist_vit · patch 4 px" in page and "&lt;code&gt;" not in page and "&amp;#" not in page  # read as text


def test_the_export_escapes_every_name_it_is_given():
    steps = stepwise.explain_row(passes.get_pass(DIGIT, "mnist_vit", "auto"), query=(1, 1))
    page = export_html("<b>x</b>", b"\x89PNG", [(b"\x89PNG", "<i>tile</i>")], steps, b"\x89PNG", model="<script>1")
    assert "<script>1" not in page and "&lt;script&gt;1" in page
    assert "<b>x</b>" not in page and "<i>tile</i>" not in page


@pytest.mark.parametrize("endpoint", ["/explain_row", "/export_view"])
def test_the_step_by_step_passes_are_the_visitors_session_and_address(visitor_client, monkeypatch, endpoint):
    """Both endpoints take their pass for the event's visitor (`admit.who()`: session and client address), so a
    client's many sessions share one forward at a time like every computing endpoint's (not the session
    alone, as before)."""
    seen = []
    served = passes.served_pass

    def recording(image, model, resolution, visitor, **kw):
        seen.append(visitor)
        return served(image, model, resolution, visitor, **kw)

    monkeypatch.setattr(passes, "served_pass", recording)
    c = visitor_client(41)
    c.predict(handle_file(DIGIT), model="mnist_vit", api_name=endpoint)
    assert len(seen) == 1 and isinstance(seen[0], Visitor), seen
    assert seen[0].session == c.session_hash and seen[0].client == "10.0.0.42"
