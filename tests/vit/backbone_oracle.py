"""Helpers of the backbone tests: tiny models with peaked random weights (transformers', Meta's DINOv2),
the libraries' own full attention matrices (the oracles), and the comparison of the engine's rows with them."""

from __future__ import annotations

import copy
import inspect
from functools import partial

import numpy as np
import torch

from attention.vit.backbone import describe
from attention.vit.engine.rows import run_pass
from tests.vit.worst import record

TOL = 1e-4  # of each row's peak
SMALL = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64)  # a tiny HF config


def peak(model: torch.nn.Module, factor: float = 2.0, names=("q_proj", "k_proj", "query", "key", "qkv")) -> None:
    """Redraw the query/key projections of `model` with std factor / sqrt(width), so its softmax rows
    are peaked (scores of std ~ factor^2, not near uniform): a wrong row or token order cannot hide
    inside the tolerance. Seeded by the caller's torch.manual_seed."""
    with torch.no_grad():
        for n, m in model.named_modules():
            if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in names:
                m.weight.normal_(0, factor / m.in_features**0.5)
            if isinstance(m, torch.nn.MultiheadAttention) and m.in_proj_weight is not None:
                e = m.embed_dim
                m.in_proj_weight[: 2 * e].normal_(0, factor / e**0.5)


def hf_tiny(cls: str, seed: int = 0, **cfg) -> torch.nn.Module:
    """transformers' model class named `cls` built from its own config class, of SMALL size (`cfg` added or
    overriding), with weights drawn after torch.manual_seed(seed) and peaked; in eval mode."""
    import transformers

    model_cls = getattr(transformers, cls)
    torch.manual_seed(seed)
    model = model_cls(model_cls.config_class(**(SMALL | cfg))).eval()
    peak(model)
    return model


def hf_oracle(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """transformers' own attention matrices (B, H, N, N) per layer: a float copy of `model` run eagerly with
    output_attentions (positions interpolated where its forward offers it), the caller's model left as it was."""
    ref = copy.deepcopy(model).float()
    ref.set_attn_implementation("eager")
    takes = "interpolate_pos_encoding" in inspect.signature(ref.forward).parameters
    kw = {"interpolate_pos_encoding": True} if takes else {}
    with torch.no_grad():
        return list(ref(pixel_values=x, output_attentions=True, **kw).attentions)


def meta_dinov2(chunks: int = 0, seed: int = 0) -> torch.nn.Module:
    """Meta's DinoVisionTransformer (the `dinov2` package): 3 blocks of width 32 and 4 heads, 28 px at patch 14,
    layer scale 1, its blocks in `chunks` chunks (0: none), weights drawn after torch.manual_seed(seed) and
    peaked; in eval mode."""
    from dinov2.layers import MemEffAttention
    from dinov2.layers.block import NestedTensorBlock
    from dinov2.models.vision_transformer import DinoVisionTransformer

    torch.manual_seed(seed)
    model = DinoVisionTransformer(
        img_size=28,
        patch_size=14,
        embed_dim=32,
        depth=3,
        num_heads=4,
        init_values=1.0,
        block_chunks=chunks,
        block_fn=partial(NestedTensorBlock, attn_class=MemEffAttention),
    ).eval()
    peak(model)
    return model


def meta_oracle(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Each block's attention (B, H, N, N) of a Meta DINOv2: softmax(q k^T * scale) of its own qkv on the
    block's input."""
    seen = []

    def grab(mod, args):
        t = args[0]
        B, N, C = t.shape
        qkv = mod.qkv(t).reshape(B, N, 3, mod.num_heads, C // mod.num_heads).permute(2, 0, 3, 1, 4)
        seen.append(torch.softmax((qkv[0] * mod.scale) @ qkv[1].transpose(-2, -1), -1))

    hooks = [b.attn.register_forward_pre_hook(grab) for b in describe(model).blocks]
    try:
        with torch.no_grad():
            model.forward_features(x)
    finally:
        for h in hooks:
            h.remove()
    return seen


def own_softmax(modules, qk, run) -> list[torch.Tensor]:
    """Each of `modules`' softmax(q k^T * scale) (B, H, N, N) in float64, from `qk(module, its input) -> (q, k,
    scale)` (its own projections), as `run()` calls them in order."""
    seen = []

    def grab(mod, args):
        q, k, scale = qk(mod, args[0])
        seen.append(torch.softmax(q.double() @ k.double().transpose(-2, -1) * scale, -1))

    hooks = [m.register_forward_pre_hook(grab) for m in modules]
    try:
        with torch.no_grad():
            run()
    finally:
        for h in hooks:
            h.remove()
    return seen


def input_of(res, bb) -> torch.Tensor:
    """The (1, 3, H, W) tensor the engine fed the model for the result `res` (its resized image, normalised
    by the backbone description `bb`'s mean and std)."""
    a = (np.asarray(res.image, np.float32) / 255 - np.array(bb.mean, np.float32)) / np.array(bb.std, np.float32)
    return torch.from_numpy(a).permute(2, 0, 1)[None]


def queries(n_tokens: int, prefix: int) -> list[int]:
    """Token indices to check: every prefix token, the first, a middle and the last patch."""
    return sorted({*range(prefix), prefix, (prefix + n_tokens) // 2, n_tokens - 1})


def assert_rows_match(model, x: torch.Tensor, oracle: list[torch.Tensor], prefix: int) -> float:
    """For every layer, head and a set of query tokens (prefix and patches), the engine's row
    (softmax of `run_pass`'s scores) against `oracle[l]` (B, H, N, N) within TOL of the row's peak.
    Returns the worst |diff| / peak seen."""
    N = oracle[0].shape[-1]
    assert x.shape[0] == oracle[0].shape[0]
    worst = 0.0
    for i in queries(N, prefix):
        with torch.inference_mode():
            rec = run_pass(model, x, i, keep_qk=False)
        rows = torch.softmax(rec.rows_cpu(), -1)  # (B, L, H, N)
        assert rows.shape[1] == len(oracle), (rows.shape, len(oracle))
        for layer, ref in enumerate(oracle):
            ref_row = ref[:, :, i].float()  # (B, H, N)
            err = ((rows[:, layer] - ref_row).abs().amax(-1) / ref_row.amax(-1)).max().item()
            assert err < TOL, f"layer {layer} query {i}: {err:.2e} of the peak"
            worst = max(worst, err)
    # the rows are peaked: a uniform row would be 1/N
    assert float(oracle[-1].amax(-1).mean()) > 2.0 / N
    return record(worst)
