"""Tokens are named truly, by one function, in every label and table (issue 31, item 6): `reg0` is
"register 0" in the query label, the scores table and its summary; DeiT's distillation token is named as
such, not counted among registers; a model without CLS calls no token "CLS"."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from attention.vit.draw import texts, views
from attention.vit.engine.extract import AttentionMaps


def maps(tokens: tuple[str, ...], query, peak: int) -> AttentionMaps:
    """A one-layer, one-head pass on a 2x2 grid with prefix `tokens`, its weight peaked on token `peak`."""
    n = len(tokens) + 4
    s = np.zeros((1, 1, n), np.float32)
    s[0, 0, peak] = 5.0
    w = np.exp(s) / np.exp(s).sum(-1, keepdims=True)
    return AttentionMaps(
        scores=s,
        weights=w.astype(np.float32),
        grid=(2, 2),
        image=Image.new("RGB", (32, 32)),
        patch_size=16,
        num_prefix_tokens=len(tokens),
        layer=0,
        query=query,
        tokens=tokens,
    )


DINOV2_REG = ("cls", "reg0", "reg1", "reg2", "reg3")


@pytest.mark.parametrize("j, name", [(0, "CLS"), (1, "register 0"), (4, "register 3"), (5, "patch (0, 0)")])
def test_registers_count_from_zero_in_the_scores_table_as_in_the_query_label(j, name):
    res = maps(DINOV2_REG, "reg0", peak=j)
    assert "register 0" in texts.query_label(res)
    _, rows = texts.scores_table(res, head=0)
    assert rows[0][1] == name
    summary, _ = texts.scores_table(maps(DINOV2_REG, "reg0", peak=1), head=0)
    assert "query register 0" in summary and "registers" in summary


def test_the_distillation_token_is_named_as_such_not_as_a_register():
    res = maps(("cls", "dist"), "dist", peak=1)
    summary, rows = texts.scores_table(res, head=0)
    assert rows[0][1] == "distillation token"
    assert "query distillation token" in summary and "distillation" in summary and "register" not in summary
    assert "the distillation token" in texts.query_label(res)
    assert views._share_caption(res, 0).endswith("CLS+dist")


def test_a_model_without_cls_calls_no_token_cls():
    regs = maps(("reg0", "reg1"), (1, 1), peak=0)  # registers only (no class token)
    summary, rows = texts.scores_table(regs, head=0)
    assert rows[0][1] == "register 0" and "CLS" not in summary and "query patch (1, 1)" in summary
    assert views._share_caption(regs, 0).endswith("reg")
    gap = maps((), (0, 1), peak=0)  # no prefix at all (GAP, SigLIP)
    summary, rows = texts.scores_table(gap, head=0)
    assert rows[0][1] == "patch (0, 0)" and "CLS" not in summary
