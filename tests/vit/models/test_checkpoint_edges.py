"""No silent error loading a checkpoint (issue 31, items 2, 3, 4, 9, 10): the family's normalisation for an
untagged architecture, a cache that sees a rewritten file and another family, backbone tensors the
architecture lacks refused, and every refusal typed, naming what is accepted, never advising unsafe loading."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from attention.errors import CheckpointError, ModelLoadError, UnsupportedModelError
from attention.vit.engine.preprocess import Preprocess
from attention.vit.models import loader as models
from attention.vit.models.loader import load_vit
from tests.vit.engine.test_dino_resize import DINO_MEAN, DINO_STD, dino_script_input

ARCH = "vit_tiny_patch16_224"  # untagged: timm's default tag (augreg) normalises with mean = std = 0.5


def vit(seed: int, arch: str = ARCH) -> torch.nn.Module:
    torch.manual_seed(seed)
    return timm.create_model(arch, pretrained=False, num_classes=0).eval()


@pytest.fixture(autouse=True)
def fresh_cache():
    models.clear_cache()
    yield
    models.clear_cache()


def test_family_dino_normalises_as_dinos_script_even_for_an_untagged_arch(tmp_path):
    """Item 2: `--arch vit_small_patch16_224 --family dino` (here the tiny ViT) feeds images exactly as
    visualize_attention.py: ImageNet's mean and std, bilinear Resize, the top-left crop."""
    path = tmp_path / "checkpoint.pth"
    torch.save(vit(0).state_dict(), path)
    assert tuple(timm.models.get_pretrained_cfg(ARCH).mean) == (0.5, 0.5, 0.5)  # what the tag alone would give
    img = Image.fromarray((np.random.default_rng(1).random((375, 500, 3)) * 255).astype(np.uint8))
    for family in ("dino", " DINO "):
        model = load_vit(str(path), device="cpu", arch=ARCH, family=family)
        prep = Preprocess.of(model, 480)
        assert (prep.mean, prep.std) == (DINO_MEAN, DINO_STD)
        torch.testing.assert_close(prep(img).x[None], dino_script_input(img, 480), atol=1e-5, rtol=0)
    plain = load_vit(str(path), device="cpu", arch=ARCH)  # no family: the architecture's own (timm)
    assert Preprocess.of(plain).mean == (0.5, 0.5, 0.5)


def test_family_dino_on_the_command_line_gives_dinos_normalisation(tmp_path, monkeypatch):
    """Item 2 through the CLI's options (`--weights --arch --family dino`), as the README shows."""
    from attention.vit.models import own_checkpoint as checkpoint

    saved = dict(models.REGISTRY)
    path = tmp_path / "checkpoint.pth"
    torch.save(vit(0).state_dict(), path)
    try:
        alias = checkpoint.use_checkpoint(path, ARCH, None, "dino")
        assert Preprocess.of(load_vit(alias, device="cpu")).mean == DINO_MEAN
    finally:
        models.REGISTRY.clear()
        models.REGISTRY.update(saved)


def test_the_cache_sees_a_rewritten_file_and_another_family(tmp_path):
    """Item 3: the next epoch's checkpoint written over the last gives the new weights; another family
    is another model."""
    path = tmp_path / "checkpoint.pth"
    a, b = vit(1), vit(2)
    torch.save(a.state_dict(), path)
    first = load_vit(str(path), device="cpu", arch=ARCH)
    torch.testing.assert_close(first.blocks[3].attn.qkv.weight, a.blocks[3].attn.qkv.weight)
    assert load_vit(str(path), device="cpu", arch=ARCH) is first  # unchanged: the cached model
    time.sleep(0.05)  # the next epoch
    torch.save(b.state_dict(), path)
    second = load_vit(str(path), device="cpu", arch=ARCH)
    torch.testing.assert_close(second.blocks[3].attn.qkv.weight, b.blocks[3].attn.qkv.weight)
    dino = load_vit(str(path), device="cpu", arch=ARCH, family="dino")
    assert (second.crop_rule, dino.crop_rule) == ("center", "top-left")
    assert Preprocess.of(dino).mean == DINO_MEAN


def test_a_registered_checkpoint_rewritten_is_reloaded(tmp_path):
    """Item 3 through a registry alias (`python app.py --model ckpt.pth`)."""
    from attention.vit.models.own_checkpoint import register_checkpoint

    saved = dict(models.REGISTRY)
    path = tmp_path / "ckpt.pth"
    torch.save(vit(1).state_dict(), path)
    try:
        alias = register_checkpoint(path, ARCH)
        time.sleep(0.05)
        b = vit(2)
        torch.save(b.state_dict(), path)
        torch.testing.assert_close(load_vit(alias, device="cpu").pos_embed, b.pos_embed)
    finally:
        models.REGISTRY.clear()
        models.REGISTRY.update(saved)


