"""Meta's DINOv2 classes (the `dinov2` package, its 2023 release) through the engine, against the
explicit softmax of each block's own qkv projection: every layer, head, prefix and patch query,
square and non-square inputs, with and without block chunks."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch
from PIL import Image

from attention.vit.backbone import describe
from attention.vit.engine.extract import attention_maps
from tests.vit.backbone_oracle import assert_rows_match, peak

vt = pytest.importorskip("dinov2.models.vision_transformer")


def build(chunks: int = 0, seed: int = 0) -> torch.nn.Module:
    from dinov2.layers import MemEffAttention
    from dinov2.layers.block import NestedTensorBlock

    torch.manual_seed(seed)
    model = vt.DinoVisionTransformer(
        img_size=28,
        patch_size=14,
        embed_dim=32,
        depth=3,
        num_heads=4,
        init_values=1.0,
        block_chunks=chunks,
        block_fn=partial(NestedTensorBlock, attn_class=MemEffAttention),
    ).eval()
    peak(model)
    return model


def oracle(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Each block's attention (B, H, N, N): softmax(q k^T * scale) of its own qkv on the block's input."""
    seen = []

    def grab(mod, args):
        t = args[0]
        B, N, C = t.shape
        qkv = mod.qkv(t).reshape(B, N, 3, mod.num_heads, C // mod.num_heads).permute(2, 0, 3, 1, 4)
        seen.append(torch.softmax((qkv[0] * mod.scale) @ qkv[1].transpose(-2, -1), -1))

    hooks = [b.attn.register_forward_pre_hook(grab) for b in describe(model).blocks]
    try:
        with torch.no_grad():
            model.forward_features(x)
    finally:
        for h in hooks:
            h.remove()
    return seen


@pytest.mark.parametrize("chunks", [0, 3])
def test_every_layer_head_and_query_is_dinov2s_own_softmax(chunks):
    model = build(chunks)
    bb = describe(model)
    assert bb.library == "dinov2" and bb.prefix == ("cls",) and bb.depth == 3 and bb.patch == (14, 14)
    for gh, gw in ((2, 2), (2, 3)):
        x = torch.randn(2, 3, gh * 14, gw * 14)
        assert_rows_match(model, x, oracle(model, x), 1)


def test_attention_maps_on_a_dinov2_object_feeds_it_as_dino_does():
    model = build()
    bb = describe(model)
    assert (bb.crop, bb.default_resolution) == ("top-left", 480)
    img = Image.fromarray((np.random.default_rng(1).random((45, 60, 3)) * 255).astype(np.uint8))
    res = attention_maps(model, img, resolution="native", keep_qk=True)
    assert res.grid == (3, 4) and res.query == "cls"
    x = torch.from_numpy(
        (np.asarray(res.image, np.float32) / 255 - np.array(bb.mean, np.float32)) / np.array(bb.std, np.float32)
    ).permute(2, 0, 1)[None]
    ref = oracle(model, x)
    for layer in range(3):
        np.testing.assert_allclose(res.weights[layer], ref[layer][0, :, 0].numpy(), atol=1e-4)
    np.testing.assert_allclose(res.requery((2, 3)).weights[-1], ref[-1][0, :, 1 + 2 * 4 + 3].numpy(), atol=1e-4)
