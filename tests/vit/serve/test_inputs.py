"""Spec of attention.vit.serve.inputs: the query fields, layer and head indices, and an image's content digest."""

from __future__ import annotations

import numpy as np
import pytest

from attention.errors import InputError
from attention.vit.serve import inputs


@pytest.mark.parametrize(
    "row, col, want",
    [
        (None, None, None),  # empty: the model's own token (Pass.default_query: CLS, else the pool's, ...)
        (float("nan"), float("nan"), None),
        ("", " ", None),
        (2, 3, (2, 3)),
        (2.0, 3.0, (2, 3)),
        ("4", "0", (4, 0)),
    ],
)
def test_parse_query(row, col, want):
    assert inputs.parse_query(row, col) == want


@pytest.mark.parametrize(
    "row, col, fragment",
    [
        (2, None, "both"),
        (None, 1, "both"),
        (2.5, 1, "whole"),
        ("a", 1, "whole numbers"),
        (float("inf"), 1, "whole"),
        (1, float("-inf"), "whole"),
    ],
)
def test_parse_query_refuses_half_or_malformed_queries(row, col, fragment):
    with pytest.raises(InputError, match=fragment):
        inputs.parse_query(row, col)


def test_parse_index():
    assert inputs.parse_index(-1.0) == -1 and inputs.parse_index("3") == 3
    with pytest.raises(InputError, match="whole"):
        inputs.parse_index(1.5, "Layer")
    with pytest.raises(InputError, match="Head 'x'"):
        inputs.parse_index("x", "Head")
    with pytest.raises(InputError, match="Layer inf is not a whole number"):
        inputs.parse_index(float("inf"), "Layer")


@pytest.mark.parametrize("empty", [None, float("nan"), "", "  "])
def test_an_empty_layer_is_the_last_and_an_empty_head_the_first(empty):
    """One rule for every endpoint and tab (the video API, /attention_maps, /explain_row, the tab's head)."""
    assert inputs.parse_layer(empty) == -1 and inputs.parse_head(empty) == 0


def test_layer_and_head_otherwise_parse_as_indices_naming_themselves():
    assert inputs.parse_layer("2") == 2 and inputs.parse_layer(-3.0) == -3 and inputs.parse_head(0) == 0
    assert inputs.parse_head(5) == 5
    with pytest.raises(InputError, match="Layer 1.5 is not a whole number"):
        inputs.parse_layer(1.5)
    with pytest.raises(InputError, match="Head 'x' is not a whole number"):
        inputs.parse_head("x")


def test_file_digest_follows_content_not_identity(tmp_path):
    from PIL import Image

    from attention.vit.serve.inputs import file_digest

    a = np.zeros((8, 8, 3), np.uint8)
    b = a.copy()
    assert file_digest(a) == file_digest(b)
    b[0, 0, 0] = 1
    assert file_digest(a) != file_digest(b)
    assert file_digest(a) != file_digest(a.reshape(8, 24))  # same bytes, other shape
    assert file_digest(Image.fromarray(a)) == file_digest(Image.fromarray(a.copy()))
    p = tmp_path / "a.png"
    Image.fromarray(a).save(p)
    assert file_digest(p) == file_digest(str(p)) == file_digest(p.read_bytes())


def test_view_request_reads_a_view_once_in_the_order_of_its_fields(monkeypatch):
    from attention.vit.draw import frames
    from attention.vit.engine import request

    v = inputs.view_request("Mean of heads", 0.5, query_row="2", query_col=3.0, layer="-1", rollout_options={})
    want = frames.ViewSpec(query=(2, 3), layer=-1, view="mean", threshold=0.5, rollout_options={})
    assert v == want and isinstance(v.query[0], int)
    assert inputs.view_request("heads", 0.6, layer=None).layer == -1  # None: the last layer
    # one fault named each, the view's name and style first, then the query, then the layer
    with pytest.raises(InputError, match="Unknown view 'nope'"):
        inputs.view_request("nope", 7, query_row=1, layer="x")
    with pytest.raises(InputError, match="hreshold"):
        inputs.view_request("heads", 7, query_row=1, layer="x")
    with pytest.raises(InputError, match="[Qq]uery"):
        inputs.view_request("heads", 0.6, query_row=1, layer="x")
    with pytest.raises(InputError, match="Layer 'x' is not a whole number"):
        inputs.view_request("heads", 0.6, layer="x")
    checks = []
    monkeypatch.setattr(request, "check_view", lambda view: checks.append(view) or view)
    inputs.view_request("mean", 0.6, query_row=1, query_col=1, layer=2)
    assert checks == ["mean"]  # checked once: what follows (`ViewSpec.placed`) trusts it
