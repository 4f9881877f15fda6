"""Attention out of a timm ViT: the query token's row in every layer from one forward pass.

Each timm attention block calls the fused `F.scaled_dot_product_attention`, so the softmax never
materialises. We leave that path untouched: the kernel hook (`capture`) sees the q and k the block
hands the kernel (after q/k norms and RoPE), its additive bias and scale (no second qkv projection),
and the engine (`rows`) computes only the query's row softmax(q_i k^T * scale + bias_i),
O(heads x N) per layer instead of heads x N x N. The block's output is unchanged. Blocks it cannot
read exactly are refused (`capture.check_supported`, UnsupportedModelError naming the block class).

    res = attention_maps(model, image, layer=-1, query="cls")  # or "reg0", "pool", (row, col): query.tokens_of
    res.maps          # (heads, gh, gw): the chosen layer's row over patch tokens
    res.layers        # (layers, heads, gh, gw): every layer, same pass
    res.scores        # (layers, heads, N): raw scores before softmax, all N tokens

With `keep_qk=True` the pass also keeps each layer's q, k and v (O(layers x heads x N x d)),
so other queries (`res.requery((r, c))`) and rollout (`flow.rollout(res)`) need no new forward.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from PIL import Image

from attention.errors import InputError
from attention.images import MAX_TOKENS, ImageSource
from attention.shows import Shows
from attention.validate import layer_index
from attention.vit.backbone import describe
from attention.vit.engine.preprocess import prepare
from attention.vit.engine.query import Query
from attention.vit.engine.query import default as default_query
from attention.vit.engine.query import index as query_index_of
from attention.vit.engine.query import parse as parse_query
from attention.vit.engine.request import RESOLUTION, THRESHOLD
from attention.vit.engine.rows import batch_scores, on_cpu, query_rows, run_pass, sample_bias

__all__ = ["AttentionMaps", "attention_maps", "query_rows", "query_scores", "threshold_masks"]


@dataclass
class AttentionMaps(Shows):
    """Attention of one query token, for every layer of one forward pass.

    L layers, H heads, N = P + gh*gw tokens (P prefix tokens: CLS, registers). For the query "pool"
    (the attention-pooling head's, `query`), L = 1: the pool's one attention over the last layer's tokens.
    """

    scores: np.ndarray  # float32 (L, H, N): q_i . k_j * scale, before softmax
    weights: np.ndarray  # float32 (L, H, N): softmax of scores (rows sum to 1)
    grid: tuple[int, int]  # (gh, gw) patch grid
    image: Image.Image  # the preprocessed RGB image the grid aligns to, (gw*p, gh*p) px
    patch_size: int
    num_prefix_tokens: int  # P
    layer: int  # the selected layer, 0..L-1
    query: Query  # a token name ("cls", "reg0", "pool", ...: `query.tokens_of`) or (row, col) on the grid
    seconds: float = 0.0  # wall time of the forward pass with extraction
    qk: list[tuple[torch.Tensor, torch.Tensor]] | None = field(default=None, repr=False)  # per layer (H, N, d) each
    scale: float = 1.0  # the kernel's softmax scale (head_dim ** -0.5)
    bias: list[torch.Tensor | None] | None = field(default=None, repr=False)  # with qk: per layer the kernel's
    # additive bias (relative position: BEiT, relpos ViTs), float32 (H or 1, N or 1, N), None where it had none
    tokens: tuple[str, ...] = ("cls",)  # names of the P prefix tokens in order (`query.prefix_tokens`)
    pool: bool = False  # the model pools by attention: the query "pool" exists
    blocks: int = 0  # the model's layers (L, but for the pool's query, whose result has one); 0 = L
    pool_qk: tuple[torch.Tensor, torch.Tensor, float] | None = field(default=None, repr=False)  # with qk: the
    # pool's q (H, 1, d), k (H, N, d), scale
    v: list[torch.Tensor] | None = field(default=None, repr=False)  # with qk: per layer the kernel's values
    # float32 (H, N, dv), what each row's output mixes (`stepwise.explain_row`)

    @property
    def layers(self) -> np.ndarray:
        """float32 (L, H, gh, gw): each layer's query row over patch tokens (not renormalised)."""
        L, H, _ = self.weights.shape
        return self.weights[:, :, self.num_prefix_tokens :].reshape(L, H, *self.grid)

    @property
    def maps(self) -> np.ndarray:
        """float32 (H, gh, gw): the selected layer's query row over patch tokens."""
        return self.layers[self.layer]

    @property
    def mean(self) -> np.ndarray:
        """float32 (gh, gw): the selected layer's map averaged over heads."""
        return self.maps.mean(0)

    @property
    def prefix_share(self) -> np.ndarray:
        """float32 (L, H): share of each row's attention on prefix tokens (CLS, registers)."""
        return self.weights[:, :, : self.num_prefix_tokens].sum(-1)

    @property
    def query_index(self) -> int:
        """Token index of the query (0 for CLS; -1 for the pool's query, not in the sequence)."""
        return self.index_of(self.query)

    def arrays(self, threshold: float = THRESHOLD.default) -> dict[str, np.ndarray]:
        """The raw arrays, for files: maps (H, gh, gw), mean (gh, gw), layers (L, H, gh, gw),
        scores and weights (L, H, N), prefix_share (L, H) float32; masks bool (H, gh, gw)
        (`threshold_masks`); image uint8 (gh*p, gw*p, 3); query (2,) int32 (-1, -1 = CLS);
        layer, patch_size, num_prefix_tokens, threshold as scalars."""
        return {
            "maps": self.maps,
            "mean": self.mean,
            "layers": self.layers,
            "scores": self.scores,
            "weights": self.weights,
            "prefix_share": self.prefix_share,
            "masks": threshold_masks(self.maps, threshold),
            "image": np.asarray(self.image, dtype=np.uint8),
            "query": np.array((-1, -1) if isinstance(self.query, str) else self.query, np.int32),
            "query_token": np.array(self.query if isinstance(self.query, str) else ""),
            "layer": np.array(self.layer, np.int32),
            "patch_size": np.array(self.patch_size, np.int32),
            "num_prefix_tokens": np.array(self.num_prefix_tokens, np.int32),
            "threshold": np.array(threshold, np.float32),
        }

    def at_layer(self, layer: int) -> AttentionMaps:
        """The same pass with another selected layer (no new forward). The pool's query has one
        attention, after the last layer: for it the layer does not apply (`self` is returned)."""
        if self.query == "pool":
            return self
        return replace(self, layer=layer_index(layer, self.weights.shape[0]))

    @property
    def depth(self) -> int:
        """The model's number of layers (the blocks), whatever the query."""
        return self.blocks or self.weights.shape[0]

    @property
    def layer_bias(self) -> list[torch.Tensor | None]:
        """Per layer the kernel's additive bias (H or 1, N or 1, N), or None (no bias, or not kept)."""
        return self.bias if self.bias is not None else [None] * self.depth

    def requery(self, query: Query) -> AttentionMaps:
        """The same pass with another query token, computed from the kept q and k (no new forward).

        Needs `keep_qk=True` at extraction.
        """
        if self.qk is None:
            raise InputError(
                "This result kept no q/k; extract with keep_qk=True to change the query without a new pass."
            )
        q = parse_query(query)
        i = self.index_of(q)
        if i < 0:
            pq, pk, pscale = self.pool_qk  # type: ignore[misc]
            s = _pad_prefix(query_scores(pq, pk, 0, pscale), self.weights.shape[-1] - pk.shape[1])[None]  # (1, H, N)
            layer = 0
        else:
            s = torch.stack([query_scores(q_, k, i, self.scale, m) for (q_, k), m in zip(self.qk, self.layer_bias)])
            layer = self.layer if self.query != "pool" else len(self.qk) - 1
        return replace(self, query=q, scores=s.numpy(), weights=torch.softmax(s, -1).numpy(), layer=layer)

    def index_of(self, query: Query) -> int:
        """The token index of `query` in this pass's sequence (-1 for "pool"); InputError for a token
        the model lacks (naming what it has) or a patch off the grid."""
        return query_index_of(query, self.grid, self.tokens, self.pool)


def _pad_prefix(s: torch.Tensor, P: int) -> torch.Tensor:
    """Pool scores (H, N - P) over patches only (a pool that skips the P prefix tokens) padded with -inf."""
    return s if P == 0 else torch.cat([torch.full((*s.shape[:-1], P), float("-inf")), s], -1)


def token_index(
    query: Query | None, grid: tuple[int, int], num_prefix_tokens: int, tokens: tuple[str, ...] | None = None
) -> int:
    """Token index of `query` (None: the model's own, `query.default`). `tokens`: the model's prefix
    names (`query.prefix_tokens(model)`); without them the prefix is taken to be CLS then registers,
    which is wrong for register-only models: pass them. InputError for a token the model lacks."""
    names = (
        tokens if tokens is not None else ("cls", *(f"reg{i}" for i in range(num_prefix_tokens)))[:num_prefix_tokens]
    )
    q = default_query(names, grid) if query is None else query
    return query_index_of(q, grid, names)


def norm_query(query: Query | None) -> Query | None:
    """One spelling per query (`query.parse`): a token name, or (row, col) ints; None stays None
    (the model's own token)."""
    return None if query is None else parse_query(query)


def query_scores(
    q: torch.Tensor, k: torch.Tensor, i: int, scale: float, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Raw scores of token i against all tokens, in fp32. q, k: (H, N, d) -> (H, N): the pass's own
    rule (`rows.batch_scores`), scale * (q_i @ k^T) (+ bias_i, the kernel's additive mask (H or 1, N or 1, N))."""
    return batch_scores(q[None], k[None], i, scale, None if bias is None else bias[None])[0]


def attention_maps(
    model: torch.nn.Module,
    image: ImageSource,
    *,
    layer: int = -1,
    query: Query | None = None,
    resolution: int | str | None = RESOLUTION,
    max_tokens: int = MAX_TOKENS,
    keep_qk: bool = False,
    max_gflop: float | None = None,
) -> AttentionMaps:
    """Per-head attention of `query` in every layer of `model` on `image`, from one forward pass.

    model: a model `backbone.describe` describes: a timm ViT (VisionTransformer, DeiT, Eva: EVA-02,
    DINOv3, RoPE ViTs; BEiT, relpos ViTs (fed their trained size)), a transformers Dinov2Model,
    Dinov2WithRegistersModel, DINOv3ViTModel, ViTModel, DeiTModel, CLIPVisionModel or SiglipVisionModel,
    Meta's DINO/DINOv2/DINOv3 classes, an open_clip visual tower, a torchvision VisionTransformer;
    others are refused: UnsupportedModelError naming the class and the described families.
    image: path, bytes, PIL image (any mode; EXIF honoured) or uint8 array (H, W[, C]).
    resolution: shorter side in px, "auto" (480 for DINO, else the trained size), None/"native"
    (only cropped to the patch grid) or "dino480"
    (squashed to 480 x 480 as DINO's visualize_attention.py). The crop to the patch grid is the
    model's family's (`model.crop_rule`, set by `load_vit`: top-left for DINO, else centre).
    query: a token the model has (`query.tokens_of`: "cls", "dist", "reg0".., "pool") or (row, col) of a
    patch; None: the model's first (`query.default`: CLS, else the pool's, else the centre patch).
    layer: selected layer (negative counts from the end; not used by "pool").
    max_gflop: refuse at once (BudgetError naming the largest resolution that fits) when the pass's
    estimated cost (`attention.vit.engine.cost.forward_gflop`) is over it; None = no compute budget.
    Fused attention stays on and the model's outputs are unchanged.

    Thread-safe: many threads may call it at once on one shared model; each call records only
    its own pass (hooks hand q and k to a recorder bound to the calling context).
    """
    bb = describe(model)
    x, shown, grid = prepare(model, image, resolution, max_tokens, max_gflop)
    patch = bb.patch_size
    P, names, pool = bb.num_prefix_tokens, bb.prefix, bb.pool
    q = default_query((*names, *(["pool"] if pool else [])), grid) if query is None else parse_query(query)
    i = query_index_of(q, grid, names, pool)
    n_layers = bb.depth
    layer = layer_index(layer, n_layers)
    t0 = time.perf_counter()
    with torch.inference_mode():
        rec = run_pass(model, x, max(i, 0), keep_qk, pool=pool and (i < 0 or keep_qk))
    if i < 0:  # the pool's one attention, after the last layer
        row = rec.pool[0][0].float().cpu()  # type: ignore[index]
        scores, layer = _pad_prefix(row, P + grid[0] * grid[1] - row.shape[-1])[None], 0
    else:
        scores = rec.rows_cpu()[0]
    seconds = time.perf_counter() - t0
    pool_qk = None
    if keep_qk and rec.pool is not None:
        pool_qk = (on_cpu(rec.pool[1][0]), on_cpu(rec.pool[2][0]), rec.pool[3])
    return AttentionMaps(
        scores=scores.numpy(),
        weights=torch.softmax(scores, -1).numpy(),
        grid=grid,
        image=shown,
        patch_size=patch,
        num_prefix_tokens=P,
        layer=layer,
        query=q,
        seconds=seconds,
        qk=[(on_cpu(q_[0]), on_cpu(k[0])) for q_, k in rec.qk] if keep_qk else None,
        v=[on_cpu(v_[0]) for v_ in rec.v] if keep_qk else None,
        scale=rec.scale[0],
        bias=sample_bias(rec.bias, 0) if keep_qk and any(m is not None for m in rec.bias) else None,
        tokens=names,
        pool=pool,
        blocks=n_layers,
        pool_qk=pool_qk,
    )


def threshold_masks(maps: np.ndarray, threshold: float = THRESHOLD.default) -> np.ndarray:
    """DINO's masks: per head, the smallest set of patches holding >= `threshold` of its mass.

    maps: (H, gh, gw) non-negative -> bool (H, gh, gw). threshold in (0, 1].
    """
    threshold = THRESHOLD.check(threshold)
    H = maps.shape[0]
    flat = maps.reshape(H, -1).astype(np.float64)
    order = np.argsort(-flat, axis=1, kind="stable")  # descending
    val = np.take_along_axis(flat, order, 1)
    cum = np.cumsum(val, 1) / np.maximum(val.sum(1, keepdims=True), 1e-30)
    keep_sorted = np.concatenate([np.ones((H, 1), bool), cum[:, :-1] < threshold - 1e-12], 1)
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, 1)
    return keep.reshape(maps.shape)
