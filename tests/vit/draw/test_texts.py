"""Spec of attention.vit.draw.texts, the words beside a view: facts read from the model itself (timm's
config), token names by row-major order (numpy's unravel_index), the scores table's entropy and
span as scipy computes them from the row, the legend's colour stops as matplotlib's colormap."""

from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest
from PIL import Image
from scipy.special import softmax
from scipy.stats import entropy

from attention.vit.draw import texts
from attention.vit.engine.extract import attention_maps
from tests.vit.engine.test_extract import photo, tiny_vit


@pytest.fixture(scope="module")
def model():
    return tiny_vit(reg_tokens=2)


@pytest.fixture(scope="module")
def res(model):
    return attention_maps(model, photo(48, 64), resolution=None, query=(2, 3))


def test_details_state_the_models_own_facts(model, res):
    line = texts.details(res, model="tiny", device="cpu")
    n = model.num_prefix_tokens + 6 * 8
    assert f"grid 6×8 · {n} tokens ({model.num_prefix_tokens} prefix)" in line
    assert f"layer {len(model.blocks) - 1}/{len(model.blocks) - 1}" in line
    assert f"{model.blocks[0].attn.num_heads} heads" in line and "input 64×48 px" in line


def test_details_say_which_background_a_transparent_picture_was_shown_on(model):
    """A white digit on transparency is flattened onto black (attention.images): the visitor is told, and an
    opaque picture's line says nothing of it."""
    ink = np.zeros((48, 64, 4), np.uint8)
    ink[10:40, 20:30] = 255
    light = attention_maps(model, Image.fromarray(ink), resolution=None)
    assert "transparent parts shown on black (the picture is light)" in texts.details(light, model="m", device="cpu")
    opaque = attention_maps(model, photo(48, 64), resolution=None)
    assert "transparent" not in texts.details(opaque, model="m", device="cpu")


def test_token_names_follow_row_major_order_after_the_prefix(res):
    P, (gh, gw) = res.num_prefix_tokens, res.grid
    assert texts.token_name(res, 0) == "CLS"
    for j in (P, P + 5, P + gw, P + gh * gw - 1):
        r, c = np.unravel_index(j - P, (gh, gw))
        assert texts.token_name(res, j) == f"patch ({r}, {c})"
    assert f"token {P + 2 * gw + 3}" in texts.query_label(res)


def test_the_scores_table_is_the_row_and_its_softmax_as_scipy_reads_them(res):
    for head in range(res.weights.shape[1]):
        s, w = res.scores[res.layer, head].astype(np.float64), res.weights[res.layer, head]
        np.testing.assert_allclose(w, softmax(s), rtol=1e-5, atol=1e-7)
        summary, rows = texts.scores_table(res, head, top=len(w))
        assert f"entropy {entropy(w):.2f} nats (uniform: {np.log(len(w)):.2f})" in summary
        assert f"scores span {s.min():.2f} to {s.max():.2f}" in summary
        assert sorted(r[1] for r in rows) == sorted(texts.token_name(res, j) for j in range(len(w)))
        assert [r[3] for r in rows] == sorted((r[3] for r in rows), reverse=True)


@pytest.mark.parametrize("cmap", ["inferno", "viridis", "magma"])
def test_the_legends_colour_stops_are_the_colormaps(cmap):
    html = texts.legend_html(cmap, "heads")
    stops = [tuple(map(int, m)) for m in re.findall(r"rgb\((\d+),(\d+),(\d+)\) \d+%", html)]
    theirs = (matplotlib.colormaps[cmap](np.linspace(0, 1, 256))[:, :3] * 255)[np.linspace(0, 255, 11).astype(int)]
    assert len(stops) == 11
    np.testing.assert_allclose(np.array(stops), theirs, atol=1.0)


def test_rollout_captions_say_how_it_was_made():
    assert texts.rollout_caption() == "mean of heads"
    assert texts.rollout_caption("max", 0.9, "global") == "max of heads, lowest 90% dropped (whole matrix, CLS kept)"
    assert texts.rollout_caption("min", 0.5) == "min of heads, lowest 50% dropped (per row)"
