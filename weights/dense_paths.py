"""The patch tokens each forward-only rule reads, differentiable, for `train_digit_clip`'s dense loss: the same
rule code the app runs (`attention.vit.text.openvocab.rule_rows` and `last_block_tokens`), one image at a time,
on the last block's q, k, v computed from its input tokens.

    final, block_in = tokens_and_block_in(trunk, img)          # (B, N, D) each
    each = rule_tokens(trunk, block_in[b], "naclip", grid)    # (Np, D) after the final norm, as the app reads them
"""

from __future__ import annotations

import torch

from attention.vit.text.openvocab import RuleOptions, last_block_tokens, rule_rows


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
