"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers") from the
q and k one pass kept: how much of each token reaches the query through layers 0..l, with the residual.

    res = attention_maps(model, image, keep_qk=True)
    row = rollout(res)                                   # float32 (N,), sums to 1
    m = rollout_map(res, discard_ratio=0.9, discard="global", head_fusion="max")  # (gh, gw), vit-explain's rule

Each layer's N x N attention is rebuilt a chunk of rows at a time from q and k (never held whole).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import torch

from attention.errors import InputError
from attention.validate import layer_index
from attention.vit.engine.extract import AttentionMaps
from attention.vit.engine.query import Query
from attention.vit.engine.request import DISCARD_RATIO, DISCARD_RULE, FUSION

CHUNK_BYTES = 4 << 20
"""One chunk of every head's float32 scores (H x rows x N) at most this many bytes, by default: the rollout's
working memory is a few times it, whatever N (`tests/vit/engine/test_flow.py`: 4,096 tokens,
2 heads: under 64 MB where one layer's whole attention is 128 MB)."""


def rollout(
    res: AttentionMaps,
    *,
    query: Query | None = None,
    layer: int | None = None,
    head_fusion: Literal["mean", "max", "min"] = FUSION.default,
    discard_ratio: float = DISCARD_RATIO.default,
    discard: Literal["row", "global"] = DISCARD_RULE.default,
    chunk: int | None = None,
) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020) of one query through layers 0..layer.

    Per layer: fuse heads (mean/max/min) into A (N x N), zero its lowest entries (`discard`), add
    the identity for the residual, renormalise rows: A' = (A + I) / rowsum. The query's rollout row
    is e_q^T A'_layer ... A'_0, computed as row-vector x matrix products over chunks of `chunk`
    rows (default: as many as keep one chunk of every head's scores within CHUNK_BYTES): memory
    O(H x chunk x N), O(N) at a fixed chunk; no N x N is ever held.

    discard: which entries `discard_ratio` zeroes.
      "row" (default): in every row, its int(N * discard_ratio) lowest entries; CLS is not spared.
      "global": jacobgil/vit-explain's rule: the int(N * N * discard_ratio) lowest entries of the
        whole fused matrix, except entry (0, 0) (vit-explain drops flat index 0 from the chosen
        indices, so one fewer may go). The cut is found exactly in two extra passes over the rows
        (a radix select on float32 bits); entries equal to the cut all go (vit-explain's topk takes
        an arbitrary share of such ties). vit-explain then takes (A + I) / 2 and divides by
        `a.sum(dim=-1)`, which on its (1, N, N) tensor broadcasts over columns; we renormalise rows,
        so every A' stays row-stochastic.

    res: a result of `attention_maps(..., keep_qk=True)`. query, layer: default res's.
    Returns float32 (N,): the rollout row over all tokens (prefix first); it sums to 1.
    Use `rollout_map` for the (gh, gw) patch map.
    """
    if res.qk is None:
        raise InputError("Rollout needs every layer's q and k: extract with keep_qk=True.")
    head_fusion, discard = FUSION.check(head_fusion), DISCARD_RULE.check(discard)
    discard_ratio = DISCARD_RATIO.check(discard_ratio)
    last = res.layer if layer is None else layer_index(layer, len(res.qk))
    i = res.query_index if query is None else res.index_of(query)
    if i < 0:
        raise InputError("Rollout follows a token of the blocks; the pooling head's query ('pool') is not one.")
    H, N = res.qk[0][0].shape[:2]
    chunk = chunk or max(1, CHUNK_BYTES // (H * N * 4))
    n_drop = int(N * N * discard_ratio) if discard == "global" else int(N * discard_ratio)
    r = torch.zeros(N, dtype=torch.float64)
    r[i] = 1.0
    layers = list(zip(res.qk[: last + 1], res.layer_bias[: last + 1]))
    for (q, k), bias in reversed(layers):  # r <- r A'_l, from the top layer down
        fused = _Fused(q, k, res.scale, head_fusion, chunk, bias)
        cut = fused.global_cut(n_drop) if discard == "global" and n_drop else None
        out = torch.zeros(N, dtype=torch.float64)
        for s, e in fused.spans:
            if not r[s:e].any():
                continue
            f = fused(s, e)  # float32 (c, N)
            if cut is not None:
                drop = f <= cut
                if s == 0:
                    drop[0, 0] = False  # vit-explain spares the first entry, CLS to CLS
                f.masked_fill_(drop, 0.0)
            a = f.double()
            if discard == "row" and n_drop:
                a.scatter_(-1, a.topk(n_drop, dim=-1, largest=False).indices, 0.0)
            a[torch.arange(e - s), torch.arange(s, e)] += 1.0  # residual: + I
            a /= a.sum(-1, keepdim=True)
            out += r[s:e] @ a
        r = out
    return r.float().numpy()


class _Fused:
    """One layer's head-fused attention A (N x N), computed chunk by chunk from q and k (H, N, d) and
    the kernel's additive bias (H or 1, N or 1, N), if any."""

    def __init__(
        self, q: torch.Tensor, k: torch.Tensor, scale: float, fusion: str, chunk: int, bias: torch.Tensor | None = None
    ):
        self.q, self.kt, self.scale, self.fusion, self.bias = q, k.transpose(-2, -1), scale, fusion, bias
        N = q.shape[1]
        self.spans = [(s, min(s + chunk, N)) for s in range(0, N, chunk)]

    def __call__(self, s: int, e: int) -> torch.Tensor:
        """float32 (e - s, N): rows s..e-1 of A (non-negative)."""
        z = (self.q[:, s:e] * self.scale) @ self.kt  # (H, c, N)
        if self.bias is not None:
            z = z + (self.bias[:, s:e] if self.bias.shape[1] > 1 else self.bias)
        a = torch.softmax(z, -1)
        return a.mean(0) if self.fusion == "mean" else a.amax(0) if self.fusion == "max" else a.amin(0)

    def global_cut(self, n: int) -> float:
        """The n-th smallest entry of A (1-based), without holding A (`nth_smallest`)."""
        return nth_smallest(self, self.spans, n)


def nth_smallest(rows: Callable[[int, int], torch.Tensor], spans: list[tuple[int, int]], n: int) -> float:
    """The n-th smallest entry (1-based) of a non-negative float32 matrix given a chunk of rows at a
    time (`rows(s, e)`: rows s..e-1, for each (s, e) of `spans`), without holding it: non-negative
    float32 values order as their bit patterns, so count the high 16 bits, then the low 16 bits of
    the entries in the high bin that holds rank n (two passes over the rows)."""
    prefix, below = -1, 0
    for shift in (16, 0):
        counts = torch.zeros(1 << 16, dtype=torch.int64)
        for s, e in spans:
            bits = rows(s, e).abs().view(torch.int32).flatten()  # abs: -0.0 -> +0.0
            if prefix >= 0:
                bits = bits[(bits >> 16) == prefix]
            counts += torch.bincount(((bits >> shift) & 0xFFFF).long(), minlength=1 << 16)
        cum = counts.cumsum(0)
        b = int(torch.searchsorted(cum, n - below))  # the first bin reaching rank n
        below += int(cum[b - 1]) if b else 0
        prefix = b if prefix < 0 else (prefix << 16) | b
    return float(torch.tensor(prefix, dtype=torch.int32).view(torch.float32))


def rollout_map(res: AttentionMaps, **kwargs) -> np.ndarray:
    """float32 (gh, gw): `rollout(res, **kwargs)` restricted to patch tokens (not renormalised)."""
    return rollout(res, **kwargs)[res.num_prefix_tokens :].reshape(res.grid)