def test_backbone_tensors_the_arch_lacks_are_refused_naming_them_and_the_arch_that_has_them(tmp_path):
    """Item 4: DINOv3 with q/v biases loaded as the architecture without them (24 tensors) is refused;
    a classifier head (not the backbone) is kept with its classes (`relevance` explains one's own classifier)."""
    src = timm.create_model("vit_small_patch16_dinov3_qkvb", pretrained=False, num_classes=0)
    path = tmp_path / "dinov3.pth"
    torch.save(src.state_dict(), path)
    with pytest.raises(CheckpointError) as e:
        load_vit(str(path), device="cpu", arch="vit_small_patch16_dinov3")
    msg = str(e.value)
    assert "24 backbone tensors vit_small_patch16_dinov3 lacks: blocks.0.attn.q_bias, blocks.0.attn.v_bias" in msg
    assert "--arch vit_small_patch16_dinov3_qkvb" in msg
    torch.save({**vit(0).state_dict(), "reg_token": torch.zeros(1, 4, 192)}, path)  # 4 registers
    with pytest.raises(CheckpointError, match="1 backbone tensors vit_tiny_patch16_224 lacks: reg_token"):
        load_vit(str(path), device="cpu", arch="vit_tiny_patch16_224")
    deeper = {**vit(0).state_dict(), **{f"blocks.12.{k}": v for k, v in vit(0).blocks[0].state_dict().items()}}
    torch.save(deeper, path)
    with pytest.raises(CheckpointError, match=r"backbone tensors vit_tiny_patch16_224 lacks: blocks\.12\."):
        load_vit(str(path), device="cpu", arch=ARCH)
    torch.save({**vit(0).state_dict(), "head.weight": torch.zeros(10, 192), "head.bias": torch.zeros(10)}, path)
    model = load_vit(str(path), device="cpu", arch=ARCH)
    assert model.head.weight.shape == (10, 192) and model.num_classes == 10


@pytest.mark.parametrize("content", [b"hello world\n", b"# config\nlr: 0.1\n", b""])
def test_a_text_file_named_pth_is_a_typed_error(tmp_path, content):
    """Item 9: a text file named .pth (torch.load raises KeyError on it) is a CheckpointError."""
    path = tmp_path / "notes.pth"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="is not a PyTorch checkpoint torch.load can read.*accepted: a file"):
        load_vit(str(path), device="cpu", arch=ARCH)


def test_a_timm_tag_that_does_not_exist_is_a_typed_error_naming_the_tags():
    """Item 9: `vit_small_patch16_224.dino_typo` (timm raises RuntimeError) is a ModelLoadError."""
    for call in (models.check_allowed, models.is_cached, models.resolve):
        with pytest.raises(ModelLoadError, match=r"no weights tagged 'dino_typo' .*accepted tags: .*\bdino\b"):
            call("vit_small_patch16_224.dino_typo")


def test_xcit_is_refused_by_name_even_when_its_channel_attention_calls_the_kernel(tmp_path, monkeypatch):
    """Item 9: XCiT under TIMM_FUSED_ATTN=2 (its XCA then calls F.scaled_dot_product_attention over
    channels) is an UnsupportedModelError, not a TypeError in the first pass."""
    import timm.layers.config as timm_config

    monkeypatch.setattr(timm_config, "_USE_FUSED_ATTN", 2)  # what TIMM_FUSED_ATTN=2 sets at import
    model = timm.create_model("xcit_nano_12_p16_224", pretrained=False).eval()
    assert model.blocks[0].attn.fused_attn
    from attention.vit.engine.extract import attention_maps

    with pytest.raises(UnsupportedModelError, match="Xcit is not supported: cross-covariance attention"):
        attention_maps(model, np.zeros((64, 64, 3), np.uint8), resolution="native")


class Code:
    """Unpickling this would make a folder: the proof that a refused checkpoint was never executed."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (os.makedirs, (self.target,))


def test_a_pickle_with_code_is_refused_without_advising_unsafe_loading(tmp_path):
    """Item 10: the refusal says the file holds code and is not loaded; torch's advice to re-run with
    weights_only=False (which would run it) is not repeated."""
    target = tmp_path / "pwned"
    for legacy in (False, True):
        path = tmp_path / f"evil{int(legacy)}.pth"
        torch.save({"model": vit(0).state_dict(), "x": Code(str(target))}, path, _use_new_zipfile_serialization=legacy)
        with pytest.raises(CheckpointError) as e:
            load_vit(str(path), device="cpu", arch=ARCH)
        msg = str(e.value)
        assert "holds Python objects other than tensors: code (it names os.makedirs)" in msg
        assert "not loaded" in msg and "safetensors" in msg
        assert "weights_only" not in msg and "False" not in msg and "trusted source" not in msg
        assert not target.exists()


def test_a_hub_weights_file_with_code_is_refused_without_advising_unsafe_loading(tmp_path):
    """Item 10's sibling: a cached `pytorch_model.bin` holding code (the hub path, not a checkpoint) is a
    ModelLoadError that does not repeat torch's advice either, and the code is not run."""
    import io
    import json

    from tests.hub_cache import temporary_hf_home

    target = tmp_path / "pwned"
    buf = io.BytesIO()
    torch.save({**vit(0).state_dict(), "x": Code(str(target))}, buf)
    cfg = {"architecture": ARCH, "num_classes": 0, "model_args": {}, "pretrained_cfg": {}}
    with temporary_hf_home(tmp_path / "hf") as add:
        add("testorg/evil-vit", {"config.json": json.dumps(cfg).encode(), "pytorch_model.bin": buf.getvalue()})
        with pytest.raises(ModelLoadError) as e:
            load_vit("hf-hub:testorg/evil-vit", device="cpu")
    msg = str(e.value)
    assert "weights_only" not in msg and "trusted source" not in msg and not target.exists()
