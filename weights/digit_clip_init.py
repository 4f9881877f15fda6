"""Where `train_digit_clip` starts: mnist_vit's (or a digit_clip's) weights renamed for a mean-pooled tower, and
mnist_vit's 7 x 7 position embedding laid out for a canvas of several 28 px cells."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def tiled_pos(pos: torch.Tensor, prefix: int, reps: int) -> torch.Tensor:
    """mnist_vit's position embedding (1, prefix + g * g, D) for a grid `reps` times as wide, (1, prefix +
    (reps g)^2, D): each 28 px cell gets the digit's own code (tiled), plus half the code resampled over the
    whole grid, less its mean (which cell): a canvas's digit starts with the positions mnist_vit learnt."""
    if reps == 1:
        return pos
    cls, grid = pos[:, :prefix], pos[:, prefix:]
    g, d = math.isqrt(grid.shape[1]), grid.shape[-1]
    grid = grid.reshape(1, g, g, d).permute(0, 3, 1, 2)
    smooth = F.interpolate(grid, scale_factor=reps, mode="bicubic", align_corners=False)
    out = grid.repeat(1, 1, reps, reps) + 0.5 * (smooth - grid.mean((2, 3), keepdim=True))
    return torch.cat([cls, out.permute(0, 2, 3, 1).reshape(1, -1, d)], 1)


def pooled_names(state: dict, model: torch.nn.Module) -> dict:
    """`state` with its final norm's tensors renamed to `model`'s: a class-token tower's `norm` is a mean-pooled
    one's `fc_norm` (timm puts the norm after the pool), so a token-pooled tower starts a mean-pooled one."""
    have = set(model.state_dict())
    out = {}
    for k, v in state.items():
        alt = k.replace("norm.", "fc_norm.") if k.endswith(("norm.weight", "norm.bias")) and "blocks" not in k else k
        out[alt if k not in have and alt in have else k] = v
    return out
