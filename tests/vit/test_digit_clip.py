"""The shipped digit_clip: loads offline through load_vit, is small, and its maps mean something: the planted
check (bench/bench_digit_clip.py) on held-out digits pasted into known cells of a larger canvas."""

from __future__ import annotations

import json

import pytest

from attention.config import WEIGHTS_DIR
from attention.vit.models import load_vit
from attention.vit.text import has_text_tower
from bench.bench_digit_clip import evaluate

# Shares measured by `python -m bench.bench_digit_clip` over 300 held-out canvases (README, docs/text-relevance.md);
# the test's 40 canvases must reach these floors (a little under the measured shares: 40 is a small sample).
FLOORS = {"chefer": {"peaks": 0.8, "segments": 0.7}}


def test_ships_small_and_loads_offline():
    assert (WEIGHTS_DIR / "digit_clip.safetensors").stat().st_size < 2 << 20
    meta = json.loads((WEIGHTS_DIR / "digit_clip.json").read_text())
    assert meta["heldout"]["single_digit_accuracy"] > 0.9
    vit = load_vit("digit_clip", device="cpu")
    assert has_text_tower(vit) and vit.text_model.tokenizer.context_length == 8


@pytest.mark.parametrize("rule", sorted(FLOORS))
def test_each_caption_peaks_on_its_digit_and_the_segmentation_names_each_digit(rule):
    res = evaluate(load_vit("digit_clip", device="cpu"), n=40, seed=1)
    for k, floor in FLOORS[rule].items():
        assert res[rule][k] >= floor, (rule, k, res[rule])
