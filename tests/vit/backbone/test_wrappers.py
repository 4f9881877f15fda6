"""Where people keep their models (issue 47), each read exactly or refused by name: nn.DataParallel and
DistributedDataParallel (`module.`), torch.compile, timm's features_only nets, a torch.hub model from a local clone
(source="local", a hubconf written here), a transformers pipeline (refused by name; `unwrap` gives its model with
its normalisation), and a user's fp16/bf16 model (scores in fp32, as the engine does for its own fp16). The oracles
are the libraries' own attention (timm's unfused softmax, transformers' eager attentions, the dinov2 package's own
qkv) or, for the half models, the full softmax of the model's own half-precision q and k computed in float64."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
from torch import nn

import attention
from attention.errors import NoClassifierError, UnsupportedModelError
from attention.vit.backbone import describe, library_of
from attention.vit.relevance import check_classifier
from bench.compat import timm_attention
from tests.vit.backbone_oracle import assert_rows_match, hf_oracle, hf_tiny, meta_oracle, own_softmax, peak


def tiny_timm(**kw) -> nn.Module:
    torch.manual_seed(0)
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, depth=3, img_size=32, dynamic_img_size=True, **kw
    ).eval()
    peak(model)
    return model


def test_data_parallel_is_read_as_the_model_it_holds():
    model = tiny_timm(num_classes=4)
    dp = nn.DataParallel(model)
    x = torch.randn(1, 3, 48, 32)
    assert library_of(dp) == "timm" and describe(dp).model is dp
    assert_rows_match(dp, x, timm_attention(model, x), 1)
    check_classifier(dp)  # its head is the held model's


def test_distributed_data_parallel_is_read_as_the_model_it_holds(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        model = tiny_timm()
        ddp = nn.parallel.DistributedDataParallel(model)
        x = torch.randn(1, 3, 32, 48)
        assert_rows_match(ddp, x, timm_attention(model, x), 1)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # importing torch._dynamo takes seconds
def test_a_compiled_model_is_read_uncompiled():
    model = tiny_timm()
    x = torch.randn(1, 3, 32, 32)
    assert_rows_match(torch.compile(model), x, timm_attention(model, x), 1)


def test_timms_features_only_vit_is_its_pruned_vit():
    torch.manual_seed(0)
    net = timm.create_model("vit_tiny_patch16_224", pretrained=False, features_only=True, depth=3, img_size=32)
    peak(net)
    bb = describe(net)
    assert bb.depth == len(net.model.blocks) and not bb.classifier
    x = torch.randn(1, 3, 32, 32)
    assert_rows_match(net, x, timm_attention(net.model, x), 1)
    with pytest.raises(NoClassifierError):
        check_classifier(net)


def test_a_torch_hub_model_from_a_local_clone(tmp_path):
    pytest.importorskip("dinov2")
    (tmp_path / "hubconf.py").write_text(
        "from functools import partial\n"
        "dependencies = ['torch']\n\n\n"
        "def dinov2_tiny(pretrained=False):\n"
        "    from dinov2.layers import MemEffAttention\n"
        "    from dinov2.layers.block import NestedTensorBlock\n"
        "    from dinov2.models.vision_transformer import DinoVisionTransformer\n\n"
        "    return DinoVisionTransformer(img_size=28, patch_size=14, embed_dim=32, depth=3, num_heads=4,\n"
        "        init_values=1.0, block_fn=partial(NestedTensorBlock, attn_class=MemEffAttention))\n"
    )
    torch.manual_seed(0)
    model = torch.hub.load(str(tmp_path), "dinov2_tiny", source="local", trust_repo=True).eval()
    peak(model)
    assert library_of(model) == "meta"
    x = torch.randn(1, 3, 42, 28)
    assert_rows_match(model, x, meta_oracle(model, x), 1)


@pytest.mark.slow  # importing transformers' pipelines takes seconds
def test_a_pipeline_is_refused_by_name_and_unwrap_gives_its_model():
    T = pytest.importorskip("transformers")
    model = hf_tiny("ViTForImageClassification", 0, image_size=32, patch_size=16, num_labels=3)
    proc = T.ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.1, 0.2, 0.3], image_std=[0.4, 0.5, 0.6])
    pipe = T.pipeline("image-classification", model=model, image_processor=proc)
    image = np.zeros((32, 32, 3), np.uint8)
    with pytest.raises(UnsupportedModelError, match=r"pipeline, not a model; accepted: its model"):
        attention.attention_maps(pipe, image)
    held = attention.unwrap(pipe)
    assert held is model and describe(held).mean == (0.1, 0.2, 0.3) and describe(held).std == (0.4, 0.5, 0.6)
    x = torch.randn(1, 3, 32, 48)
    assert_rows_match(held, x, hf_oracle(held, x), 1)


def half_oracle(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Each block's softmax(q k^T * scale) (B, H, N, N) in float64, from the half model's own qkv output (its
    dtype's q and k, as the model computes them)."""

    def qk(attn, t):
        B, N, C = t.shape
        qkv = attn.qkv(t).reshape(B, N, 3, attn.num_heads, C // attn.num_heads).permute(2, 0, 3, 1, 4)
        return qkv[0], qkv[1], attn.scale

    return own_softmax([b.attn for b in model.blocks], qk, lambda: model.forward_features(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_users_half_precision_model_is_scored_in_fp32(dtype):
    model = tiny_timm(num_classes=4).to(dtype)
    x = torch.randn(1, 3, 32, 48).to(dtype)
    assert_rows_match(model, x, half_oracle(model, x), 1)
    rel = attention.relevance(model, np.zeros((32, 48, 3), np.uint8), None, resolution=32)
    assert rel.chefer.dtype == np.float32 and np.isfinite(rel.chefer).all() and len(rel.names) == 4
