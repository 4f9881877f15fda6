"""nn.MultiheadAttention towers through the engine: torchvision's VisionTransformer and open_clip's
visual towers, against `nn.MultiheadAttention(need_weights=True, average_attn_weights=False)` on each
block's own input (every layer, head, prefix and patch query, several inputs); open_clip's TimmModel
towers through their timm trunk. The engine's pass leaves the model's output unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attention.errors import UnsupportedModelError
from attention.vit.backbone import describe
from attention.vit.engine.extract import attention_maps
from attention.vit.engine.rows import run_pass
from attention.vit.relevance.compute import relevance_rows
from tests.vit.backbone_oracle import assert_rows_match, peak

torchvision = pytest.importorskip("torchvision")
open_clip = pytest.importorskip("open_clip")


def tv_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    m = torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=3, num_heads=4, hidden_dim=32, mlp_dim=64, num_classes=5
    ).eval()
    peak(m)
    return m


def clip_tower(seed: int = 0) -> torch.nn.Module:
    from open_clip.transformer import VisionTransformer

    torch.manual_seed(seed)
    m = VisionTransformer(image_size=32, patch_size=8, width=32, layers=3, heads=4, mlp_ratio=2.0, output_dim=16)
    m = m.eval()
    peak(m)
    return m


def oracle(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Per block, nn.MultiheadAttention's own weights (B, H, N, N) on the block's input (its forward
    called directly with need_weights=True, average_attn_weights=False)."""
    seen = []

    def grab(mod, args, kwargs):
        q, k, v = (list(args) + [kwargs.get(n) for n in ("query", "key", "value")])[:3]
        _, w = torch.nn.MultiheadAttention.forward(mod, q, k, v, need_weights=True, average_attn_weights=False)
        seen.append(w)

    hooks = [a.register_forward_pre_hook(grab, with_kwargs=True) for a in describe(model).attention]
    try:
        with torch.no_grad():
            out = model(x)
    finally:
        for h in hooks:
            h.remove()
    return seen, out


@pytest.mark.parametrize("make", [tv_model, clip_tower], ids=["torchvision", "open_clip"])
def test_every_layer_head_and_query_is_multihead_attentions_own_weights(make):
    model = make()
    bb = describe(model)
    assert bb.prefix == ("cls",) and bb.depth == 3 and bb.fixed == (32, 32)
    x = torch.randn(2, 3, 32, 32)
    ref, out = oracle(model, x)
    assert_rows_match(model, x, ref, 1)
    with torch.inference_mode():  # a recorded pass computes the same output
        from attention.vit.engine.capture import Recorder, recording

        class Outs(Recorder):
            def on_output(self, layer, o):
                pass

        with recording(model, Outs()):
            again = model(x)
    torch.testing.assert_close(again, out, atol=1e-5, rtol=1e-5)


def test_open_clip_model_object_and_its_visual_are_described_alike():
    model = open_clip.create_model("ViT-B-32", pretrained=None)
    assert describe(model).model is model.visual
    assert describe(model.visual).library == "open_clip" and describe(model.visual).patch == (32, 32)


def test_open_clip_timm_tower_is_read_through_its_trunk():
    from open_clip.timm_model import TimmModel

    torch.manual_seed(0)
    tower = TimmModel("vit_tiny_patch16_224", embed_dim=16, image_size=32, pretrained=False).eval()
    bb = describe(tower)
    assert bb.library == "open_clip" and bb.blocks[0] is tower.trunk.blocks[0]
    with torch.inference_mode():
        rec = run_pass(tower, torch.randn(1, 3, *bb.input_size), 0, keep_qk=False)
    assert rec.rows_cpu().shape == (1, 12, 3, 1 + (bb.input_size[0] // 16) ** 2)


def test_attention_maps_and_relevance_on_a_torchvision_classifier():
    model = tv_model()
    img = Image.fromarray((np.random.default_rng(2).random((50, 40, 3)) * 255).astype(np.uint8))
    res = attention_maps(model, img)  # fitted to its one size, 32 x 32
    assert res.grid == (4, 4) and res.layers.shape == (3, 4, 4, 4)
    x = torch.randn(1, 3, 32, 32)
    logits, t, chefer, grad_rollout, att = relevance_rows(model, x)
    with torch.no_grad():
        torch.testing.assert_close(logits, model(x)[0], atol=1e-5, rtol=1e-5)
    assert chefer.shape == (17,) and att.shape == (3, 4, 17) and torch.isfinite(grad_rollout).all()


def test_an_undescribed_model_is_refused_naming_its_class_and_the_described_families():
    with pytest.raises(
        UnsupportedModelError, match=r"Sequential \(from torch.nn.modules.container\) .* described: timm"
    ):
        describe(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    with pytest.raises(UnsupportedModelError, match=r"ResNet \(torchvision\) is not described"):
        describe(torchvision.models.resnet18())
