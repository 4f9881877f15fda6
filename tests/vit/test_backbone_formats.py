"""Checkpoint formats people hold (`backbone.formats`), each written here and loaded through
`checkpoint.load` into a timm architecture: every layer's maps equal the source model's within 1e-5
(the source read by its own library: Meta's DINOv2 class, transformers, timm; a timm DINOv3 written in
Meta's dinov3 names); one DINOv2 converted
between Meta's class, timm and transformers gives the same maps in all three; a fine-tuned
classifier's head is kept and `relevance` explains it."""

from __future__ import annotations

import pytest
import timm
import torch

from attention.vit import checkpoint
from attention.vit.relevance.compute import relevance_rows
from attention.vit.rows import query_rows
from tests.vit.backbone_oracle import hf_oracle, hf_tiny, meta_dinov2, meta_oracle, peak

T = pytest.importorskip("transformers")
pytest.importorskip("dinov2.models.vision_transformer")
TINY = dict(embed_dim=32, depth=3, num_heads=4, img_size=28, dynamic_img_size=True)


def timm_tiny(arch: str, **kw) -> torch.nn.Module:
    return timm.create_model(arch, pretrained=False, num_classes=kw.pop("num_classes", 0), **(TINY | kw)).eval()


def meta_source(chunks: int) -> torch.nn.Module:
    """Meta's tiny DINOv2 with its position embeddings and class token drawn off their init, as trained."""
    m = meta_dinov2(chunks)
    with torch.no_grad():
        m.pos_embed.normal_(0, 0.5)
        m.cls_token.normal_(0, 1)
    return m


def loaded(tmp_path, data: dict, arch: str, monkeypatch, **kw) -> torch.nn.Module:
    """`checkpoint.load` of `data` saved as a file, with the architecture built tiny."""
    path = tmp_path / "ckpt.pth"
    torch.save(data, path)
    monkeypatch.setattr(checkpoint, "build", lambda a, num_classes=0: timm_tiny(a, num_classes=num_classes, **kw))
    return checkpoint.load(path, arch).eval()


def rows(model, x) -> torch.Tensor:
    N = query_rows(model, x, 0)[0].shape[-1]
    return torch.softmax(query_rows(model, x.expand(N, -1, -1, -1), torch.arange(N))[0], -1)  # every query


X = torch.randn(1, 3, 42, 28)  # non-square, off the trained grid: position embeddings resampled


@pytest.mark.parametrize("layout", ["teacher_chunks", "fsdp", "compiled"])
def test_dinov2_training_outputs_load_with_the_source_maps(layout, tmp_path, monkeypatch):
    src = meta_source(chunks=3 if layout == "teacher_chunks" else 0)
    sd = src.state_dict()
    assert layout != "teacher_chunks" or any(k.startswith("blocks.1.1.") for k in sd)
    head = {"dino_head.mlp.0.weight": torch.randn(8, 32)}
    if layout == "teacher_chunks":  # teacher_checkpoint.pth: {'teacher': {'backbone.blocks.<c>.<i>...', heads}}
        data = {"teacher": {**{f"backbone.{k}": v for k, v in sd.items()}, **head}, "iteration": 10}
    elif layout == "fsdp":  # {'model': {'teacher.backbone...', 'student.backbone...', heads}}
        data = {
            "model": {
                **{f"teacher.backbone.{k}": v for k, v in sd.items()},
                **{f"student.backbone.{k}": v * 0 for k, v in sd.items()},
            }
        }
    else:
        data = {f"_orig_mod.{k}": v for k, v in sd.items()}
    model = loaded(tmp_path, data, "vit_small_patch14_dinov2", monkeypatch, patch_size=14, init_values=1.0)
    # Meta's interpolation differs from timm's (offset 0.1): compare on the trained grid, where none is resampled
    x = torch.randn(1, 3, 28, 28)
    torch.testing.assert_close(rows(model, x), rows(src, x), atol=1e-5, rtol=0)
    assert "formats converted" in str(model.checkpoint_report)


def hf_dinov2(registers: int) -> torch.nn.Module:
    regs = {"num_register_tokens": registers} if registers else {}
    cls = "Dinov2WithRegistersModel" if registers else "Dinov2Model"
    m = hf_tiny(cls, 1, intermediate_size=128, image_size=28, patch_size=14, **regs)
    with torch.no_grad():
        m.embeddings.position_embeddings.normal_(0, 0.5)
        m.embeddings.cls_token.normal_(0, 1)
        if registers:
            m.embeddings.register_tokens.normal_(0, 1)
    return m


def hf_rows(model, x) -> torch.Tensor:
    return torch.stack([a[0] for a in hf_oracle(model, x)]).permute(2, 0, 1, 3)  # (L, H, Nq, N) -> (Nq, L, H, N)


@pytest.mark.parametrize("registers", [0, 4])
def test_a_transformers_model_safetensors_loads_with_its_maps(registers, tmp_path, monkeypatch):
    src = hf_dinov2(registers)
    out = tmp_path / "hf"
    src.save_pretrained(out)  # model.safetensors in transformers' own (old-style) names
    path = tmp_path / "model.safetensors"
    path.write_bytes((out / "model.safetensors").read_bytes())
    arch = "vit_small_patch14_reg4_dinov2" if registers else "vit_small_patch14_dinov2"
    kw = dict(patch_size=14, init_values=1.0, mlp_ratio=4.0)
    monkeypatch.setattr(checkpoint, "build", lambda a, num_classes=0: timm_tiny(a, num_classes=num_classes, **kw))
    model = checkpoint.load(path, arch).eval()
    assert "transformers" in str(model.checkpoint_report)
    x = torch.randn(1, 3, 28, 28)
    torch.testing.assert_close(rows(model, x), hf_rows(src, x), atol=1e-5, rtol=0)


