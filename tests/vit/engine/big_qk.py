"""A pass's kept q and k at a size whose whole attention matrices exceed a memory budget, made from a seed:
what `flow.rollout` reads of a pass, without a model (`test_flow`'s streamed-memory test; its subprocess imports
only this and the engine)."""

from __future__ import annotations

import torch


class Kept:
    """What `rollout` reads of a pass that kept q and k: (q, k) per layer (H, N, d), the scale, the query."""

    def __init__(self, qk, scale):
        self.qk, self.scale, self.layer_bias = qk, scale, [None] * len(qk)
        self.layer, self.query_index = len(qk) - 1, 0


def big_qk(N: int = 4096, H: int = 2, d: int = 8, L: int = 2, seed: int = 0):
    """([(q, k)] * L of float32 (H, N, d), the scale d^-0.5), the same for the same arguments."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(H, N, d, generator=g), torch.randn(H, N, d, generator=g)) for _ in range(L)], d**-0.5
