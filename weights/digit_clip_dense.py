"""`train_digit_clip`'s dense losses, and the patch tokens each forward-only rule reads, differentiable: the
same rule code the app runs (`attention.vit.text.openvocab.rule_rows` and `last_block_tokens`), one image at a
time, on the last block's q, k, v computed from its input tokens.

    final, block_in = tokens_and_block_in(trunk, img)          # (B, N, D) each
    each = rule_tokens(trunk, block_in[b], "naclip", grid)    # (Np, D) after the final norm, as the app reads them
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attention.vit.text.openvocab import RuleOptions, last_block_tokens, rule_rows

BLANK_WEIGHT = 0.5  # the blank patches' share of the dense loss
DENSE_SCALE = 10.0  # the dense loss's fixed logit scale (the model's own is learnt for the caption loss)
PRESENT_SCALE = 30.0  # the present loss's fixed logit scale: a cosine margin of 0.1 is a logit margin of 3


def tokens_and_block_in(trunk: torch.nn.Module, img: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A timm ViT's forward on img (B, C, H, W), as `forward_features`: (final tokens after the norm, the last
    block's input tokens), both (B, N, D)."""
    x = trunk.norm_pre(trunk.patch_drop(trunk._pos_embed(trunk.patch_embed(img))))
    block_in = trunk.blocks[:-1](x)
    return trunk.norm(trunk.blocks[-1](block_in)), block_in


def kernel_of(trunk: torch.nn.Module, block_in: torch.Tensor) -> tuple:
    """(q, k, v, None, scale) of the last block's attention on block_in (N, D), q k v (H, N, d): what the engine
    captures from the kernel (plain timm attention: q_norm, k_norm, no mask)."""
    attn = trunk.blocks[-1].attn
    n = block_in.shape[0]
    qkv = attn.qkv(trunk.blocks[-1].norm1(block_in)).reshape(n, 3, attn.num_heads, -1).permute(1, 2, 0, 3)
    q, k, v = qkv.unbind(0)
    return attn.q_norm(q), attn.k_norm(k), v, None, attn.scale


def rule_tokens(trunk: torch.nn.Module, block_in: torch.Tensor, rule: str, grid: tuple[int, int]) -> torch.Tensor:
    """The patch tokens (Np, D) that `rule` (maskclip, sclip, clearclip, naclip; the papers' options) makes
    from the last block's input block_in (N, D) on a (gh, gw) grid, after the final norm."""
    opts, prefix = RuleOptions(), int(trunk.num_prefix_tokens)
    out = rule_rows(rule, kernel_of(trunk, block_in), grid, prefix, opts)
    return last_block_tokens(trunk, block_in, out, prefix, opts.keeps_residual(rule))


def dense_loss(cosines: torch.Tensor, threshold: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """cosines (n, Np, 10) of each patch with the captions, threshold () a cosine, labels (n, Np) (-1 blank):
    cross-entropy over the ten captions and "background" (the threshold) at DENSE_SCALE; an ink patch's target
    is its digit, a blank one's background; the blank patches' mean weighted BLANK_WEIGHT."""
    z = DENSE_SCALE * torch.cat([cosines, threshold.expand(*cosines.shape[:2], 1)], -1)
    target = torch.where(labels >= 0, labels, torch.full_like(labels, 10))
    nll = F.cross_entropy(z.flatten(0, 1), target.flatten(), reduction="none")
    inked = labels.flatten() >= 0
    ink = nll[inked].mean() if inked.any() else nll.sum() * 0
    blank = nll[~inked].mean() if (~inked).any() else nll.sum() * 0
    return ink + BLANK_WEIGHT * blank


def present_loss(cosines: torch.Tensor, labels: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """cosines (n, Np, 10), labels (n, Np) (-1 blank), present (n, 10) bool: each ink patch's digit against the
    other digits on its canvas only, cross-entropy at PRESENT_SCALE (what the segmentation asks: the patch's own
    prompt clearly over the other prompts of the image). A patch token that carries the whole image's digits
    (mixed by attention) satisfies the dense loss's absent captions but not this one. 0 without ink."""
    z = PRESENT_SCALE * cosines.masked_fill(~present[:, None, :], float("-inf"))
    inked = labels >= 0
    if not inked.any():
        return cosines.sum() * 0
    return F.cross_entropy(z[inked], labels[inked])
