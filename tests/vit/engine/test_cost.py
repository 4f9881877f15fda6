"""Spec of attention.vit.engine.cost: a forward pass's compute is estimated before it runs, and a request
over the budget is refused at once with the largest resolution that fits."""

from __future__ import annotations

import time

import pytest
import timm
import torch

from attention.errors import BudgetError, ImageError
from attention.images import largest_token_resolution
from attention.vit.engine.cost import check_budget, forward_gflop, largest_resolution, patch_tokens
from attention.vit.engine.extract import attention_maps
from attention.vit.models.loader import load_vit


def test_the_estimate_counts_projections_mlp_and_the_quadratic_attention():
    model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=0)  # D 384, M 1536, 12 blocks
    n, d, m = 197, 384, 1536
    block = 2 * n * (4 * d * d + 2 * d * m) + 4 * n * n * d
    assert forward_gflop(model, 196) == pytest.approx((12 * block + 2 * 196 * 3 * 256 * d) / 1e9)
    # attention dominates at large token counts: 4x the tokens costs far more than 4x
    assert forward_gflop(model, 16_384) > 8 * forward_gflop(model, 4_096)


def test_the_largest_fitting_resolution_fits_and_one_more_pixel_does_not():
    model = load_vit("mnist_vit", device="cpu")
    size, budget = (300, 200), 2.0
    best = largest_resolution(model, size, budget)
    assert best is not None
    assert forward_gflop(model, patch_tokens(size, 4, best)) <= budget
    assert forward_gflop(model, patch_tokens(size, 4, best + 4)) > budget
    assert check_budget(model, size, best, budget) <= budget


def test_a_pass_over_budget_is_refused_at_once_naming_what_fits():
    model = load_vit("mnist_vit", device="cpu")
    t0 = time.perf_counter()
    with pytest.raises(BudgetError) as e:
        attention_maps(model, _photo(), resolution=2000, max_gflop=2.0)
    assert time.perf_counter() - t0 < 1.0
    msg = str(e.value)
    best = largest_resolution(model, (300, 200), 2.0)
    assert f"largest resolution accepted for this 300x200 image is {best} px" in msg and "budget of 2 GFLOP" in msg
    assert attention_maps(model, _photo(), resolution=best, max_gflop=2.0).grid  # what it names does run


def test_the_resolution_named_passes_every_limit_and_one_patch_more_does_not():
    """One message, one number: under a compute budget that alone would allow more patches than the
    token cap, the refusal names the largest resolution both accept (the cap's), and that one runs."""
    model = load_vit("mnist_vit", device="cpu")  # patch 4
    size, cap = (300, 200), 2_000
    budget = forward_gflop(model, 3 * cap)  # compute alone would accept about 3x the cap's tokens
    assert largest_resolution(model, size, budget) > largest_token_resolution(size, 4, cap)
    with pytest.raises(BudgetError) as e:
        attention_maps(model, _photo(), resolution=4096, max_gflop=budget, max_tokens=cap)
    best = largest_token_resolution(size, 4, cap)
    assert f"largest resolution accepted for this 300x200 image is {best} px" in str(e.value)
    assert attention_maps(model, _photo(), resolution=best, max_gflop=budget, max_tokens=cap).grid
    for over in (best + 1, best + 4):  # the next sizes up: refused by the cap, naming the same number
        with pytest.raises(ImageError, match=f"the largest resolution accepted for this 300x200 image is {best} px"):
            attention_maps(model, _photo(), resolution=over, max_gflop=budget, max_tokens=cap)
    assert patch_tokens(size, 4, best) <= cap < patch_tokens(size, 4, best + 4)


def _photo():
    import numpy as np

    return (np.random.default_rng(0).random((200, 300, 3)) * 255).astype("uint8")


def test_a_swiglu_mlp_costs_what_torchs_flop_counter_counts():
    """DINOv3 S+ (and larger) has a SwiGLU MLP (three Linear layers): its extra cost over DINOv3 S, as
    estimated, is the one torch.utils.flop_counter counts on real forward passes (same width, depth, grid)."""
    from torch.utils.flop_counter import FlopCounterMode

    x, tokens = torch.randn(1, 3, 128, 192), (128 // 16) * (192 // 16)
    counted, estimated = [], []
    for name in ("vit_small_plus_patch16_dinov3", "vit_small_patch16_dinov3"):
        m = timm.create_model(name, num_classes=0, embed_dim=64, depth=2, num_heads=2).eval()
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            m.forward_features(x)
        counted.append(fc.get_total_flops() / 1e9)
        estimated.append(forward_gflop(m, tokens))
    assert estimated[0] / estimated[1] == pytest.approx(counted[0] / counted[1], rel=0.05)
