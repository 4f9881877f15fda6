"""The "Why this class?" panel's drawing, without a browser: hidden for a model without a classifier head,
the bars and maps for mnist_vit, the query patch marked on both maps."""

from __future__ import annotations

import gradio as gr
import numpy as np

from attention.ui.vit.relevance_panel import BARS, RelevancePanel
from tests.conftest import DIGIT


def panel() -> RelevancePanel:
    with gr.Blocks():
        return RelevancePanel()


def test_hidden_for_a_backbone_without_a_head():
    p = panel()
    out = p.draw(DIGIT, "dino_vits16", "auto", None, "chefer", None, None, 0.6, "inferno")
    assert out == {p.box: gr.update(visible=False)}


def test_bars_maps_and_the_marked_query_for_mnist_vit():
    p = panel()
    out = p.draw(DIGIT, "mnist_vit", "auto", 8, "chefer", None, None, 0.6, "inferno")
    assert out[p.box]["visible"] and "Explaining **'8'**" in out[p.details]
    labels = [out[b].get("value") for b in p.bars]
    assert labels[0].startswith("3 · ") and labels[BARS].startswith("8 · ")  # the target, outside the top 5
    assert "rel-chosen" in out[p.bars[BARS]]["elem_classes"] and out[p.top][0] == 3
    plain = out[p.relimg]
    marked = p.draw(DIGIT, "mnist_vit", "auto", 8, "chefer", 2, 5, 0.6, "inferno")[p.relimg]
    assert plain.shape == marked.shape and plain.shape[0] >= 480
    diff = np.abs(plain.astype(int) - marked.astype(int)).sum(-1) > 0
    ys, xs = np.nonzero(diff)
    step = plain.shape[0] // 7
    assert ys.min() // step >= 1 and xs.max() // step == 5  # drawn around patch (2, 5)
    assert not out[p.cmpimg]["visible"]


def test_a_class_chosen_for_another_model_gives_way_to_the_top_class():
    p = panel()
    out = p.draw(DIGIT, "mnist_vit", "auto", 8, "chefer", None, None, 0.6, "inferno", "deit_small")
    assert "Explaining **'3'**" in out[p.details] and out[p.target] is None and out[p.chosen_for] == "mnist_vit"
    kept = p.draw(DIGIT, "mnist_vit", "auto", 8, "chefer", None, None, 0.6, "inferno", "mnist_vit")
    assert "Explaining **'8'**" in kept[p.details] and kept[p.target] == 8
