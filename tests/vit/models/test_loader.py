"""Spec of attention.vit.models.loader: the registry, load_vit through the real timm + huggingface-hub
path (offline, from a temporary HF cache in the Hub's layout), caching, and clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import timm
import torch

from attention import mnist
from attention.errors import InputError, ModelLoadError
from attention.vit.models.loader import default_device, default_dtype, default_resolution, load_vit
from attention.vit.models.registry import REGISTRY, family_of
from attention.vit.models.sources import available, is_cached, resolve
from tests.hub_cache import safetensors_bytes, temporary_hf_home

TINY = {  # a timm hub config.json: a 2-layer ViT with patch 8
    "architecture": "vit_tiny_patch16_224",
    "num_classes": 0,
    "model_args": {"embed_dim": 32, "depth": 2, "num_heads": 2, "img_size": 32, "patch_size": 8},
    "pretrained_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25], "input_size": [3, 32, 32], "num_classes": 0},
}


@pytest.fixture
def hub_cache(tmp_path):
    """A fresh HF_HOME; `add(repo, files)` puts files into its hub cache exactly as a download would
    (blobs named by hash, snapshot symlinks, refs/main: `add_to_hub_cache`). HF_HUB_OFFLINE=1 stays set."""
    from huggingface_hub import constants

    home = tmp_path / "hf_home"
    assert constants.HF_HUB_OFFLINE
    with temporary_hf_home(home) as add_files:

        def add(repo: str, files: dict[str, bytes]) -> None:
            snap = add_files(repo, files)
            assert snap.parent.parent == home / "hub" / f"models--{repo.replace('/', '--')}"

        yield add


def test_registry_has_the_documented_aliases():
    assert {
        "dino_vits16",
        "dino_vits8",
        "dino_vitb16",
        "dino_vitb8",
        "dinov2_vits14",
        "dinov2_vits14_reg",
        "mnist_vit",
    } <= set(REGISTRY)
    assert resolve("dino_vits16")[0] == "vit_small_patch16_224.dino"
    assert resolve("dinov2_vits14_reg")[0] == "vit_small_patch14_reg4_dinov2.lvd142m"
    assert resolve("hf-hub:org/repo") == ("hf-hub:org/repo", None)


def test_hf_hub_model_loads_offline_from_the_cache(hub_cache):
    ref = timm.create_model(TINY["architecture"], pretrained=False, num_classes=0, **TINY["model_args"])
    hub_cache(
        "testorg/tiny-vit", {"config.json": json.dumps(TINY).encode(), "model.safetensors": safetensors_bytes(ref)}
    )
    model = load_vit("hf-hub:testorg/tiny-vit", device="cpu")
    assert not model.training and len(model.blocks) == 2
    assert model.pretrained_cfg["std"] == (0.25, 0.25, 0.25) or list(model.pretrained_cfg["std"]) == [0.25] * 3
    for k, v in ref.state_dict().items():  # the cached weights, not a random init
        if k in model.state_dict():
            torch.testing.assert_close(model.state_dict()[k], v)
    assert load_vit("hf-hub:testorg/tiny-vit", device="cpu") is model  # cached: never loads twice
    out = model.forward_features(torch.randn(1, 3, 48, 64))  # any image size (pos-embed interpolated)
    assert out.shape == (1, 1 + 6 * 8, 32)


def test_default_alias_loads_through_timm_tag_offline(hub_cache):
    """`dino_vits16` goes timm `vit_small_patch16_224.dino` -> hub repo timm/vit_small_patch16_224.dino."""
    ref = timm.create_model("vit_small_patch16_224.dino", pretrained=False, num_classes=0)
    hub_cache("timm/vit_small_patch16_224.dino", {"model.safetensors": safetensors_bytes(ref)})
    assert is_cached("dino_vits16") and available("dino_vits16")
    model = load_vit("dino_vits16", device="cpu")
    torch.testing.assert_close(model.blocks[3].attn.qkv.weight, ref.blocks[3].attn.qkv.weight)
    assert default_resolution(model) == 480


def test_empty_cache_offline_gives_a_clear_error(hub_cache):
    assert not available("dino_vits16")
    with pytest.raises(ModelLoadError) as e:
        load_vit("dino_vits16", device="cpu")
    msg = str(e.value)
    assert "timm/vit_small_patch16_224.dino" in msg and "HF_HUB_OFFLINE" in msg
    assert "hf download" in msg and "mnist_vit" in msg


def test_corrupt_cached_weights_give_a_clear_error(hub_cache):
    hub_cache("testorg/broken", {"config.json": json.dumps(TINY).encode(), "model.safetensors": b"not safetensors"})
    with pytest.raises(ModelLoadError, match="testorg/broken"):
        load_vit("hf-hub:testorg/broken", device="cpu")


@pytest.mark.parametrize(
    "name, fragment", [("nope_model", "Unknown model"), ("", "Unknown model"), ("resnet18", "not a plain ViT")]
)
def test_unknown_or_unsupported_names_are_refused_without_network(name, fragment):
    with pytest.raises(ModelLoadError, match=fragment) as e:
        load_vit(name, device="cpu")
    assert "dino_vits16" in str(e.value)  # says what is accepted


def test_device_is_cuda_when_present_else_cpu():
    assert default_device().type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_mnist_vit_ships_and_classifies_heldout_digits():
    model = load_vit("mnist_vit", device="cpu")
    assert default_resolution(model) == 28 and model.patch_embed.patch_size == (4, 4)
    d = mnist.load_subset()
    _, held = mnist.split(len(d))
    x = (torch.from_numpy(d.images[held]).float()[:, None] / 255 - mnist.MEAN) / mnist.STD
    with torch.no_grad():
        acc = (model(x).argmax(-1).numpy() == d.labels[held]).mean()
    assert acc >= 0.95, acc


def test_is_loaded_follows_the_cache_without_loading():
    from attention.vit.models import loader as models

    models.clear_cache()
    assert not models.is_loaded("mnist_vit") and not models.is_loaded("no_such_model")
    load_vit("mnist_vit", device="cpu")
    assert models.is_loaded("mnist_vit")


def test_at_most_max_models_stay_resident_least_recently_used_out_first(hub_cache, monkeypatch):
    import dataclasses

    from attention.vit.models import loader as models

    monkeypatch.setattr(models, "SETTINGS", dataclasses.replace(models.SETTINGS, max_models=2))
    ref = timm.create_model(TINY["architecture"], pretrained=False, num_classes=0, **TINY["model_args"])
    for repo in ("testorg/a", "testorg/b"):
        hub_cache(repo, {"config.json": json.dumps(TINY).encode(), "model.safetensors": safetensors_bytes(ref)})
    a = load_vit("hf-hub:testorg/a", device="cpu")
    load_vit("mnist_vit", device="cpu")
    assert load_vit("hf-hub:testorg/a", device="cpu") is a  # used again: now the most recent
    load_vit("hf-hub:testorg/b", device="cpu")  # a third: mnist_vit, the least recently used, goes
    assert models.is_loaded("hf-hub:testorg/a") and models.is_loaded("hf-hub:testorg/b")
    assert not models.is_loaded("mnist_vit")


def test_a_shared_server_offers_the_registry_and_cached_models_and_downloads_only_when_allowed(hub_cache):
    from attention.vit.models.loader import check_allowed

    assert check_allowed("mnist_vit") == "mnist_vit" and check_allowed(" dino_vits16 ") == "dino_vits16"
    with pytest.raises(ModelLoadError, match="not offered by this server.*ATTENTION_ALLOW_DOWNLOADS=1"):
        check_allowed("hf-hub:someone/big-model", allow_downloads=False)
    assert check_allowed("hf-hub:someone/big-model", allow_downloads=True)
    hub_cache("testorg/tiny-vit", {"config.json": json.dumps(TINY).encode(), "model.safetensors": b"x"})
    assert check_allowed("hf-hub:testorg/tiny-vit", allow_downloads=False)  # already on disk


@pytest.mark.parametrize("name", ["hf-hub:../../etc", "hf-hub:x/y@main", "hf-hub:a b/c", "hf-hub:x//y"])
def test_malformed_hub_ids_are_refused_before_any_lookup(name):
    with pytest.raises(ModelLoadError, match="not a Hugging Face repo id; accepted: 'hf-hub:org/repo'"):
        resolve(name)
    assert not available(name)


def test_each_family_has_its_crop_and_resampling_rule_in_the_registry():
    from attention.vit.models.registry import FAMILIES

    rules = {a: (s.crop, s.pos_embed) for a, s in REGISTRY.items()}
    assert rules["dino_vits16"] == rules["dino_vitb8"] == ("top-left", "dino")
    assert rules["dinov2_vits14"] == ("top-left", "dinov2")
    assert rules["dinov2_vits14_reg"] == ("top-left", "dinov2_reg")
    assert rules["mnist_vit"] == ("center", "timm")
    assert FAMILIES["timm"].crop == "center"
    for spec in REGISTRY.values():  # a registered tag typed in full gets the same family
        if spec.hub_id:
            assert family_of(spec.timm_name) == family_of(f"hf-hub:{spec.hub_id}") == spec.family


@pytest.mark.parametrize(
    "name, family",
    [
        ("vit_small_patch16_224.dino", "dino"),
        ("vit_base_patch8_224_dino", "dino"),
        ("hf-hub:timm/vit_small_patch14_reg4_dinov2.lvd142m", "dinov2_reg"),
        ("vit_large_patch14_dinov2.lvd142m", "dinov2"),
        ("vit_small_patch16_224.augreg_in21k", "timm"),
        ("hf-hub:someone/dinosaur-vit", "timm"),
        ("vit_small_patch16_dinov3.lvd1689m", "dinov3"),
        ("hf-hub:timm/vit_large_patch16_dinov3.lvd1689m", "dinov3"),
    ],
)
def test_family_is_inferred_from_any_timm_name_or_hub_id(name, family):
    assert family_of(name) == family


def test_loaded_models_carry_their_familys_rules(hub_cache):
    cfg = json.dumps(TINY).encode()
    ref = timm.create_model(TINY["architecture"], pretrained=False, num_classes=0, **TINY["model_args"])
    hub_cache("testorg/tiny_reg4_dinov2.test", {"config.json": cfg, "model.safetensors": safetensors_bytes(ref)})
    model = load_vit("hf-hub:testorg/tiny_reg4_dinov2.test", device="cpu")
    assert (model.crop_rule, model.pos_embed_rule, default_resolution(model)) == ("top-left", "dinov2_reg", 480)
    mnist = load_vit("mnist_vit", device="cpu")
    assert (mnist.crop_rule, mnist.pos_embed_rule, default_resolution(mnist)) == ("center", "timm", 28)


def test_gpu_default_precision_is_float16_and_cpu_float32():
    assert default_dtype(torch.device("cuda")) == torch.float16
    assert default_dtype(torch.device("cpu")) == torch.float32


def test_resampled_position_embeddings_are_cached_per_grid_and_refreshed_when_the_weights_change():
    from attention.vit.models import posembed

    torch.manual_seed(0)
    model = timm.create_model(
        TINY["architecture"], pretrained=False, num_classes=0, dynamic_img_size=True, **TINY["model_args"]
    )
    posembed.install(model.eval().requires_grad_(False), "dino")
    a = posembed.pos_embed_for(model, (5, 7))
    assert a.shape == (1, 1 + 35, 32) and posembed.pos_embed_for(model, (5, 7)) is a
    torch.testing.assert_close(a[:, :1], model.pos_embed[:, :1])  # CLS's embedding is never resampled
    assert posembed.pos_embed_for(model, (4, 4)) is model.pos_embed  # the trained grid: as it is
    with torch.no_grad():
        model.pos_embed.mul_(2)
    torch.testing.assert_close(posembed.pos_embed_for(model, (5, 7)), 2 * a)
    for g in range(1, 2 * posembed.CACHE_SIZE):
        posembed.pos_embed_for(model, (5, 7))  # used every time: never the least recently used
        posembed.pos_embed_for(model, (g, g + 1))
    cache = model._pos_cache[1]
    assert len(cache) == posembed.CACHE_SIZE and (5, 7) in cache  # bounded, the oldest unused out first
    assert (1, 2) not in cache and (2 * posembed.CACHE_SIZE - 1, 2 * posembed.CACHE_SIZE) in cache
    with pytest.raises(InputError, match="accepted: dino, dinov2, dinov2_reg, timm"):
        posembed.install(model, "bilinear")


def test_family_resampling_is_thread_safe_on_one_shared_model():
    from concurrent.futures import ThreadPoolExecutor

    from attention.vit.engine.extract import attention_maps
    from attention.vit.models import posembed

    torch.manual_seed(0)
    model = timm.create_model(
        TINY["architecture"], pretrained=False, num_classes=0, dynamic_img_size=True, **TINY["model_args"]
    )
    posembed.install(model.eval().requires_grad_(False), "dinov2")
    rng = np.random.default_rng(0)
    images = [(rng.random((24 + 8 * (i % 5), 40 + 8 * (i % 3), 3)) * 255).astype(np.uint8) for i in range(24)]
    solo = [attention_maps(model, im, resolution=None).weights for im in images]
    model.__dict__.pop("_pos_cache")
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda im: attention_maps(model, im, resolution=None).weights, images))
    for a, b in zip(solo, together):
        np.testing.assert_array_equal(a, b)


def test_a_slow_load_stalls_no_other_model_and_each_model_loads_once(monkeypatch):
    """A cold load (a download, say) holds only its own key: a model already resident answers, and
    another model loads, meanwhile; eight threads asking for the slow one at once load it once."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from attention.vit.models import loader as models

    release, loads = threading.Event(), []
    real = models._load

    def load(timm_name, spec):
        loads.append(spec.alias if spec else timm_name)
        if loads.count("dino_vits16") and spec is not None and spec.alias == "dino_vits16":
            assert release.wait(30), "the slow load was never released"
            return real("vit_tiny", REGISTRY["mnist_vit"])  # stands in for the download (offline here)
        return real(timm_name, spec)

    monkeypatch.setattr(models, "_load", load)
    monkeypatch.setattr(models, "_cache", type(models._cache)())
    with ThreadPoolExecutor(9) as pool:
        slow = [pool.submit(load_vit, "dino_vits16", "cpu") for _ in range(8)]
        other = pool.submit(load_vit, "mnist_vit", "cpu").result(timeout=30)  # not behind the slow load
        assert not any(f.done() for f in slow)
        assert load_vit("mnist_vit", "cpu") is other  # resident: answered at once
        release.set()
        got = {id(f.result(timeout=30)) for f in slow}
    assert len(got) == 1 and loads.count("dino_vits16") == 1
