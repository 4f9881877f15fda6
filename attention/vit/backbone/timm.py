"""timm ViTs described (`Backbone`): VisionTransformer (and DeiT's distilled one), Eva (EVA-02,
DINOv3, the RoPE ViTs), BEiT, the relpos ViTs; built by `create_model` or by their constructor
(no `pretrained_cfg`: ImageNet's normalisation and the patch embedding's size are used), fused or
unfused (`TIMM_FUSED_ATTN=0`/`2`, `attn.fused_attn = False`: `capture` reads the explicit softmax
path as it reads the fused kernel, without changing the model).

Refused with the reason, before any forward: blocks whose attention is not one softmax per layer
(differential attention, parallel blocks), a CNN stem (hybrid ViTs: the grid is the stem's, not the
patches'), windowed or hierarchical models (Swin, ViTDet/SAM, Hiera, MViTv2), CaiT's class-attention
layers, XCiT's cross-covariance attention, NaFlexViT's variable-length sequences.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from attention.errors import UnsupportedModelError
from attention.vit.backbone.spec import IMAGENET_MEAN, IMAGENET_STD, Backbone, check_square, numbered, served_rules

# Blocks the engine refuses by class name, and why.
REFUSED_BLOCKS = {
    "DiffAttention": "differential attention: its map is a1 - lambda * a2, a difference of two softmaxes "
    "(not a softmax row, possibly negative)",
    "ParallelScalingBlock": "a parallel block (fused attention and MLP) whose attention module is not separate",
    "DiffParallelScalingBlock": "differential attention in a parallel block: a1 - lambda * a2, a difference "
    "of two softmaxes, with no separate attention module",
    "ParallelThingsBlock": "parallel attention branches per block (no single attention per layer)",
    "XCA": "cross-covariance attention (XCiT): it attends over channels, a (d x d) map per head, not over "
    "tokens, so there is no token-to-token row to show (its kernel call, with TIMM_FUSED_ATTN=2, is channels')",
}
# Whole models refused by class name, and why (checked before anything else).
_SWIN = "windowed, hierarchical attention (shifted windows, merged patches): no one row over the image"
REFUSED_MODELS = {
    "SwinTransformer": _SWIN,
    "SwinTransformerV2": _SWIN,
    "SwinTransformerV2Cr": _SWIN,
    "VisionTransformerSAM": "windowed attention in most blocks (ViTDet, SAM's encoder): rows cover one window",
    "Hiera": "hierarchical, mask-unit windowed attention: no one row over the image",
    "MultiScaleVit": "pooled attention (MViTv2): keys are pooled to a coarser grid than the queries",
    "Cait": "class-attention layers after the self-attention blocks (CaiT): two kinds of layer",
    "Xcit": "cross-covariance attention (XCiT): a d x d map over channels, not a row over tokens",
    "NaFlexVit": "variable-length patch sequences (NaFlexViT): no fixed grid",
}


def refuse_model(model: torch.nn.Module) -> None:
    """UnsupportedModelError naming the class and why, for the timm models the engine cannot read."""
    why = REFUSED_MODELS.get(type(model).__name__)
    if why:
        raise UnsupportedModelError(f"{type(model).__name__} is not supported: {why}.")


def prefix_names(model: torch.nn.Module) -> tuple[str, ...]:
    """Names of the P prefix tokens, in sequence order (class, distillation, registers)."""
    names = []
    if getattr(model, "cls_token", None) is not None:
        names.append("cls")
    if getattr(model, "dist_token", None) is not None:
        names.append("dist")
    reg = getattr(model, "reg_token", None)
    names += [f"reg{i}" for i in range(reg.shape[1] if reg is not None else 0)]
    P = int(getattr(model, "num_prefix_tokens", len(names)))
    if len(names) != P:
        raise UnsupportedModelError(
            f"{type(model).__name__} has {P} prefix tokens but names only {len(names)} ({', '.join(names) or 'none'}); "
            "the engine cannot tell which token is which."
        )
    return tuple(names)


def describe(model: torch.nn.Module) -> Backbone:
    """The Backbone of a timm ViT; UnsupportedModelError naming the class and why for one it cannot read."""
    name = type(model).__name__
    refuse_model(model)
    blocks = getattr(model, "blocks", None)
    if blocks is None or not len(blocks):
        raise UnsupportedModelError(f"{name} has no transformer blocks (`model.blocks`); the engine reads timm ViTs.")
    if not hasattr(model, "norm"):
        raise UnsupportedModelError(f"{name} has no final norm (`model.norm`).")
    pe = model.patch_embed
    if type(pe).__name__ == "HybridEmbed" or getattr(pe, "backbone", None) is not None:
        raise UnsupportedModelError(
            f"{name} has a CNN stem ({type(pe).__name__}): its tokens sit on the stem's feature grid, not on "
            "patches of the image, so maps and patch queries would be misplaced; accepted: ViTs with a plain "
            "patch embedding."
        )
    attn = []
    for blk in blocks:
        a = getattr(blk, "attn", None)
        for part in (blk, a):
            if part is not None and type(part).__name__ in REFUSED_BLOCKS:
                raise UnsupportedModelError(
                    f"{type(part).__name__} blocks are not supported: {REFUSED_BLOCKS[type(part).__name__]}."
                )
        if a is None or not isinstance(a, torch.nn.Module):
            raise UnsupportedModelError(
                f"{type(blk).__name__} blocks are not supported: they have no separate attention module (`attn`)."
            )
        attn.append(a)
    pool = getattr(model, "attn_pool", None)
    has_pool = pool is not None and hasattr(pool, "latent")
    if has_pool:
        attn.append(pool)
    cfg = getattr(model, "pretrained_cfg", None) or {}
    img = getattr(pe, "img_size", None) or (224, 224)
    size = tuple(int(v) for v in cfg.get("input_size", (3, *img))[-2:])
    fixed = tuple(int(v) for v in pe.img_size) if getattr(pe, "strict_img_size", False) else None
    width = int(getattr(model, "embed_dim", 0) or model.num_features)

    def run(x: torch.Tensor, head: bool = False):
        feats = model.forward_features(x)
        return model.forward_head(feats) if head else feats

    return Backbone(
        library="timm",
        model=model,
        blocks=tuple(blocks),
        attention=tuple(attn),
        final=model.norm,
        prefix=prefix_names(model),
        patch=check_square(name, pe.patch_size),
        heads=int(attn[0].num_heads),
        width=width,
        run=run,
        mean=tuple(cfg.get("mean", IMAGENET_MEAN)),
        std=tuple(cfg.get("std", IMAGENET_STD)),
        input_size=size,  # type: ignore[arg-type]
        fixed=fixed,  # type: ignore[arg-type]
        **served_rules(model),
        pool=has_pool,
        classifier=int(getattr(model, "num_classes", 0) or 0) > 0,
        extra={"readout": getattr(model, "global_pool", "token")},
        labels=lambda: labels(model),
    )


@lru_cache(maxsize=8)
def imagenet(subset: str) -> tuple[str, ...]:
    """timm's own descriptions of an ImageNet subset's classes, in order ("tench, Tinca tinca", ...)."""
    from timm.data import ImageNetInfo

    info = ImageNetInfo(subset)
    return tuple(info.index_to_description(i) for i in range(info.num_classes()))


def labels(model: torch.nn.Module) -> tuple[str, ...]:
    """The names of a timm head's `num_classes` outputs: its pretrained_cfg's `label_names` when they are
    one per output, else timm's ImageNet names when the head's size is an ImageNet subset's
    (`timm.data.infer_imagenet_subset`), else "class 0", ...; () without a head."""
    n = int(getattr(model, "num_classes", 0) or 0)
    if n <= 0:
        return ()
    given = (getattr(model, "pretrained_cfg", None) or {}).get("label_names")
    if given is not None and len(given) == n:
        return tuple(str(x) for x in given)
    from timm.data import infer_imagenet_subset

    subset = infer_imagenet_subset(model)
    names = imagenet(subset) if subset is not None else ()
    return names if len(names) == n else numbered(n)
