"""transformers vision encoders through the engine, against transformers' own attention: the
`output_attentions=True` matrices of the same weights under attn_implementation="eager", every
layer, head, prefix and patch query, square and non-square inputs, for models run under "sdpa"
(read at the fused kernel) and "eager" (read at the explicit softmax)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attention.errors import UnsupportedModelError
from attention.vit.backbone import describe
from attention.vit.extract import attention_maps
from attention.vit.rows import run_pass
from tests.vit.backbone_oracle import SMALL, assert_rows_match, hf_oracle, hf_tiny

T = pytest.importorskip("transformers")

MODELS = {  # transformers' class: its config's size and the prefix tokens the engine must name
    "Dinov2Model": (dict(image_size=28, patch_size=14), ("cls",)),
    "Dinov2WithRegistersModel": (
        dict(image_size=28, patch_size=14, num_register_tokens=4),
        ("cls", "reg0", "reg1", "reg2", "reg3"),
    ),
    "DINOv3ViTModel": (dict(image_size=32, patch_size=16, num_register_tokens=4), None),
    "ViTModel": (dict(image_size=32, patch_size=16), ("cls",)),
    "DeiTModel": (dict(image_size=32, patch_size=16), ("cls", "dist")),
    "CLIPVisionModel": (dict(image_size=32, patch_size=16), ("cls",)),
    "SiglipVisionModel": (dict(image_size=32, patch_size=16), ()),
}


def build(cls: str, impl: str, seed: int = 0) -> torch.nn.Module:
    model = hf_tiny(cls, seed, **MODELS[cls][0])
    model.set_attn_implementation(impl)
    return model


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("cls", list(MODELS))
def test_every_layer_head_and_query_is_transformers_own_attention(cls, impl):
    model = build(cls, impl)
    bb = describe(model)
    p = bb.patch_size
    want = MODELS[cls][1]
    if want is not None:
        assert bb.prefix == want
    for gh, gw in ((2, 2), (3, 2)):  # square and non-square grids
        x = torch.randn(2, 3, gh * p, gw * p)
        ref = hf_oracle(model, x)
        assert ref[0].shape[-1] == bb.num_prefix_tokens + gh * gw
        assert_rows_match(model, x, ref, bb.num_prefix_tokens)
    assert model.config._attn_implementation == impl  # the caller's model is left as it was


def test_dinov3_prefix_is_cls_then_registers():
    assert describe(build("DINOv3ViTModel", "sdpa")).prefix == ("cls", "reg0", "reg1", "reg2", "reg3")


def test_siglip_pool_query_is_its_multihead_attention_weights():
    model = build("SiglipVisionModel", "sdpa")
    assert describe(model).pool
    x = torch.randn(1, 3, 48, 32)
    with torch.inference_mode():
        rec = run_pass(model, x, 0, keep_qk=False, pool=True)
        h = model(pixel_values=x, interpolate_pos_encoding=True).last_hidden_state
        head = model.head
        _, w = head.attention(
            head.probe.expand(1, -1, -1), h, h, need_weights=True, average_attn_weights=False
        )  # (1, H, 1, N): nn.MultiheadAttention's own weights
    ours = torch.softmax(rec.pool[0].float(), -1)  # (1, H, N)
    ref = w[:, :, 0]
    assert float(((ours - ref).abs().amax(-1) / ref.amax(-1)).max()) < 1e-4


@pytest.mark.parametrize("cls", ["Dinov2WithRegistersModel", "DeiTModel", "SiglipVisionModel"])
def test_attention_maps_on_the_model_object(cls):
    model = build(cls, "sdpa")
    bb = describe(model)
    img = Image.fromarray((np.random.default_rng(0).random((40, 72, 3)) * 255).astype(np.uint8))
    res = attention_maps(model, img, resolution="native", keep_qk=True, query=(0, 1))
    gh, gw = 40 // bb.patch_size, 72 // bb.patch_size
    assert res.grid == (gh, gw) and res.layers.shape == (3, 4, gh, gw)
    assert res.tokens == bb.prefix
    x = torch.from_numpy(
        (np.asarray(res.image, np.float32) / 255 - np.array(bb.mean, np.float32)) / np.array(bb.std, np.float32)
    ).permute(2, 0, 1)[None]
    ref = hf_oracle(model, x)
    i = res.query_index
    assert i == bb.num_prefix_tokens + 1
    for layer in range(3):
        np.testing.assert_allclose(res.weights[layer], ref[layer][0, :, i].numpy(), atol=1e-4)
    for q in [*bb.prefix, (1, 2)]:  # every named token and another patch, from the kept q and k
        again = res.requery(q)
        j = again.query_index
        np.testing.assert_allclose(again.weights[-1], ref[-1][0, :, j].numpy(), atol=1e-4)


def test_an_undescribed_transformers_class_is_refused_by_name():
    model = T.BertModel(T.BertConfig(**SMALL))
    with pytest.raises(UnsupportedModelError, match=r"BertModel \(transformers\) is not described; described: Dinov2"):
        describe(model)
