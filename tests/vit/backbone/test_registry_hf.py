"""The registry's transformers-format entries (`dinov2_vits14_hf`, `dinov2_vits14_reg_hf`, `dinov3_vits16_hf`)
through the real loading path, offline: a tiny random-weight transformers model saved in the hub-cache layout
under the entry's own repo id (tests/hub_cache.py), HF_HUB_OFFLINE=1 (the suite's), `load_vit(alias)`: its maps
equal transformers' own eager attention (every layer, head, prefix and patch queries, within 1e-4 of each
row's peak); the same weights loaded as the timm entry of the family give the same maps; the family's
crop/resize/auto rules apply; uncached, the entry is "not on this server" and still a registry choice."""

from __future__ import annotations

import numpy as np
import pytest
from huggingface_hub import constants
from PIL import Image

from attention.vit.backbone import describe, formats
from attention.vit.engine.extract import attention_maps
from attention.vit.models import sources
from attention.vit.models.loader import check_allowed, load_vit
from attention.vit.models.registry import FAMILIES, REGISTRY
from tests.hub_cache import temporary_hf_home
from tests.vit.backbone.test_formats import hf_dinov2, timm_tiny
from tests.vit.backbone.test_load import saved
from tests.vit.backbone_oracle import assert_rows_match, hf_oracle, hf_tiny, input_of

pytest.importorskip("transformers")
HF_ENTRIES = {"dinov2_vits14_hf": "dinov2_vits14", "dinov2_vits14_reg_hf": "dinov2_vits14_reg"}


def image(h: int, w: int) -> Image.Image:
    return Image.fromarray((np.random.default_rng(5).random((h, w, 3)) * 255).astype(np.uint8))


def test_entries_name_their_repos_and_families():
    assert REGISTRY["dinov2_vits14_hf"].hub_id == "facebook/dinov2-small"
    assert REGISTRY["dinov2_vits14_reg_hf"].hub_id == "facebook/dinov2-with-registers-small"
    assert REGISTRY["dinov3_vits16_hf"].hub_id == "facebook/dinov3-vits16-pretrain-lvd1689m"
    for hf, timm_alias in HF_ENTRIES.items() | {("dinov3_vits16_hf", "dinov3_vits16")}:
        a, b = REGISTRY[hf], REGISTRY[timm_alias]
        assert (a.family, a.resolution, a.crop, a.pos_embed) == (b.family, b.resolution, b.crop, b.pos_embed)
        assert sources.hub_id(hf) == a.hub_id and a.timm_name == f"hf:{a.hub_id}"


def test_uncached_entries_are_not_on_this_server_but_stay_registry_choices(tmp_path):
    from attention.ui.common import model_choices

    assert constants.HF_HUB_OFFLINE  # the suite's: no download is tried
    with temporary_hf_home(tmp_path / "home"):
        for alias in (*HF_ENTRIES, "dinov3_vits16_hf"):
            assert not sources.is_cached(alias) and not sources.available(alias)
            assert model_choices.UNAVAILABLE in model_choices.label(alias)
            assert check_allowed(alias, allow_downloads=False) == alias  # a registry name: the allow-list takes it
        assert {a for _, a in model_choices.choices()} >= {*HF_ENTRIES, "dinov3_vits16_hf"}


@pytest.mark.parametrize("registers", [0, 4])
def test_dinov2_entry_loads_offline_with_transformers_own_maps(registers, tmp_path):
    alias = "dinov2_vits14_reg_hf" if registers else "dinov2_vits14_hf"
    src = hf_dinov2(registers)
    with temporary_hf_home(tmp_path / "home") as add:
        add(REGISTRY[alias].hub_id, saved(src, tmp_path))
        assert sources.is_cached(alias) and check_allowed(alias, allow_downloads=False) == alias
        model = load_vit(alias, device="cpu")
        bb = describe(model)
        assert bb.library == "transformers" and len(bb.prefix) == 1 + registers
        rule = FAMILIES[REGISTRY[alias].family]
        assert (bb.crop, bb.resize, bb.default_resolution) == (rule.crop, rule.resize, 480)
        res = attention_maps(model, image(45, 31), resolution="native")  # cropped top-left to 42 x 28
        assert res.image.size == (28, 42)
        x = input_of(res, bb)
        assert_rows_match(model, x, hf_oracle(src, x), prefix=1 + registers)


def test_dinov2_weights_give_the_same_maps_as_the_hf_entry_and_the_timm_entry(tmp_path, monkeypatch):
    hf = hf_dinov2(0)
    tm = timm_tiny("vit_small_patch14_dinov2", patch_size=14, init_values=1.0)
    tensors, _ = formats.convert(formats._from_hf(hf.state_dict(), ""), tm)  # transformers' names -> timm's
    tm.load_state_dict(tensors, strict=True)
    real = sources.load_hub
    monkeypatch.setattr(sources, "load_hub", lambda n: tm if n == REGISTRY["dinov2_vits14"].timm_name else real(n))
    with temporary_hf_home(tmp_path / "home") as add:
        add("facebook/dinov2-small", saved(hf, tmp_path))
        a, b = load_vit("dinov2_vits14_hf", device="cpu"), load_vit("dinov2_vits14", device="cpu")
        ba, bb = describe(a), describe(b)
        assert (ba.library, bb.library) == ("transformers", "timm")
        assert (ba.crop, ba.resize, ba.default_resolution, ba.mean, ba.std) == (
            bb.crop,
            bb.resize,
            bb.default_resolution,
            bb.mean,
            bb.std,
        )
        for query in ("cls", (1, 0)):  # on the trained grid (each library resamples positions its own way)
            ra, rb = (attention_maps(m, image(29, 30), resolution="native", query=query) for m in (a, b))
            assert ra.image.size == rb.image.size == (28, 28)
            peak = np.abs(rb.weights).max(-1, keepdims=True)
            np.testing.assert_array_less(np.abs(ra.weights - rb.weights) / peak, 1e-4)


def test_dinov3_entry_loads_offline_resized_as_its_family(tmp_path):
    src = hf_tiny("DINOv3ViTModel", 2, image_size=32, patch_size=16, num_register_tokens=4)
    alias = "dinov3_vits16_hf"
    with temporary_hf_home(tmp_path / "home") as add:
        add(REGISTRY[alias].hub_id, saved(src, tmp_path))
        model = load_vit(alias, device="cpu")
        bb = describe(model)
        assert (bb.crop, bb.resize, bb.default_resolution) == ("resize", "bilinear", 768)
        res = attention_maps(model, image(40, 70), resolution=32)  # 32 px high, whole patches wide: no crop
        assert res.image.size == (48, 32)
        x = input_of(res, bb)
        assert_rows_match(model, x, hf_oracle(src, x), prefix=5)
