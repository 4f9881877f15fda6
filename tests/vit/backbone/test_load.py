"""Loading by name through transformers' and open_clip's own loaders (`hf:` and `open_clip:` names),
offline, from tiny random repos laid out in the Hugging Face cache (tests/hub_cache.py): the loaded
model's maps equal the library's own attention of the same weights."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from attention.errors import ModelLoadError
from attention.vit.backbone import describe
from attention.vit.engine.extract import attention_maps
from attention.vit.models.loader import check_allowed, load_vit
from attention.vit.models.sources import resolve
from tests.hub_cache import temporary_hf_home
from tests.vit.backbone_oracle import SMALL, hf_oracle, hf_tiny, input_of, peak

T = pytest.importorskip("transformers")
open_clip = pytest.importorskip("open_clip")


def saved(model, tmp_path, extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    out = tmp_path / "saved"
    model.save_pretrained(out)
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    return files | (extra or {})


def image() -> Image.Image:
    return Image.fromarray((np.random.default_rng(3).random((56, 84, 3)) * 255).astype(np.uint8))


def eager_row(model, x, i):
    """transformers' own attention of the same weights: rows of token i, (L, H, N)."""
    return torch.stack([a[0, :, i] for a in hf_oracle(model, x)]).numpy()


def test_hf_name_loads_a_transformers_dinov2_repo_offline(tmp_path):
    src = hf_tiny("Dinov2WithRegistersModel", 0, num_hidden_layers=2, image_size=28, patch_size=14)
    proc = json.dumps({"image_mean": [0.4, 0.4, 0.4], "image_std": [0.3, 0.3, 0.3]}).encode()
    with temporary_hf_home(tmp_path / "home") as add:
        add("tiny/dinov2-with-registers", saved(src, tmp_path, {"preprocessor_config.json": proc}))
        assert resolve("hf:tiny/dinov2-with-registers") == ("hf:tiny/dinov2-with-registers", None)
        assert check_allowed("hf:tiny/dinov2-with-registers", allow_downloads=False)  # cached: a visitor may use it
        model = load_vit("hf:tiny/dinov2-with-registers", device="cpu")
        bb = describe(model)
        assert bb.library == "transformers" and bb.prefix == ("cls", "reg0", "reg1", "reg2", "reg3")
        assert bb.mean == (0.4, 0.4, 0.4) and (bb.crop, bb.default_resolution) == ("top-left", 480)
        res = attention_maps(model, image(), resolution="native")
        np.testing.assert_allclose(res.weights, eager_row(src, input_of(res, bb), 0), atol=1e-4)
        with pytest.raises(ModelLoadError, match="tiny/absent"):
            load_vit("hf:tiny/absent", device="cpu")


def test_hf_name_of_a_clip_repo_gives_its_vision_tower(tmp_path):
    text = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    vision = SMALL | dict(num_hidden_layers=2, image_size=32, patch_size=16)
    torch.manual_seed(1)
    src = T.CLIPModel(T.CLIPConfig(text_config=text, vision_config=vision, projection_dim=8)).eval()
    peak(src)
    with temporary_hf_home(tmp_path / "home") as add:
        add("tiny/clip", saved(src, tmp_path))
        model = load_vit("hf:tiny/clip", device="cpu")
        assert type(model).__name__ == "CLIPVisionModel"
        bb = describe(model)
        res = attention_maps(model, image(), resolution=32, query=(0, 1))
        vis = T.CLIPVisionModel.from_pretrained("tiny/clip").eval()
        np.testing.assert_allclose(res.weights, eager_row(vis, input_of(res, bb), 2), atol=1e-4)


def test_open_clip_name_loads_a_hub_repo_offline_and_serves_its_visual_tower(tmp_path):
    from safetensors.torch import save

    model_cfg = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "patch_size": 8, "head_width": 8},
        "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 16, "heads": 2, "layers": 1},
    }
    torch.manual_seed(2)
    from open_clip.model import CLIP

    src = CLIP(**model_cfg).eval()
    peak(src)
    files = {
        "open_clip_config.json": json.dumps({"model_cfg": model_cfg, "preprocess_cfg": {}}).encode(),
        "open_clip_model.safetensors": save({k: v.contiguous() for k, v in src.state_dict().items()}),
    }
    with temporary_hf_home(tmp_path / "home") as add:
        add("tiny/open-clip", files)
        model = load_vit("open_clip:hf-hub:tiny/open-clip", device="cpu")
        bb = describe(model)
        # open_clip: names load with their text tower (`text.load`), the native tower rebuilt as the timm ViT
        # it is (timm's own converter): the maps must still be open_clip's own attention (below)
        assert bb.library == "timm"
        # its trained size, square: open_clip's own tower takes only that (the rebuilt timm tower would interpolate)
        res = attention_maps(model, image().resize((32, 32)), resolution=32)
        x = input_of(res, bb)
        seen = []

        def grab(mod, args, kwargs):
            _, w = torch.nn.MultiheadAttention.forward(mod, *args[:3], need_weights=True, average_attn_weights=False)
            seen.append(w[0, :, 0])

        hooks = [b.attn.register_forward_pre_hook(grab, with_kwargs=True) for b in src.visual.transformer.resblocks]
        with torch.no_grad():
            src.visual(x)
        for h in hooks:
            h.remove()
        np.testing.assert_allclose(res.weights, torch.stack(seen).numpy(), atol=1e-4)


def test_malformed_names_are_refused():
    for bad in ("hf:", "hf:../x"):
        with pytest.raises(ModelLoadError, match="accepted: 'hf:org/repo'"):
            resolve(bad)
    for bad in ("open_clip:", "open_clip:a b"):
        with pytest.raises(ModelLoadError, match="accepted: 'open_clip:hf-hub:org/repo'"):
            resolve(bad)
