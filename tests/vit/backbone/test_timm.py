"""timm through the backbone description: models built by their constructor (no pretrained_cfg), fused
or unfused attention (TIMM_FUSED_ATTN=0 / 2, `fused_attn = False`) read exactly against timm's own
softmax (`compat.deviation`, every layer, head and token), without changing the caller's model; the
engine's tests pass under TIMM_FUSED_ATTN=0 and =2; what cannot be read is refused before any forward."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from attention.errors import UnsupportedModelError
from attention.vit.backbone import describe
from attention.vit.engine.extract import attention_maps
from bench import compat
from tests.vit.worst import record

ROOT = Path(__file__).resolve().parents[3]


def test_a_constructor_built_vit_has_a_description_and_maps():
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, num_classes=0).eval()
    assert not hasattr(model, "pretrained_cfg") or not model.pretrained_cfg
    bb = describe(model)
    assert bb.mean == (0.485, 0.456, 0.406) and bb.input_size == (32, 32) and bb.fixed == (32, 32)
    img = Image.fromarray((np.random.default_rng(0).random((40, 60, 3)) * 255).astype(np.uint8))
    res = attention_maps(model, img)
    assert res.grid == (4, 4) and res.layers.shape == (2, 4, 4, 4)
    assert compat.deviation(compat.peak(model), torch.randn(1, 3, 32, 32)) < 1e-4


@pytest.mark.parametrize(
    "name",
    [
        "vit_small_patch16_224.dino",  # plain ViT
        "vit_small_patch14_reg4_dinov2.lvd142m",  # registers
        "vit_small_patch16_dinov3.lvd1689m",  # Eva with RoPE, storage tokens
        "beit_base_patch16_224.in22k_ft_in22k_in1k",  # additive relative-position bias
        "vit_base_patch16_siglip_224.webli",  # attention-pooling head (the pool's query)
        "deit_small_distilled_patch16_224.fb_in1k",  # distillation token
    ],
)
def test_unfused_timm_attention_is_read_exactly_and_left_unfused(name):
    model = compat.peak(compat.tiny(name))
    for mod in describe(model).attention:
        mod.fused_attn = False
    bb = describe(model)
    p = bb.patch_size
    for size in [(2 * p, 2 * p), (2 * p, 3 * p)] if not bb.fixed else [bb.fixed]:  # square and not
        assert record(compat.deviation(model, torch.randn(1, 3, *size))) < 1e-4
    assert not any(m.fused_attn for m in describe(model).attention)


@pytest.mark.timeout(900)  # a child pytest over three engine test files (~20 s each idle; minutes on a loaded machine)
@pytest.mark.parametrize("value", ["0", "2"])
def test_the_engine_tests_pass_under_timm_fused_attn(value):
    env = {**os.environ, "TIMM_FUSED_ATTN": value}
    probe = "import timm.layers.config as c; print(c._USE_FUSED_ATTN)"
    assert (
        subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True).stdout.strip() == value
    )
    tests = ["tests/vit/engine/test_capture.py", "tests/vit/engine/test_extract.py", "tests/vit/engine/test_batch.py"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


@pytest.mark.parametrize(
    "name, kw, fragment",
    [
        ("vit_small_r26_s32_224", {"img_size": 64}, "has a CNN stem \\(HybridEmbed\\)"),
        ("swin_tiny_patch4_window7_224", {}, "SwinTransformer is not supported: windowed"),
        ("samvit_base_patch16", {"img_size": 64}, "VisionTransformerSAM is not supported: windowed"),
        ("hiera_tiny_224", {}, "Hiera is not supported"),
        ("cait_xxs24_224", {}, "Cait is not supported"),
        ("xcit_nano_12_p16_224", {}, "Xcit is not supported"),
        ("vit_small_patch16_224", {"patch_size": (16, 8)}, "non-square patches \\(16x8 px\\)"),
    ],
)
def test_models_the_engine_cannot_read_are_refused_before_any_forward(name, kw, fragment):
    model = timm.create_model(name, pretrained=False, **kw)
    calls = []
    model.register_forward_pre_hook(lambda *a: calls.append(1))
    with pytest.raises(UnsupportedModelError, match=fragment):
        attention_maps(model, Image.new("RGB", (64, 64)))
    assert not calls
