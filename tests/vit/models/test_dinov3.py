"""Spec of DINOv3 in the explorer: its registry entries, its loading through the real timm +
huggingface-hub path (a tiny DINOv3 in the Hub cache's layout, HF_HUB_OFFLINE=1), its preprocessing
(the notebooks' resize, no crop, 768 px high), and every view running on it. Exactness of its maps
is the extraction engine's to prove (RoPE is applied inside the attention block); these tests check
loading, sizes and shapes, and that nothing refuses or crashes."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from attention.vit.engine import features
from attention.vit.models import posembed
from attention.vit.models.loader import default_resolution, load_vit
from attention.vit.models.registry import FAMILIES, REGISTRY, family_of
from tests.hub_cache import DINOV3_REPO, add_tiny_dinov3, temporary_hf_home

DINOV3 = {"dinov3_vits16": (384, 6), "dinov3_vits16plus": (384, 6), "dinov3_vitb16": (768, 12)}  # width, heads


@pytest.mark.parametrize("alias", list(DINOV3))
def test_registry_offers_dinov3_s_splus_and_b_with_four_registers_and_rope(alias):
    spec = REGISTRY[alias]
    assert spec.family == "dinov3" and family_of(spec.timm_name) == "dinov3" and spec.resolution == 768
    assert spec.hub_id == f"timm/{spec.timm_name}" and spec.timm_name.endswith("_dinov3.lvd1689m")
    with torch.device("meta"):  # the architecture only: no memory, no weights
        m = timm.create_model(spec.timm_name, pretrained=False, num_classes=0)
    assert type(m).__name__ == "Eva" and m.pos_embed is None and m.rope is not None
    assert (m.reg_token.shape[1], m.num_prefix_tokens, m.patch_embed.patch_size) == (4, 5, (16, 16))
    assert (m.embed_dim, m.blocks[0].attn.num_heads) == DINOV3[alias]
    assert timm.models.get_pretrained_cfg(spec.timm_name).license == "dinov3-license"


def test_the_dinov3_family_resizes_without_cropping_and_resamples_nothing():
    assert FAMILIES["dinov3"] == FAMILIES[REGISTRY["dinov3_vits16"].family]
    assert (FAMILIES["dinov3"].crop, FAMILIES["dinov3"].pos_embed, FAMILIES["dinov3"].resolution) == (
        "resize",
        "rope",
        768,
    )


@pytest.fixture(scope="module")
def dinov3(tmp_path_factory):
    """(model loaded through load_vit from a hub-cache fixture, the reference model whose weights it holds)."""
    with temporary_hf_home(tmp_path_factory.mktemp("hf_home")) as add:
        ref = add_tiny_dinov3(add)
        yield load_vit(f"hf-hub:{DINOV3_REPO}", device="cpu"), ref


def test_a_dinov3_in_the_hub_cache_loads_offline_with_its_familys_rules(dinov3):
    model, ref = dinov3
    assert type(model).__name__ == "Eva" and not model.training
    assert (model.crop_rule, model.pos_embed_rule, default_resolution(model)) == ("resize", "rope", 768)
    for k, v in ref.state_dict().items():  # the cached weights, not a random init
        torch.testing.assert_close(model.state_dict()[k], v)
    x = torch.randn(1, 3, 48, 80)  # any grid: rotary positions are made for it, nothing resampled
    torch.testing.assert_close(model.forward_features(x), ref.forward_features(x))


def test_rope_rule_refuses_a_model_with_absolute_position_embeddings():
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0, depth=1)
    with pytest.raises(Exception, match="rotary embeddings only"):
        posembed.install(vit, "rope")


def photo(w: int, h: int) -> Image.Image:
    return Image.fromarray((np.random.default_rng(w * h).random((h, w, 3)) * 255).astype(np.uint8))


@pytest.mark.parametrize("size, grid", [((500, 375), (48, 64)), ((375, 500), (48, 36)), ((300, 300), (48, 48))])
def test_auto_resolution_is_the_notebooks_768_px_high_whole_image(dinov3, size, grid):
    from attention.vit.engine.extract import attention_maps

    res = attention_maps(dinov3[0], photo(*size), resolution="auto")
    assert res.grid == grid and res.image.size == (grid[1] * 16, grid[0] * 16)
    assert res.num_prefix_tokens == 5 and res.weights.shape == (2, 2, 5 + grid[0] * grid[1])
    np.testing.assert_allclose(res.weights.sum(-1), 1, atol=1e-5)


def test_every_view_runs_on_a_dinov3(dinov3, tmp_path, monkeypatch):
    """Views, rollout, masks, the model view, feature views (both PCA styles), the compare panel's
    mapping and a permalink to the model: each runs and gives the shapes of the DINOv3's grid."""
    from attention.vit.draw import frames, views
    from attention.vit.draw.feature_views import feature_pictures, write_feature_outputs
    from attention.vit.draw.modelview import model_view
    from attention.vit.serve import passes, permalink

    monkeypatch.setattr(passes, "load_vit", lambda name, **kw: dinov3[0])  # the fixture's model under its name
    name = f"hf-hub:{DINOV3_REPO}"
    p = passes.get_pass(photo(200, 150), name, 128)  # 8 rows of patches, floor(200 * 128 / (150 * 16)) = 10
    assert p.base.grid == (8, 10) and (p.num_layers, p.num_heads) == (2, 2)
    for view in views.VIEWS:
        f = frames.tab_frame(p, frames.ViewSpec(query=(3, 4), layer=-1, view=view), root=tmp_path)
        assert f.outputs.thumbs and f.res.maps.shape == (2, 8, 10)
    assert p.rollout("cls", -1).shape == (8, 10)
    assert model_view(p, (2, 2)).ndim == 3
    for style in features.PCA_STYLES:
        tiles, maps = feature_pictures(p, "cls", -1, pca_style=style)
        assert maps["pca"].shape == (8, 10, 3) and len(tiles) == 3
    _, npz, facts = write_feature_outputs(p, (1, 1), -1, pca_style="dinov3", root=tmp_path)
    with np.load(npz) as z:
        assert z["foreground"].shape == (8, 10) and z["foreground"].dtype == bool
    assert facts["pca_style"] == "dinov3"
    other = passes.get_pass(photo(200, 150), name, 64)  # the compare panel: the same query on another grid
    assert passes.map_query((3, 4), p.base.grid, other.base.grid) == (1, 2)
    link = permalink.parse({"model": "dinov3_vits16", "layer": "-1", "q": "3,4", "view": "rollout"})
    assert permalink.query_string(link) == "model=dinov3_vits16&layer=-1&view=rollout&q=3,4"


