"""The perturbation test (`python -m bench.evaluate_relevance`): curves start from the whole
digit's probability and end at the blank input's for every method; on held-out digits Chefer's rule and
grad-rollout remove the evidence faster than a random order (lower positive AUC, higher negative AUC)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention import mnist
from attention.vit.models.loader import load_vit
from bench.evaluate_relevance import METHODS, STEPS, curves, evaluate, main, removal_batch


def test_removal_blanks_the_ranked_patches_in_order():
    x = torch.ones(1, 1, 8, 8)
    b = removal_batch(x, np.array([3, 0, 1, 2]), (2, 2), 4)
    assert b.shape == (len(STEPS), 1, 8, 8)
    assert b[0].sum() == 64 and b[-1].sum() == 0
    assert b[3, 0, 4:, 4:].sum() == 0 and b[3, 0, :4].sum() == 32  # 30% of 4 patches -> 1: patch 3 (bottom right)


def test_every_curve_starts_at_the_digit_and_ends_at_the_blank():
    model = load_vit("mnist_vit", device="cpu")
    d = mnist.load_subset()
    c, target = curves(model, d.images[0], np.random.default_rng(0))
    assert set(c) == set(METHODS) and target == d.labels[0]
    firsts = {round(float(v[0]), 5) for pair in c.values() for v in pair}
    lasts = {round(float(v[-1]), 5) for pair in c.values() for v in pair}
    assert len(firsts) == 1 and len(lasts) == 1 and firsts != lasts


@pytest.mark.slow
def test_relevance_beats_a_random_order_on_held_out_digits(capsys):
    torch.set_num_threads(1)
    r = evaluate(load_vit("mnist_vit", device="cpu"), limit=40)
    auc = r["auc"]
    for m in ("chefer", "grad_rollout"):
        assert auc[m][0] < auc["random"][0] - 0.1 and auc[m][1] > auc["random"][1] + 0.05
    assert main(["--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 held-out digits" in out and "| chefer |" in out and "| random |" in out