def test_a_fine_tuned_classifier_keeps_its_head_and_relevance_explains_it(tmp_path, monkeypatch):
    torch.manual_seed(3)
    src = timm_tiny("vit_small_patch16_224", num_classes=7, img_size=32, patch_size=16)
    model = loaded(
        tmp_path, {"model": src.state_dict()}, "vit_small_patch16_224", monkeypatch, img_size=32, patch_size=16
    )
    assert model.num_classes == 7 and "head" not in str(model.checkpoint_report)
    x = torch.randn(1, 3, 32, 32)
    logits, t, chefer, _, _ = relevance_rows(model, x)
    with torch.no_grad():
        torch.testing.assert_close(logits, src(x)[0], atol=1e-5, rtol=0)
    assert t == int(logits.argmax()) and chefer.shape == (5,)


def test_one_dinov2_in_transformers_meta_and_timm_has_the_same_maps():
    from attention.vit.backbone import formats

    hf = hf_dinov2(0)  # the source: a transformers Dinov2Model
    meta_sd = formats._from_hf(hf.state_dict(), "")  # transformers' names -> Meta's
    meta = meta_source(chunks=0)
    meta.load_state_dict(meta_sd, strict=True)
    tm = timm_tiny("vit_small_patch14_dinov2", patch_size=14, init_values=1.0)
    tensors, found = formats.convert(dict(meta_sd), tm)
    tm.load_state_dict(tensors, strict=True)
    x = torch.randn(1, 3, 28, 28)  # the trained grid: each library resamples positions its own way elsewhere
    ref = hf_rows(hf, x)  # transformers' own attention (eager output_attentions)
    meta_ref = torch.stack([a[0] for a in meta_oracle(meta, x)]).permute(2, 0, 1, 3)  # Meta's own softmax
    torch.testing.assert_close(meta_ref, ref, atol=1e-5, rtol=0)
    for model in (hf, meta, tm):  # the engine on each library's object
        torch.testing.assert_close(rows(model, x), ref, atol=1e-5, rtol=0)


def meta_dinov3_names(sd: dict) -> dict:
    """A timm DINOv3's state dict in Meta's own names (facebookresearch/dinov3 DinoVisionTransformer, as its
    hub .pth files): the inverse of timm's checkpoint_filter_fn, with the tensors Meta's class has and timm's
    filter drops (`mask_token`, `rope_embed.periods`, the masked k bias of `qkv`: zero here, as timm's S has none)."""
    out = {"mask_token": torch.randn(1, sd["cls_token"].shape[-1])}
    for k, v in sd.items():
        k = k.replace("reg_token", "storage_tokens").replace("gamma_1", "ls1.gamma").replace("gamma_2", "ls2.gamma")
        out[k] = v
        if k.endswith("attn.qkv.weight"):
            o = v.shape[0]
            out[k.replace("weight", "bias")] = torch.zeros(o)
            out[k.replace("weight", "bias_mask")] = torch.ones(o).index_fill_(0, torch.arange(o // 3, 2 * o // 3), 0)
    out["rope_embed.periods"] = torch.rand(32 // 4 // 4) + 1  # (D_head // 4,)
    return out


def test_a_dinov3_in_metas_own_names_loads_with_the_source_maps(tmp_path, monkeypatch):
    torch.manual_seed(4)
    kw = dict(img_size=32)
    src = timm_tiny("vit_small_patch16_dinov3", **kw)
    peak(src)
    with torch.no_grad():
        src.cls_token.normal_(0, 1)
        src.reg_token.normal_(0, 1)
        for b in src.blocks:  # layer scales off their 1e-5 init: every block changes the next one's maps
            b.gamma_1.normal_(1, 0.5)
            b.gamma_2.normal_(1, 0.5)
    data = meta_dinov3_names(src.state_dict())
    assert {"storage_tokens", "blocks.0.ls1.gamma", "rope_embed.periods", "blocks.2.attn.qkv.bias_mask"} <= set(data)
    model = loaded(tmp_path, data, "vit_small_patch16_dinov3", monkeypatch, **kw)
    assert "Meta's DINOv2/DINOv3 names" in str(model.checkpoint_report)
    for x in (torch.randn(1, 3, 32, 32), torch.randn(1, 3, 48, 32)):  # square, and not (RoPE on a 3 x 2 grid)
        got, want = rows(model, x), rows(src, x)  # (Nq, L, H, N): every query, layer and head
        assert got.shape[:3] == (5 + x.shape[2] * x.shape[3] // 256, 3, 4)
        err = ((got - want).abs().amax(-1) / want.amax(-1)).max().item()
        assert err < 1e-5, f"{err:.2e} of a row's peak"


def test_a_meta_dinov3_with_nonzero_attention_biases_is_refused_for_an_arch_without_them(tmp_path, monkeypatch):
    """timm's filter drops Meta's qkv bias for an architecture without q/v biases: a non-zero one would be
    lost silently (other maps), so it is refused naming the architecture that has them."""
    from attention.errors import CheckpointError

    torch.manual_seed(5)
    src = timm_tiny("vit_small_patch16_dinov3", img_size=32)
    data = meta_dinov3_names(src.state_dict())
    data["blocks.1.attn.qkv.bias"] = torch.randn_like(data["blocks.1.attn.qkv.bias"])
    with pytest.raises(CheckpointError, match="non-zero attention biases.*vit_small_patch16_dinov3_qkvb"):
        loaded(tmp_path, data, "vit_small_patch16_dinov3", monkeypatch, img_size=32)