@pytest.mark.slow
def test_the_registry_alias_loads_dinov3_s16_from_timms_hub_repo_offline(tmp_path):
    """`dinov3_vits16` -> timm vit_small_patch16_dinov3.lvd1689m -> hub repo timm/vit_small_patch16_dinov3.lvd1689m:
    full-size random weights in the Hub cache's layout, loaded through the registry with HF_HUB_OFFLINE=1."""
    from attention.vit.models.sources import available, is_cached
    from tests.hub_cache import safetensors_bytes

    torch.manual_seed(3)
    ref = timm.create_model("vit_small_patch16_dinov3", pretrained=False, num_classes=0)
    with temporary_hf_home(tmp_path / "hf") as add:
        assert not available("dinov3_vits16")
        add("timm/vit_small_patch16_dinov3.lvd1689m", {"model.safetensors": safetensors_bytes(ref)})
        assert is_cached("dinov3_vits16") and available("dinov3_vits16")
        model = load_vit("dinov3_vits16", device="cpu")
        torch.testing.assert_close(model.blocks[7].attn.qkv.weight, ref.blocks[7].attn.qkv.weight)
        assert (model.alias, model.crop_rule, model.pos_embed_rule, default_resolution(model)) == (
            "dinov3_vits16",
            "resize",
            "rope",
            768,
        )
