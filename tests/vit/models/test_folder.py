"""A model saved in a folder, named by its path (issue 47): a transformers `save_pretrained` folder and an open_clip
one load through their libraries' own loaders (local files only) and equal the object that was saved (every tensor,
every attention row); the CLI's --weights and the app's --model take the folder alone; a visitor's model name is
never read as a path; what is not a model folder is refused by type, saying what is accepted."""

from __future__ import annotations

import json

import pytest
import torch

from attention.errors import AttentionError, CheckpointError, ModelLoadError
from attention.vit.engine.rows import run_pass
from attention.vit.models import registry
from attention.vit.models.loader import check_allowed, load_vit
from attention.vit.models.own_checkpoint import serve_args, use_checkpoint
from attention.vit.relevance import class_names
from tests.vit.backbone_oracle import hf_tiny
from tests.vit.worst import record

pytest.importorskip("transformers")
CPU = dict(device="cpu", dtype=torch.float32)


def same_model(loaded: torch.nn.Module, saved: torch.nn.Module, x: torch.Tensor) -> None:
    """Every tensor equal, and every layer's CLS row of the engine equal on `x`."""
    a, b = loaded.state_dict(), saved.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with torch.inference_mode():
        ra, rb = run_pass(loaded, x, 0, keep_qk=False), run_pass(saved, x, 0, keep_qk=False)
    assert torch.equal(ra.rows_cpu(), rb.rows_cpu())
    record(float((ra.rows_cpu() - rb.rows_cpu()).abs().max()))  # 0.0: the table's figure (bench.models_compat)


@pytest.fixture()
def saved(tmp_path):
    model = hf_tiny("Dinov2WithRegistersModel", 0, image_size=28, patch_size=14, num_register_tokens=2)
    model.save_pretrained(tmp_path / "my_dinov2")
    return tmp_path / "my_dinov2", model


def test_a_save_pretrained_folder_by_its_path_is_the_saved_model(saved, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder, model = saved
    loaded = load_vit(str(folder), **CPU)
    assert type(loaded) is type(model)
    same_model(loaded, model, torch.randn(1, 3, 42, 28))
    assert loaded.crop_rule == "top-left"  # fed as DINOv2's family, from its config's model_type
    assert load_vit(folder, **CPU) is loaded  # a Path too, loaded once


def test_a_classifier_folder_keeps_its_head_and_its_labels(tmp_path):
    model = hf_tiny("ViTForImageClassification", 0, image_size=32, patch_size=16, id2label={0: "cat", 1: "dog"})
    model.save_pretrained(tmp_path / "pets")
    loaded = load_vit(str(tmp_path / "pets"), **CPU)
    same_model(loaded, model, torch.randn(1, 3, 32, 48))
    assert class_names(loaded) == ("cat", "dog")


TINY_CLIP = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 8, "patch_size": 16},
    "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 16, "heads": 2, "layers": 1},
}


def test_an_open_clip_folder_is_its_visual_tower(tmp_path):
    open_clip = pytest.importorskip("open_clip")
    from safetensors.torch import save_file

    cfg = TINY_CLIP
    torch.manual_seed(0)
    clip = open_clip.CLIP(**cfg).eval()
    folder = tmp_path / "my_clip"
    folder.mkdir()
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg}))
    save_file({k: v.contiguous() for k, v in clip.state_dict().items()}, folder / "open_clip_model.safetensors")
    loaded = load_vit(str(folder), **CPU)
    same_model(loaded, clip.visual, torch.randn(1, 3, 32, 32))


def test_an_open_clip_training_checkpoint_on_its_open_clip_architecture(tmp_path):
    open_clip = pytest.importorskip("open_clip")
    (tmp_path / "tiny-clip-i47.json").write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(tmp_path / "tiny-clip-i47.json")  # a model name of open_clip's, as ViT-B-32
    torch.manual_seed(0)
    clip = open_clip.create_model("tiny-clip-i47").eval()
    path = tmp_path / "epoch_3.pt"  # what open_clip's training writes: the epoch, DDP's `module.` names
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in clip.state_dict().items()}}, path)
    loaded = load_vit(str(path), arch="open_clip:tiny-clip-i47", **CPU)
    same_model(loaded, clip.visual, torch.randn(1, 3, 32, 32))
    assert loaded.checkpoint_report.key == "state_dict" and loaded.checkpoint_report.prefixes == ("module.",)
    with pytest.raises(CheckpointError, match="not an open_clip model; accepted"):
        load_vit(str(path), arch="open_clip:no-such-model", **CPU)


def test_the_command_lines_take_the_folder_alone(saved):
    folder, model = saved
    before, default = dict(registry.REGISTRY), registry.default_model()
    try:
        alias = use_checkpoint(folder, None, None, None)
        assert alias == "dir:my_dinov2" and registry.REGISTRY[alias].checkpoint == str(folder.resolve())
        same_model(load_vit(alias, **CPU), model, torch.randn(1, 3, 28, 28))
        assert check_allowed(alias) == alias  # the operator's folder is a visitor's choice by its alias
        assert serve_args(["--model", str(folder)]) == alias and registry.default_model() == alias
    finally:
        registry.REGISTRY.clear()
        registry.REGISTRY.update(before)
        registry.set_default_model(default)


def test_a_visitors_name_is_never_a_path(saved):
    folder, _ = saved
    with pytest.raises(ModelLoadError, match="not offered|Unknown model"):
        check_allowed(str(folder), allow_downloads=True)


def test_what_is_not_a_model_folder_is_refused_saying_what_is(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="Unknown model"):
        load_vit(str(tmp_path / "empty"), **CPU)
    with pytest.raises(ModelLoadError, match="not a model folder; accepted: a transformers save_pretrained"):
        load_vit(tmp_path / "empty", **CPU)
    with pytest.raises(CheckpointError, match="a model folder alone"):
        use_checkpoint(tmp_path / "w.pth", None, None, None)
    with pytest.raises(AttentionError):
        (tmp_path / "bad").mkdir()
        (tmp_path / "bad" / "config.json").write_text("{not json")
        (tmp_path / "bad" / "model.safetensors").write_bytes(b"x")
        load_vit(str(tmp_path / "bad"), **CPU)
