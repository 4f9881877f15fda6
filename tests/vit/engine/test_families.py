"""Spec of the engine on every ViT family people explore: each family's rows equal timm's OWN unfused
attention (the same module with fused_attn = False, its softmax captured as timm computes it) with the
same random weights made peaked, every layer, head and token, square and non-square, within 1e-4 of
each row's peak; through `attention_maps(model, ...)` and through `load_vit(name)` from a hub cache.
Families the engine cannot read are refused with a typed error naming the block class."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention.errors import InputError, UnsupportedModelError
from attention.images import load_image, to_tensor
from attention.vit.engine import rows
from attention.vit.engine.extract import attention_maps
from attention.vit.engine.query import tokens_of
from attention.vit.models.loader import load_vit
from attention.vit.models.sources import is_cached
from bench import compat
from tests.hub_cache import safetensors_bytes, temporary_hf_home

FAMILIES = {
    "plain": "vit_small_patch16_224",
    "clip": "vit_base_patch16_clip_224",
    "deit_distilled": "deit_tiny_distilled_patch16_224",
    "dinov2_reg": "vit_small_patch14_reg4_dinov2",
    "dinov3": "vit_small_patch16_dinov3",
    "eva02": "eva02_tiny_patch14_224",
    "rope_vit": "vit_small_patch16_rope_224",
    "relpos": "vit_relpos_small_patch16_224",
    "beit": "beit_base_patch16_224",
    "siglip": "vit_base_patch16_siglip_224",
    "gap": "vit_medium_patch16_gap_256",
    "flexivit": "flexivit_small",
}
TOKENS = {
    "plain": ["cls"],
    "clip": ["cls"],
    "deit_distilled": ["cls", "dist"],
    "dinov2_reg": ["cls", "reg0", "reg1", "reg2", "reg3"],
    "dinov3": ["cls", "reg0", "reg1", "reg2", "reg3"],
    "eva02": ["cls"],
    "rope_vit": ["cls"],
    "relpos": [],  # vit_relpos_small: global average pool, no class token
    "beit": ["cls"],
    "siglip": ["pool"],
    "gap": [],
    "flexivit": ["cls"],
}


def worst(ours: np.ndarray, ref: torch.Tensor) -> float:
    """max over rows of |ours - ref| / the row's peak. ours, ref: (..., N)."""
    r = ref.numpy()
    return float((np.abs(ours - r).max(-1) / r.max(-1)).max())


@pytest.mark.slow
@pytest.mark.parametrize("fam", FAMILIES)
def test_every_layer_head_and_token_equals_timms_unfused_attention(fam):
    v = compat.check(FAMILIES[fam])  # square (3x3 patches) and non-square (4x3), every token as the query
    assert v.exact and v.figure is not None and v.figure <= 1e-4, (v.figure, v.why)


@pytest.mark.slow
@pytest.mark.parametrize("fam", FAMILIES)
def test_object_path_and_load_vit_give_timms_rows_for_the_models_tokens(fam, tmp_path):
    name = FAMILIES[fam]
    model = compat.tiny(name)
    p = model.patch_embed.patch_size[0]
    h, w = 4 * p, 3 * p  # non-square, as 224 x 160
    if getattr(model.patch_embed, "strict_img_size", False):
        model = compat.tiny(name, (h, w))
    assert tokens_of(model) == TOKENS[fam]
    img = (np.random.default_rng(0).random((h, w, 3)) * 255).astype(np.uint8)
    cfg = model.pretrained_cfg
    x, _ = to_tensor(load_image(img), patch_size=p, mean=cfg["mean"], std=cfg["std"], resolution=None)
    P, L = model.num_prefix_tokens, len(model.blocks)
    config = {
        "architecture": name.split(".")[0],
        "num_classes": 0,
        "model_args": dict(compat.TINY),
        "pretrained_cfg": {"mean": list(cfg["mean"]), "std": list(cfg["std"]), "num_classes": 0},
    }
    if getattr(model.patch_embed, "strict_img_size", False):
        config["model_args"]["img_size"] = [h, w]
    with temporary_hf_home(tmp_path / "hf") as add:
        add(
            f"testorg/fam-{fam}",
            {"config.json": json.dumps(config).encode(), "model.safetensors": safetensors_bytes(model)},
        )
        loaded = load_vit(f"hf-hub:testorg/fam-{fam}", device="cpu")
        for m in (model, loaded):  # the loaded one with its family's rules (DINOv2's pos-embed resampling)
            ref = compat.timm_attention(m, x)
            for q in [*TOKENS[fam], (1, 2)]:
                res = attention_maps(m, img, query=q, resolution="native" if fam not in ("relpos", "beit") else "auto")
                assert res.grid == (4, 3)
                if q == "pool":
                    assert worst(res.weights[0, :, -ref[-1].shape[-1] :], ref[-1][0, :, 0]) <= 1e-4
                    continue
                i = TOKENS[fam].index(q) if isinstance(q, str) else P + q[0] * 3 + q[1]
                assert res.weights.shape == (L, 4, P + 12)
                assert worst(res.weights, torch.stack([r[0, :, i] for r in ref[:L]])) <= 1e-4


