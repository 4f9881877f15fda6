"""Spec of attention.vit.engine.preprocess: an image as the model sees it equals what the families' own
pipelines make of it, computed with torchvision as their scripts do: timm's eval transform (resize
the shorter side, bicubic, centre crop, normalise), DINO's visualize_attention.py (resize, then crop
the tensor from the top left to whole patches; its default: a 480 x 480 squash, bilinear); aspect
buckets hold the shorter side and spread the ratios; a fixed-size model refuses other sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from attention.errors import InputError
from attention.vit.engine.preprocess import Preprocess, aspect_buckets, prepare
from tests.vit.engine.test_extract import tiny_vit

P = 8  # the tiny ViT's patch


def picture(w: int, h: int, seed: int = 0) -> Image.Image:
    return Image.fromarray((np.random.default_rng(seed).random((h, w, 3)) * 255).astype(np.uint8))


@pytest.fixture(scope="module")
def model():
    return tiny_vit(patch=P)


def normalise(model):
    return T.Normalize(model.pretrained_cfg["mean"], model.pretrained_cfg["std"])


def test_centre_rule_equals_timms_eval_transform(model):
    img = picture(90, 90)
    theirs = T.Compose(
        [T.Resize(64, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(64), T.ToTensor(), normalise(model)]
    )(img)
    p = Preprocess.of(model, 64)(img)
    assert p.grid == (8, 8) and p.shown.size == (64, 64)
    torch.testing.assert_close(p.x, theirs, rtol=0, atol=1e-5)


def test_top_left_rule_equals_dinos_visualize_attention(model, monkeypatch):
    monkeypatch.setattr(model, "crop_rule", "top-left", raising=False)
    img = picture(100, 75)  # 80 x 60 px either way (101 x 75: torchvision's int(80.8) = 80; issue 31's)
    t = T.Compose([T.Resize(60, interpolation=T.InterpolationMode.BICUBIC), T.ToTensor(), normalise(model)])(img)
    h, w = t.shape[1:]
    theirs = t[:, : h - h % P, : w - w % P]  # DINO: img[:, :w - w % p, :h - h % p] on (C, w, h)
    p = Preprocess.of(model, 60)(img)
    assert p.grid == (7, 10) and p.x.shape == theirs.shape
    torch.testing.assert_close(p.x, theirs, rtol=0, atol=1e-5)


def test_dino480_is_dinos_default_squash(model):
    img = picture(150, 100)
    theirs = T.Compose([T.Resize((480, 480)), T.ToTensor(), normalise(model)])(img)  # bilinear, as DINO's default
    p = Preprocess.of(model, "dino480")(img)
    assert p.grid == (60, 60)
    torch.testing.assert_close(p.x, theirs, rtol=0, atol=1e-5)


def test_prepare_is_the_same_preprocessing_for_one_image(model):
    img = picture(101, 75, seed=3)
    x, shown, grid = prepare(model, img, 64, 10_000, max_gflop=None)
    p = Preprocess.of(model, 64)(img)
    assert x.shape == (1, *p.x.shape) and grid == p.grid and shown.size == p.shown.size
    torch.testing.assert_close(x[0], p.x, rtol=0, atol=0)


@pytest.mark.parametrize("k", [1, 3, 5, 9])
def test_buckets_keep_the_shorter_side_and_spread_ratios_from_half_to_double(k):
    grids = aspect_buckets(224, 16, k)
    assert len(grids) == k and all(min(g) == 14 for g in grids)
    ratios = [gw / gh for gh, gw in grids]
    assert ratios == sorted(ratios) and (k == 1 or (ratios[0] == 0.5 and ratios[-1] == 2.0))


def test_each_image_goes_to_the_bucket_of_nearest_aspect(model):
    prep = Preprocess.of(model, 64, buckets=3)  # 8x16, 8x8, 16x8 patches
    assert prep(picture(300, 100)).grid == (8, 16) and prep(picture(100, 95)).grid == (8, 8)
    assert prep(picture(50, 140)).grid == (16, 8)


def test_a_fixed_size_model_takes_only_its_trained_size():
    import timm

    strict = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=1)
    prep = Preprocess.of(strict, "auto")
    assert prep(picture(90, 50)).grid == (4, 4)
    with pytest.raises(InputError, match="takes only its trained input size, 32x32 px"):
        Preprocess.of(strict, 64)
