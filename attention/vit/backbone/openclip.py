"""open_clip visual towers described (`Backbone`): `VisionTransformer` (CLIP, and SigLIP-style
towers built by open_clip itself), its attention in `nn.MultiheadAttention` (read with q and k
recomputed from its input and `in_proj` weights: `backbone.kernel`), and `TimmModel` towers (the
timm trunk's own description, run through the trunk).

    import open_clip
    model, _, _ = open_clip.create_model_and_transforms("ViT-B-32")
    bb = describe(model.visual)         # or describe(model): its visual tower
    attention_maps(model.visual, image)

Tokens: [CLS, patches]; the last layer's tokens are `ln_post`'s output over all tokens (towers that
norm after pooling, or pool by an attentional pooler: the last block's output). Its position
embeddings are for one grid: the tower takes its trained size only (`fixed`). Normalisation: the
tower's `preprocess_cfg` (mean/std), else OpenAI CLIP's.
"""

from __future__ import annotations

import torch

from attention.errors import UnsupportedModelError
from attention.vit.backbone.spec import CLIP_MEAN, CLIP_STD, Backbone, check_square, served_rules


def _size(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def describe(model: torch.nn.Module) -> Backbone:
    """The Backbone of an open_clip visual tower (or of a CLIP model's `visual`)."""
    visual = getattr(model, "visual", None)
    if isinstance(visual, torch.nn.Module):
        model = visual
    name = type(model).__name__
    if name == "TimmModel":
        return _timm_tower(model)
    if name != "VisionTransformer":
        raise UnsupportedModelError(
            f"{name} (open_clip) is not described: it is not a ViT tower; described: VisionTransformer, TimmModel."
        )
    tr = model.transformer
    blocks = list(tr.resblocks)
    if not getattr(tr, "batch_first", True):
        raise UnsupportedModelError(f"{name} runs its transformer sequence-first (batch_first=False); not described.")
    attn = [b.attn for b in blocks]
    if not all(isinstance(a, torch.nn.MultiheadAttention) for a in attn):
        raise UnsupportedModelError(f"{name}: its blocks' attention is not nn.MultiheadAttention; not described.")
    plain = getattr(model, "attn_pool", None) is None and not getattr(model, "final_ln_after_pool", False)
    width = int(blocks[0].attn.embed_dim)
    cfg = getattr(model, "preprocess_cfg", None) or {}
    size = _size(model.image_size)

    def run(x: torch.Tensor, head: bool = False):
        return model(x)

    return Backbone(
        library="open_clip",
        model=model,
        blocks=tuple(blocks),
        attention=tuple(attn),
        final=model.ln_post if plain else blocks[-1],
        prefix=("cls",) if getattr(model, "class_embedding", None) is not None else (),
        patch=check_square(name, model.patch_size),
        heads=int(blocks[0].attn.num_heads),
        width=width,
        run=run,
        mean=tuple(cfg.get("mean", CLIP_MEAN)),
        std=tuple(cfg.get("std", CLIP_STD)),
        input_size=size,
        fixed=size,
        **served_rules(model),
    )


def _timm_tower(model: torch.nn.Module) -> Backbone:
    """A TimmModel tower: its timm trunk's description, the tower's normalisation, run through the trunk."""
    from dataclasses import replace

    from attention.vit.backbone import timm as timm_desc

    trunk = model.trunk
    bb = timm_desc.describe(trunk)
    cfg = getattr(model, "preprocess_cfg", None) or {}

    def run(x: torch.Tensor, head: bool = False):
        feats = trunk.forward_features(x)
        return trunk.forward_head(feats) if head else feats

    return replace(
        bb,
        library="open_clip",
        model=model,
        run=run,
        mean=tuple(cfg.get("mean", bb.mean)),
        std=tuple(cfg.get("std", bb.std)),
        **served_rules(model, crop=bb.crop, resize=bb.resize, auto_resolution=bb.auto_resolution),
        classifier=False,
    )
