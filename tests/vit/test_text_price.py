"""Text relevance's compute budget: priced per job by `price.text_relevance_gflop` (fitted to measured times,
bench/bench_text_relevance.py --factor), checked before the pass: a job over the budget is refused at once,
naming the largest resolution that fits for these prompts."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from attention.config import SETTINGS
from attention.errors import BudgetError
from attention.vit.engine.cost import patch_tokens
from attention.vit.models.loader import load_vit
from attention.vit.text import find
from attention.vit.text.price import text_relevance_gflop

EIGHT = ", ".join(f"a handwritten {w}" for w in ("zero", "one", "two", "three", "four", "five", "six", "seven"))


def test_a_high_token_text_relevance_is_refused_at_once_naming_what_fits(monkeypatch):
    vit = load_vit("digit_clip", device="cpu")
    budget = SETTINGS.relevance_budget_gflop("cpu")
    img = Image.fromarray(np.zeros((448, 448), np.uint8))
    tokens = (448 // 4) ** 2
    # one prompt at 448 px fits the budget, eight do not: the price counts the prompts
    assert text_relevance_gflop(vit, tokens, 1) <= budget < text_relevance_gflop(vit, tokens, 8)

    def never(*a, **k):
        raise AssertionError("the pass ran: the budget was not checked before it")

    monkeypatch.setattr(find, "text_relevance_rows", never)
    gradient = ("chefer", "legrad", "similarity")  # the gradient rules' pass alone: the price's first part
    with pytest.raises(BudgetError, match="text relevance job") as e:
        find.text_relevance(vit, img, EIGHT, rules=gradient, resolution=448, max_gflop=budget)
    best = int(re.search(r"largest resolution accepted for this 448x448 image is (\d+) px", str(e.value)).group(1))
    fits = text_relevance_gflop(vit, patch_tokens((448, 448), 4, best, None, None), 8)
    over = text_relevance_gflop(vit, patch_tokens((448, 448), 4, best + 4, None, None), 8)
    assert fits <= budget < over, (best, fits, over)
    with pytest.raises(AssertionError, match="the pass ran"):  # one prompt passes the check and reaches the pass
        find.text_relevance(vit, img, "a handwritten seven", rules=gradient, resolution=448, max_gflop=budget)


def test_the_open_vocabulary_rules_are_priced_about_a_forward():
    """Forward-only rules: a forward and, per rule, its rows at the last block; far below the gradient rules
    (digit_clip has 4 blocks and 3,137 tokens at 224 px: the last block's attention rows again weigh more)."""
    from attention.vit.engine.cost import forward_gflop

    vit = load_vit("digit_clip", device="cpu")
    tokens = (224 // 4) ** 2
    fwd = forward_gflop(vit, tokens)
    one = text_relevance_gflop(vit, tokens, 8, gradient=False, open_rules=1)
    assert fwd < one < 2 * fwd < text_relevance_gflop(vit, tokens, 8) / 5  # 4 blocks: the last is a quarter
