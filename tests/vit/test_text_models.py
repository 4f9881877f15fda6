"""Models with a text tower through the real loading path: open_clip repos in the Hugging Face cache layout
(tests/hub_cache.py) under HF_HUB_OFFLINE=1, tiny random weights; the registry; the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from attention.errors import ModelLoadError, NoTextTowerError, UnsupportedModelError
from attention.vit.models.loader import REGISTRY, load_vit
from attention.vit.text import has_text_tower, text_relevance
from tests.hub_cache import safetensors_bytes, temporary_hf_home
from tests.vit.test_text_relevance import tiny

TEXT = dict(context_length=16, vocab_size=49408, width=32, heads=2, layers=1)
CONFIGS = {
    "clip": dict(
        embed_dim=32,
        vision_cfg=dict(timm_model_name="test_vit", timm_pool="token", timm_proj="linear", image_size=64),
        text_cfg=TEXT,
    ),
    "siglip": dict(
        embed_dim=64,
        vision_cfg=dict(timm_model_name="test_vit", timm_pool="map", timm_proj="none", image_size=64),
        text_cfg=TEXT,
        init_logit_bias=-10.0,
    ),
}
PREPROCESS = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bicubic", "resize_mode": "squash"}


def _add(add, repo: str, kind: str):
    ref = tiny(kind, seed=3)
    files = {
        "open_clip_config.json": json.dumps({"model_cfg": CONFIGS[kind], "preprocess_cfg": PREPROCESS}).encode(),
        "open_clip_model.safetensors": safetensors_bytes(ref),
    }
    add(repo, files)
    return ref


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_an_open_clip_repo_loads_offline_with_its_weights_and_tokenizer(tmp_path, kind):
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 80, 3), dtype=np.uint8))
    with temporary_hf_home(tmp_path) as add:
        ref = _add(add, f"testorg/tiny-{kind}", kind)
        vit = load_vit(f"open_clip:hf-hub:testorg/tiny-{kind}", device="cpu")
        assert has_text_tower(vit) and vit.pretrained_cfg["mean"] == (0.5, 0.5, 0.5)
        clip = vit.text_model
        for (k, a), b in zip(clip.state_dict().items(), ref.state_dict().values()):
            assert torch.equal(a, b), k
        tr = text_relevance(vit, img, "a cat, a dog", resolution="native")
        ref.visual.preprocess_cfg = PREPROCESS  # as open_clip sets it from the repo's preprocess_cfg
        ours = text_relevance(ref, img, "a cat, a dog", resolution="native")
        assert tr.grid == (4, 5) and tr.kind == ("siglip" if kind == "siglip" else "clip")
        for rule in ("chefer", "legrad", "similarity"):
            np.testing.assert_allclose(tr.maps(rule), ours.maps(rule), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(tr.logits, ours.logits, rtol=1e-5)


def test_a_missing_open_clip_repo_is_a_load_error_naming_the_fix(tmp_path):
    with temporary_hf_home(tmp_path):
        with pytest.raises(ModelLoadError, match="open_clip_config.json and the open_clip weights"):
            load_vit("open_clip:hf-hub:testorg/absent", device="cpu")
        with pytest.raises(ModelLoadError, match="accepted: 'open_clip:hf-hub:org/repo'"):
            load_vit("open_clip:ViT-B-16", device="cpu")


def test_an_open_clip_tower_the_engine_cannot_read_is_refused_by_type():
    import open_clip

    coca_like = open_clip.CLIP(
        embed_dim=32,
        vision_cfg=dict(image_size=32, patch_size=16, width=32, layers=1, head_width=16, pool_type="avg"),
        text_cfg=TEXT,
    )
    with pytest.raises(UnsupportedModelError, match="it pools by 'avg'"):
        text_relevance(coca_like, Image.new("RGB", (32, 32)), "a cat")


def test_the_registry_names_the_text_models():
    text = [s.alias for s in REGISTRY.values() if s.text]
    assert {"digit_clip", "siglip2_vitb16", "clip_vitb16"} <= set(text)
    assert REGISTRY["siglip2_vitb16"].hub_id == "timm/ViT-B-16-SigLIP2"
    with pytest.raises(NoTextTowerError, match="digit_clip, siglip2_vitb16, clip_vitb16"):
        text_relevance(load_vit("mnist_vit", device="cpu"), Image.new("RGB", (28, 28)), "a seven")


@pytest.mark.parametrize("quick_gelu", [False, True])
def test_a_native_open_clip_tower_is_read_as_the_timm_vit_it_is(quick_gelu):
    """open_clip's own VisionTransformer (OpenAI/LAION CLIP) rebuilt as timm's: the same image embedding,
    and both rules equal the full-matrix reference on it."""
    import open_clip

    from attention.vit.text.compute import encode_prompts, text_relevance_rows
    from attention.vit.text.tower import ready
    from tests.vit import text_reference as ref
    from tests.vit.test_text_relevance import PROMPTS, _peak_close

    torch.manual_seed(0)
    vision = dict(image_size=64, patch_size=16, width=64, layers=2, head_width=16)
    clip = open_clip.CLIP(embed_dim=32, vision_cfg=vision, text_cfg=TEXT, quick_gelu=quick_gelu).eval()
    x = torch.randn(1, 3, 48, 80)
    with torch.no_grad():
        x64 = torch.randn(1, 3, 64, 64)
        native = clip.encode_image(x64)
        tower = ready(clip)
        assert type(tower.trunk).__name__ == "VisionTransformer" and tower.pool == "token"
        torch.testing.assert_close(clip.encode_image(x64), native, rtol=1e-5, atol=1e-5)
    text = encode_prompts(clip, PROMPTS)
    logits, chefer, legrad, _ = text_relevance_rows(clip, tower, x, text)
    for p in range(len(PROMPTS)):
        row, s = ref.chefer(clip, x, text[p])
        _peak_close(chefer[p, 1:], row[1:])
        _peak_close(legrad[p, 1:], ref.legrad(clip, x, text[p], 2))
