"""Meta's own ViT classes described (`Backbone`), as torch.hub returns them: DINO
(facebookresearch/dino `VisionTransformer`), DINOv2 (`DinoVisionTransformer`, with and without
registers, block chunks flattened) and DINOv3 (`DinoVisionTransformer` with storage tokens and RoPE).
Recognised by their module layout (`blocks`, `prepare_tokens`/`prepare_tokens_with_masks`), so a copy
of the classes in one's own project is described the same way.

How each is read: DINO's and DINOv2's attention compute `q @ k^T`, softmax, `@ v` explicitly (DINOv2's
MemEffAttention does so without xFormers; with xFormers its kernel is not read and the pass is refused);
DINOv3's calls F.scaled_dot_product_attention from `compute_attention`, which its blocks reach through
`attn.forward_list` (a method, not a module call): the block is the module read for DINOv3.
Tokens: [CLS, registers (DINOv2) / storage tokens (DINOv3), patches]; the last layer's tokens are
`norm`'s output over all tokens (a DINOv3 with untied CLS/patch norms: the last block's output).
Position embeddings are resampled by the model's own `interpolate_pos_encoding` (DINO, DINOv2) or RoPE
(DINOv3). Feeding: DINO's visualize_attention.py crop (top-left, 480 px) for DINO and DINOv2, DINOv3's
notebooks' resize (768 px high) for DINOv3, ImageNet normalisation (`models.FAMILIES`).
"""

from __future__ import annotations

import torch

from attention.errors import UnsupportedModelError
from attention.vit.backbone.spec import IMAGENET_MEAN, IMAGENET_STD, Backbone, check_square, served_rules


def flat_blocks(blocks) -> list[torch.nn.Module]:
    """DINOv2's blocks in order, its block chunks (`BlockChunk`: Identity padding then blocks) flattened."""
    out = []
    for b in blocks:
        if isinstance(b, torch.nn.ModuleList):
            out += [m for m in b if not isinstance(m, torch.nn.Identity)]
        else:
            out.append(b)
    return out


def version(model: torch.nn.Module) -> str:
    """ "dino", "dinov2" or "dinov3", by layout."""
    if hasattr(model, "n_storage_tokens") or hasattr(model, "rope_embed"):
        return "dinov3"
    if hasattr(model, "prepare_tokens_with_masks"):
        return "dinov2"
    return "dino"


FEED = {"dino": ("top-left", 480), "dinov2": ("top-left", 480), "dinov3": ("resize", 768)}


def describe(model: torch.nn.Module) -> Backbone:
    """The Backbone of Meta's DINO/DINOv2/DINOv3 ViT; UnsupportedModelError when the layout is not theirs."""
    name = type(model).__name__
    if not hasattr(model, "blocks") or not hasattr(model, "norm") or not hasattr(model, "cls_token"):
        raise UnsupportedModelError(
            f"{name} does not have the layout of Meta's DINO ViTs (`blocks`, `norm`, `cls_token`)."
        )
    v = version(model)
    blocks = flat_blocks(model.blocks)
    if not blocks:
        raise UnsupportedModelError(f"{name} has no blocks.")
    if v == "dinov3":
        n_reg = int(getattr(model, "n_storage_tokens", 0) or 0)
        attention = blocks  # their attention runs through attn.forward_list: a method, no module call
        untied = bool(getattr(model, "untie_cls_and_patch_norms", False))
        final = blocks[-1] if untied else model.norm
    else:
        reg = getattr(model, "register_tokens", None)
        n_reg = int(reg.shape[1]) if reg is not None else 0
        attention = [b.attn for b in blocks]
        final = model.norm
    pe = model.patch_embed
    width = int(getattr(model, "embed_dim", 0) or model.cls_token.shape[-1])
    img = getattr(pe, "img_size", 224)
    img = (img, img) if isinstance(img, int) else tuple(int(s) for s in img)
    crop, auto = FEED[v]

    def run(x: torch.Tensor, head: bool = False):
        if v == "dino":
            return model(x)  # prepare_tokens, blocks, norm over all tokens, then x[:, 0]
        return model.forward_features(x)

    attn0 = blocks[0].attn
    return Backbone(
        library=v,
        model=model,
        blocks=tuple(blocks),
        attention=tuple(attention),
        final=final,
        prefix=("cls", *(f"reg{i}" for i in range(n_reg))),
        patch=check_square(name, getattr(pe, "patch_size", getattr(model, "patch_size", 16))),
        heads=int(attn0.num_heads),
        width=width,
        run=run,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        input_size=img,  # type: ignore[arg-type]
        **served_rules(model, crop=crop, resize="bilinear", auto_resolution=auto),
    )
