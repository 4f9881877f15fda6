"""The price of one text relevance job (GFLOP) at a token count and a number of prompts, for a server's compute
budget: fitted to measured times, not assumed (`python -m bench.bench_text_relevance --factor` prints the
measured factor over a forward beside the priced one).

A job is its forward, a backward (`cost.BACKWARD` forwards) and, per further prompt, its share of the batched
backward (EXTRA_PROMPT_BACKWARD forwards: autograd batches the prompts, so it is less than a whole backward);
then per layer the rows of A (QK^T: 2 N^2 D) and of each prompt's dA = dO V^T (2 N^2 D), with the elementwise
work on every head's N x N entries per prompt (softmax, dA * A, the positive part, the head mean, the row
product: ENTRY_FLOP flop-equivalents per entry). LeGrad's two layers and the similarity are small beside them.
Fitted on CPU, 1 thread, a loaded 2-core machine: CLIP ViT-B/16 (random weights) at 196 and 784 patch tokens,
digit_clip at 196, 784 and 3,136, 1 and 8 prompts, two runs (measured 2.1x to 46.7x a forward; the constants
set so that the price is at or above nearly every measured factor where a job is large enough to matter: the
table in docs/text-relevance.md).
"""

from __future__ import annotations

import torch

from attention.vit.engine.cost import BACKWARD, dims, forward_gflop

EXTRA_PROMPT_BACKWARD = 1.5
ENTRY_FLOP = 250.0
OPEN_ENTRY_FLOP = 40.0  # softmax (exp, sum, divide) of up to two rows, the Gaussian's add: flop-equivalents


def text_relevance_gflop(
    trunk: torch.nn.Module, tokens: int, prompts: int, gradient: bool = True, open_rules: int = 0
) -> float:
    """Estimated GFLOP of one text relevance job of the image tower `trunk` (a timm ViT) over `tokens` patch
    tokens (prefix added) for `prompts` prompts (at least 1): with `gradient`, the gradient rules' pass (see
    above); else one forward; plus, per open-vocabulary rule, its attention rows (q q^T or k k^T and A v: up to
    three N^2 D products, OPEN_ENTRY_FLOP per entry of every head) and the patches through the head."""
    L, d, _, P, _ = dims(trunk)
    n, k = tokens + P, max(1, prompts)
    heads = int(getattr(trunk.blocks[0].attn, "num_heads", 1))
    total = forward_gflop(trunk, tokens)
    if gradient:
        passes = 1 + BACKWARD + EXTRA_PROMPT_BACKWARD * (k - 1)
        rows = L * n * n * (2 * d * (1 + k) + ENTRY_FLOP * heads * k)
        total = passes * total + rows / 1e9
    return total + open_rules * (n * n * (6 * d + OPEN_ENTRY_FLOP * heads) + 2 * n * 8 * d * d) / 1e9
