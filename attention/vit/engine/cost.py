"""What one forward pass costs, estimated before it runs, and the budget that refuses it up front.

Attention is quadratic in tokens, the rest linear: one ViT block on N tokens of width D with an
MLP of width M costs about 2N(4D^2 + 2DM) + 4N^2 D floating-point operations (q/k/v/out
projections, the MLP, then QK^T and the weighted sum of V). Summed over the blocks plus the patch
embedding, this predicts the forward time within a factor of about two on one device
(bench/bench_concurrency.py prints measured GFLOP/s), which is all a budget needs.

    gflop = forward_gflop(model, tokens=900)
    check_budget(model, (720, 480), 480, max_gflop=400)   # raises BudgetError when over
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attention.errors import BudgetError
from attention.images import MAX_TOKENS, largest_resolution_where, patch_tokens
from attention.vit.backbone import describe
from attention.vit.engine.request import DISCARD_RULE


def dims(model: torch.nn.Module) -> tuple[int, int, int, int, int]:
    """(layers L, width D, MLP width M, prefix tokens P, patch size p) of a timm ViT. M is the width of
    a plain two-layer MLP with the same multiply-adds: its Linear layers' weights / 2D (a SwiGLU's three
    layers, DINOv3 S+'s and larger: 1.5x its hidden width); 4D when it has none."""
    bb = describe(model)
    return bb.depth, bb.width, bb.mlp_width, bb.num_prefix_tokens, bb.patch_size


def forward_gflop(model: torch.nn.Module, tokens: int) -> float:
    """Estimated GFLOP of one forward pass of `model` over `tokens` patch tokens (prefix added)."""
    L, d, m, P, p = dims(model)
    n = tokens + P
    block = 2 * n * (4 * d * d + 2 * d * m) + 4 * n * n * d
    embed = 2 * tokens * 3 * p * p * d
    return (L * block + embed) / 1e9


def largest_resolution(
    model: torch.nn.Module,
    size: tuple[int, int],
    max_gflop: float,
    max_tokens: int | None = None,
    *,
    gflop: Callable[[torch.nn.Module, int], float] | None = None,
) -> int | None:
    """The largest resolution (shorter side, px) at which `size` stays within `max_gflop` (and
    `max_tokens`), or None when not even one patch per side fits. Binary search: cost grows with
    the resolution. gflop: the price of one job at a token count (default `forward_gflop`)."""
    gflop = gflop or forward_gflop
    bb = describe(model)
    p, crop, resize = dims(model)[4], bb.crop, bb.resize

    def fits(r: int) -> bool:
        t = patch_tokens(size, p, r, crop, resize)
        return gflop(model, t) <= max_gflop and (max_tokens is None or t <= max_tokens)

    return largest_resolution_where(fits, p)


def check_budget(
    model: torch.nn.Module,
    size: tuple[int, int],
    resolution: int | None,
    max_gflop: float,
    *,
    name: str = "this model",
    device: str = "cpu",
    max_tokens: int = MAX_TOKENS,
    gflop: Callable[[torch.nn.Module, int], float] | None = None,
    job: str = "pass",
) -> float:
    """Raise BudgetError when a pass of an image of `size` (W, H) at `resolution` would cost over
    `max_gflop`; the message names the largest resolution accepted, under the compute budget and
    the token cap `max_tokens` both (one number: the next try at it passes both). Returns the
    estimate (GFLOP). gflop, job: the price of the job at a token count (default `forward_gflop`) and its
    name in the message ("pass"; `relevance_gflop`, "relevance job")."""
    gflop = gflop or forward_gflop
    p = dims(model)[4]
    bb = describe(model)
    tokens = patch_tokens(size, p, resolution, bb.crop, bb.resize)
    cost = gflop(model, tokens)
    if cost <= max_gflop:
        return cost
    best = largest_resolution(model, size, max_gflop, max_tokens, gflop=gflop)
    at = (
        "at its native size"
        if resolution is None
        else "at dino480 (480x480)"
        if resolution == "dino480"
        else f"at {resolution} px"
    )
    fit = (
        f"The largest resolution accepted for this {size[0]}x{size[1]} image is {best} px; accepted: a "
        f"resolution up to {best} px, or 'auto'."
        if best
        else "No resolution of this image fits; try a smaller model."
    )
    raise BudgetError(
        f"This image {at} makes {tokens:,} patch tokens: about {cost:,.0f} GFLOP through {name}, over this "
        f"server's budget of {max_gflop:,.0f} GFLOP per {job} on {device.split(':')[0]}. {fit}"
    )


# A relevance job (attention.vit.relevance) beyond its forward: a backward (about twice a forward's
# multiply-adds) and, per layer, the rows of A and dA rebuilt chunk by chunk from q, k, v and dO (QK^T and
# dO V^T again: 4 N^2 D), then softmax, A * dA, grad-rollout's cut (a selection over all N^2 entries) and the
# row products: elementwise work on every head's N x N entries that no matmul hides. ENTRY_FLOP is that
# elementwise work in flop-equivalents per entry, fitted to measured times (bench/bench_relevance_factor.py:
# relevance / forward at several token counts, mnist_vit and ViT-S/16 on CPU; see docs/admission.md).
BACKWARD = 2.0
ENTRY_FLOP = 1300.0


def relevance_gflop(model: torch.nn.Module, tokens: int) -> float:
    """Estimated GFLOP of one relevance job of `model` over `tokens` patch tokens (prefix added): its forward,
    its backward and the rebuilt rows of every layer (see ENTRY_FLOP). The ratio to `forward_gflop` grows
    with the tokens: the rows are quadratic where most of a forward is linear."""
    L, d, _, P, _ = dims(model)
    n = tokens + P
    heads = int(getattr(model.blocks[0].attn, "num_heads", 1))
    rows = L * (4 * n * n * d + ENTRY_FLOP * heads * n * n)
    return (1 + BACKWARD) * forward_gflop(model, tokens) + rows / 1e9


# Attention rollout (attention.vit.engine.flow) over layers 0..l of a kept pass: per layer, every head's N x N
# scores rebuilt from q and k chunk by chunk (QK^T: 2 N^2 D; three times with vit-explain's whole-matrix discard,
# whose cut takes two more passes over the rows), then softmax, the heads' fusion, the discard and the row
# products: elementwise work on every head's entries. ROLLOUT_ENTRY_FLOP is that work in flop-equivalents per
# head entry, by discard rule ("none": no discard), fitted to measured CPU time against a forward's GFLOP/s
# (ViT-B/16 at 512 px, 1,025 tokens, one torch thread: 87 GFLOP/s forward; rollout 0.95 s, row discard 0.9
# 1.91 s, global discard 0.9 2.51 s: `flow.rollout` on random q and k of that shape, timed with time.process_time).
ROLLOUT_ENTRY_FLOP = {"none": 420.0, "row": 970.0, "global": 1320.0}


def rollout_gflop(
    layers: int, heads: int, tokens: int, width: int, discard: str = DISCARD_RULE.default, ratio: float = 0.0
) -> float:
    """Estimated GFLOP of one attention rollout through `layers` layers of `heads` heads over `tokens` tokens
    (prefix included) of width `width` (heads x head dim), with `flow.rollout`'s discard rule ("row",
    "global") and discard_ratio `ratio` (0: nothing discarded). Quadratic in the tokens, linear in the layers."""
    rule = "none" if not ratio else discard
    passes = 3 if rule == "global" else 1
    n2 = float(tokens) * tokens
    return layers * (passes * 2 * n2 * width + ROLLOUT_ENTRY_FLOP[rule] * heads * n2) / 1e9
