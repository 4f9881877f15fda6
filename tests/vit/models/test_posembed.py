"""Spec of attention.vit.models.posembed: each rule resamples position embeddings exactly as the family's
own code does, checked against that code: DINO/DINOv2's `interpolate_pos_encoding` (the installed
dinov2 package: grid + 0.1 as the scale factor, no antialias) and timm's `resample_abs_pos_embed`
(size=, antialias on)."""

from __future__ import annotations

import warnings

import pytest
import torch
from timm.layers import resample_abs_pos_embed

from attention.errors import InputError
from attention.vit.models import posembed

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "xFormers not available"
    from dinov2.models.vision_transformer import DinoVisionTransformer

M, D = 6, 8  # a 6 x 6 trained grid of 8-dim embeddings
GRIDS = [(6, 6), (5, 7), (9, 4), (13, 13), (1, 3)]


@pytest.fixture(scope="module")
def dino():
    """DINOv2's own ViT (tiny, random embeddings): 24 px / patch 4 = a 6 x 6 trained grid."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = DinoVisionTransformer(img_size=4 * M, patch_size=4, embed_dim=D, depth=1, num_heads=2)
    with torch.no_grad():
        m.pos_embed.normal_()
    return m.eval()


@pytest.mark.parametrize("rule", ["dino", "dinov2"])
@pytest.mark.parametrize("grid", GRIDS)
def test_dino_rules_equal_dinos_interpolate_pos_encoding(dino, rule, grid):
    gh, gw = grid
    x = torch.zeros(1, 1 + gh * gw, D)
    with torch.no_grad():  # DINO's code names the image's rows "w" (x.shape = B, C, w, h)
        theirs = dino.interpolate_pos_encoding(x, 4 * gh, 4 * gw)
        ours = posembed.resample(dino.pos_embed[:, 1:], grid, rule)
    assert ours.shape == (1, gh * gw, D)
    torch.testing.assert_close(ours, theirs[:, 1:], rtol=0, atol=1e-6)


@pytest.mark.parametrize("rule", ["timm", "dinov2_reg"])
@pytest.mark.parametrize("grid", GRIDS)
def test_size_rules_equal_timms_resample_abs_pos_embed(rule, grid):
    torch.manual_seed(1)
    pos = torch.randn(1, M * M, D)
    theirs = resample_abs_pos_embed(pos, list(grid), num_prefix_tokens=0)
    torch.testing.assert_close(posembed.resample(pos, grid, rule), theirs, rtol=0, atol=1e-6)


def test_the_rules_differ_off_the_trained_grid_and_agree_on_it():
    torch.manual_seed(2)
    pos = torch.randn(1, M * M, D)
    dino, timm_ = posembed.resample(pos, (9, 11), "dino"), posembed.resample(pos, (9, 11), "timm")
    assert (dino - timm_).abs().max() > 1e-2  # DINO's + 0.1 and plain bicubic are not timm's
    assert posembed.resample(pos, (M, M), "dino") is pos and posembed.resample(pos, (M, M), "timm") is pos


def test_dtype_is_kept_and_computed_in_float32():
    torch.manual_seed(3)
    pos = torch.randn(1, M * M, D)
    half = posembed.resample(pos.half(), (5, 7), "dino")
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), posembed.resample(pos, (5, 7), "dino"), rtol=0, atol=2e-3)


def test_refusals_name_what_is_accepted():
    with pytest.raises(InputError, match="accepted: dino, dinov2, dinov2_reg, timm, rope"):
        posembed.resample(torch.zeros(1, 4, D), (3, 3), "bilinear")
    with pytest.raises(InputError, match="not a square grid"):
        posembed.resample(torch.zeros(1, 5, D), (3, 3), "dino")
    with pytest.raises(InputError, match="nothing to resample"):
        posembed.resample(torch.zeros(1, 4, D), (3, 3), "rope")