def test_the_oracle_catches_an_engine_that_drops_the_position_bias(monkeypatch):
    """The check can fail: rows without the kernel's additive bias (relpos) are far from timm's."""
    model = compat.tiny("vit_relpos_small_patch16_224", (48, 48))
    x = torch.randn(1, 3, 48, 48)
    assert compat.deviation(model, x) <= 1e-4
    scores = rows.batch_scores
    monkeypatch.setattr(rows, "batch_scores", lambda q, k, i, s, m: scores(q, k, i, s, None))
    assert compat.deviation(model, x) > 1e-2


@pytest.mark.parametrize(
    "name, has",
    [
        ("vit_medium_patch16_gap_256", "it has no named tokens, only patches"),
        ("vit_medium_patch16_reg4_gap_256", "it has reg0, reg1, reg2, reg3 and patches"),
        ("vit_base_patch16_siglip_224", "it has pool and patches"),
    ],
)
def test_cls_on_a_model_without_one_is_refused_naming_what_it_has(name, has):
    model = compat.tiny(name)
    img = np.zeros((48, 48, 3), np.uint8)
    with pytest.raises(InputError, match=f"This model has no 'cls' token; {has}"):
        attention_maps(model, img, query="cls", resolution="native")
    res = attention_maps(model, img, resolution="native")  # no query: the model's own
    assert res.query == ("pool" if "siglip" in name else (1, 1))


def test_diff_attention_and_parallel_blocks_are_refused_by_load_vit_and_attention_maps(tmp_path):
    model = compat.tiny("vit_dwee_patch16_reg1_gap_256")
    with pytest.raises(UnsupportedModelError, match="DiffAttention blocks are not supported"):
        attention_maps(model, np.zeros((32, 32, 3), np.uint8))
    config = {
        "architecture": "vit_dwee_patch16_reg1_gap_256",
        "num_classes": 0,
        "model_args": compat.TINY,
        "pretrained_cfg": {"num_classes": 0},
    }
    with temporary_hf_home(tmp_path / "hf") as add:
        add("testorg/dwee", {"config.json": json.dumps(config).encode(), "model.safetensors": safetensors_bytes(model)})
        with pytest.raises(UnsupportedModelError, match="DiffAttention blocks are not supported"):
            load_vit("hf-hub:testorg/dwee", device="cpu")


def test_names_without_hub_weights_are_not_cached_rather_than_a_crash():
    assert is_cached("vit_dwee_patch16_reg1_gap_256") is False


def test_a_pass_of_a_model_that_pools_by_attention_serves_the_pool_and_every_patch():
    from attention.vit.serve.passes import Pass

    model = compat.tiny("vit_base_patch16_siglip_224")
    img = (np.random.default_rng(1).random((64, 48, 3)) * 255).astype(np.uint8)
    p = Pass(("k", "siglip", "native"), "siglip", attention_maps(model, img, resolution="native", keep_qk=True), "cpu")
    assert p.num_layers == 2 and p.query_tokens == ["pool"] and p.default_query == "pool"
    pool = p.at(None, 1)
    assert pool.query == "pool" and pool.weights.shape == (1, 4, 12)  # one attention, after the last layer
    np.testing.assert_allclose(pool.weights, attention_maps(model, img, query="pool", resolution="native").weights)
    patch = p.at((1, 2), 1)
    fresh = attention_maps(model, img, query=(1, 2), resolution="native")
    assert patch.layer == 1 and patch.weights.shape == (2, 4, 12)
    np.testing.assert_allclose(patch.weights, fresh.weights, atol=1e-6)
    assert p.rollout((1, 2), 1).shape == (4, 3)
    with pytest.raises(InputError, match="pooling head's query"):
        p.rollout("pool")
    with pytest.raises(InputError, match="no 'cls' token; it has pool and patches"):
        p.at("cls")


def test_requery_and_rollout_keep_the_relative_position_bias():
    """A new query and rollout from the kept q, k and bias equal timm's own attention matrices."""
    from attention.vit.engine.flow import rollout

    model = compat.tiny("beit_base_patch16_224", (48, 32))
    img = (np.random.default_rng(2).random((48, 32, 3)) * 255).astype(np.uint8)
    res = attention_maps(model, img, keep_qk=True)
    assert res.bias is not None and all(b is not None for b in res.bias)
    cfg = model.pretrained_cfg
    x, _ = to_tensor(load_image(img), patch_size=16, mean=cfg["mean"], std=cfg["std"], resolution=None)
    ref = [a[0] for a in compat.timm_attention(model, x)]  # (H, N, N) per layer
    i = 1 + 2 * 2 + 1  # patch (2, 1)
    assert worst(res.requery((2, 1)).weights, torch.stack([a[:, i] for a in ref])) <= 1e-4
    r = torch.zeros(ref[0].shape[-1], dtype=torch.float64)
    r[i] = 1.0
    for a in reversed(ref):  # dense rollout from timm's matrices: (mean of heads + I), rows renormalised
        m = a.double().mean(0) + torch.eye(a.shape[-1], dtype=torch.float64)
        r = r @ (m / m.sum(-1, keepdim=True))
    np.testing.assert_allclose(rollout(res, query=(2, 1)), r.float().numpy(), atol=1e-5)
