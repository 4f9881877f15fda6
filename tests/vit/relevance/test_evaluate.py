"""The perturbation test (`python -m bench.evaluate_relevance`, a thin caller of `attention.vit.score`): on
held-out digits Chefer's rule and grad-rollout remove the evidence faster than a random order (lower positive
AUC, higher negative AUC). The protocol itself is checked against the paper's loop in tests/vit/score/."""

from __future__ import annotations

import pytest
import torch

from attention.vit.models.loader import load_vit
from bench.evaluate_relevance import evaluate, main


@pytest.mark.slow
def test_relevance_beats_a_random_order_on_held_out_digits(capsys):
    torch.set_num_threads(1)
    r = evaluate(load_vit("mnist_vit", device="cpu"), limit=40)
    auc = r["auc"]
    for m in ("chefer", "grad_rollout"):
        assert auc[m][0] < auc["random"][0] - 0.1 and auc[m][1] > auc["random"][1] + 0.1
    assert main(["--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 held-out digits" in out and "| chefer |" in out and "| random |" in out
