"""Attention out of a timm ViT: the query token's row in every layer from one forward pass.

Each timm `Attention` block computes `q, k = q_norm(q), k_norm(k)` and then calls the fused
`F.scaled_dot_product_attention`, so the softmax never materialises. We leave that path
untouched: forward hooks on `q_norm` and `k_norm` see the q and k the block already computed
(no second qkv projection), and compute only the query's row softmax(q_i k^T * scale),
O(heads x N) per layer instead of heads x N x N. The block's output is unchanged.

    res = attention_maps(model, image, layer=-1, query="cls")
    res.maps          # (heads, gh, gw): the chosen layer's row over patch tokens
    res.layers        # (layers, heads, gh, gw): every layer, same pass
    res.scores        # (layers, heads, N): raw scores before softmax, all N tokens

With `keep_qk=True` the pass also keeps each layer's q and k (O(layers x heads x N x d)),
so other queries (`res.requery((r, c))`) and rollout (`flow.rollout(res)`) need no new forward.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import torch
from PIL import Image

from attention.errors import InputError, UnsupportedModelError, as_whole
from attention.images import MAX_TOKENS, ImageSource, check_resolution, load_image, to_tensor
from attention.vit.capture import Recorder, check_supported, recording
from attention.vit.cost import check_budget
from attention.vit.models import default_resolution

Query = Literal["cls"] | tuple[int, int]


@dataclass
class AttentionMaps:
    """Attention of one query token, for every layer of one forward pass.

    L layers, H heads, N = P + gh*gw tokens (P prefix tokens: CLS, registers).
    """

    scores: np.ndarray  # float32 (L, H, N): q_i . k_j * scale, before softmax
    weights: np.ndarray  # float32 (L, H, N): softmax of scores (rows sum to 1)
    grid: tuple[int, int]  # (gh, gw) patch grid
    image: Image.Image  # the preprocessed RGB image the grid aligns to, (gw*p, gh*p) px
    patch_size: int
    num_prefix_tokens: int  # P
    layer: int  # the selected layer, 0..L-1
    query: Query  # "cls" or (row, col) on the grid
    seconds: float = 0.0  # wall time of the forward pass with extraction
    qk: list[tuple[torch.Tensor, torch.Tensor]] | None = field(default=None, repr=False)  # per layer (H, N, d) each
    scale: float = 1.0  # the kernel's softmax scale (head_dim ** -0.5)
    bias: list[torch.Tensor | None] | None = field(default=None, repr=False)  # with qk: per layer the kernel's
    # additive bias (relative position: BEiT, relpos ViTs), float32 (H or 1, N or 1, N), None where it had none

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
        """Token index of the query (0 for CLS)."""
        return token_index(self.query, self.grid, self.num_prefix_tokens)

    def arrays(self, threshold: float = 0.6) -> dict[str, np.ndarray]:
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
            "layer": np.array(self.layer, np.int32),
            "patch_size": np.array(self.patch_size, np.int32),
            "num_prefix_tokens": np.array(self.num_prefix_tokens, np.int32),
            "threshold": np.array(threshold, np.float32),
        }

    def at_layer(self, layer: int) -> AttentionMaps:
        """The same pass with another selected layer (no new forward)."""
        return replace(self, layer=_layer_index(layer, self.weights.shape[0]))

    @property
    def layer_bias(self) -> list[torch.Tensor | None]:
        """Per layer the kernel's additive bias (H or 1, N or 1, N), or None (no bias, or not kept)."""
        return self.bias if self.bias is not None else [None] * self.weights.shape[0]

    def requery(self, query: Query) -> AttentionMaps:
        """The same pass with another query token, computed from the kept q and k (no new forward).

        Needs `keep_qk=True` at extraction.
        """
        if self.qk is None:
            raise InputError(
                "This result kept no q/k; extract with keep_qk=True to change the query without a new pass."
            )
        i = token_index(query, self.grid, self.num_prefix_tokens)
        s = torch.stack([query_scores(q, k, i, self.scale, m) for (q, k), m in zip(self.qk, self.layer_bias)])
        return replace(self, query=norm_query(query), scores=s.numpy(), weights=torch.softmax(s, -1).numpy())


def token_index(query: Query, grid: tuple[int, int], num_prefix_tokens: int) -> int:
    """Token index of `query`: 0 for "cls", else P + row * gw + col. Raises InputError off the grid."""
    if isinstance(query, str):
        if query.lower() == "cls":
            return 0
        raise InputError(
            f"Query {query!r} is not accepted; use 'cls' or a (row, col) patch on the {grid[0]}x{grid[1]} grid."
        )
    try:
        r, c = (int(v) for v in query)
    except (TypeError, ValueError):
        raise InputError(
            f"Query {query!r} is not accepted; use 'cls' or a (row, col) patch on the {grid[0]}x{grid[1]} grid."
        ) from None
    if not (0 <= r < grid[0] and 0 <= c < grid[1]):
        raise InputError(
            f"Patch ({r}, {c}) is off the {grid[0]}x{grid[1]} grid; rows 0-{grid[0] - 1}, columns 0-{grid[1] - 1}."
        )
    return num_prefix_tokens + r * grid[1] + c


def norm_query(query: Query) -> Query:
    """One spelling per query: "cls", or (row, col) as a tuple of ints."""
    return "cls" if isinstance(query, str) else (int(query[0]), int(query[1]))


def _layer_index(layer: int, n: int) -> int:
    """A layer index of a model with n layers, in 0..n-1 (negative counts from the end)."""
    v = as_whole(layer)
    if v is None:
        raise InputError(f"Layer {layer!r} is not a whole number; accepted: 0 to {n - 1}, or -1 for the last.")
    if not -n <= v < n:
        raise InputError(f"Layer {v} is out of range; this model has {n} layers: 0 to {n - 1} (or -{n} to -1).")
    return v % n


def query_scores(
    q: torch.Tensor, k: torch.Tensor, i: int, scale: float, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Raw scores of token i against all tokens, in fp32. q, k: (H, N, d) -> (H, N).

    As timm's unfused path: (q_i * scale) @ k^T (+ bias_i, the kernel's additive mask (H or 1, N or 1, N)).
    """
    s = ((q[:, i : i + 1].float() * scale) @ k.float().transpose(-2, -1))[:, 0]
    if bias is not None:
        s = s + bias[:, i if bias.shape[1] > 1 else 0].float()
    return s


def batch_scores(
    q: torch.Tensor, k: torch.Tensor, index: torch.Tensor, scale: float, mask: torch.Tensor | None
) -> torch.Tensor:
    """Raw scores of token index[b] against all tokens of sample b, in fp32, as the kernel sees them:
    (q_i * scale) @ k^T + mask_i. q: (B, H, Nq, d), k: (B, H, N, d), index: (B,) long,
    mask: additive, broadcastable to (B, H, Nq, N), or None -> (B, H, N)."""
    B, H, Nq, _ = q.shape
    b = torch.arange(B, device=q.device)
    idx = index.to(q.device)
    qi = q[b, :, idx].float() * scale  # (B, H, d)
    s = (qi.unsqueeze(-2) @ k.float().transpose(-2, -1))[:, :, 0]
    if mask is not None:
        s = s + mask.expand(B, H, Nq, k.shape[-2])[b, :, idx].float()
    return s


class _Rows(Recorder):
    """What one forward pass records: each sample's query row in each layer (and q, k, the kernel's
    additive bias, if asked). Activated by `capture.recording` in the calling context only."""

    def __init__(self, index: torch.Tensor, keep_qk: bool, n_layers: int):
        self.index, self.keep_qk = index, keep_qk  # (B,) query token indices
        self.rows: list[torch.Tensor | None] = [None] * n_layers  # per layer (B, H, N) raw scores
        self.qk: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layers  # (B, H, N, d) each
        self.bias: list[torch.Tensor | None] = [None] * n_layers  # per layer the kernel's mask, as given
        self.scale: list[float] = [1.0] * n_layers

    def rows_cpu(self) -> torch.Tensor:
        """float32 (B, L, H, N) on the CPU: every sample's row in every layer."""
        return torch.stack(self.rows, 1).float().cpu()  # type: ignore[arg-type]

    def on_kernel(self, layer, q, k, v, mask, scale) -> None:
        if layer >= len(self.rows):  # the attention-pooling head: not a block
            return
        self.rows[layer] = batch_scores(q, k, self.index, scale, mask)
        self.scale[layer] = scale
        if self.keep_qk:  # copies (never views of the block's qkv buffer, which would stay alive whole),
            # on the model's device: no GPU sync inside the forward; moved to the CPU once it is done
            self.qk[layer] = (_compact(q), _compact(k))
            self.bias[layer] = None if mask is None else mask.detach()


def _compact(t: torch.Tensor) -> torch.Tensor:
    """A compact copy of `t` on its device, in its dtype (not a view of a larger buffer)."""
    return t.detach().clone(memory_format=torch.contiguous_format)


def _on_cpu(t: torch.Tensor) -> torch.Tensor:
    """`t` as float32 on the CPU: itself when it already is (a compact copy), else one converted copy."""
    return t if t.device.type == "cpu" and t.dtype == torch.float32 else t.to("cpu", torch.float32)


def _sample_bias(bias: list[torch.Tensor | None], b: int) -> list[torch.Tensor | None]:
    """Sample b's per-layer bias as float32 CPU (H or 1, N or 1, N); one copy per distinct tensor
    (BEiT's shared bias is one tensor for every layer)."""
    seen: dict[int, torch.Tensor] = {}
    out: list[torch.Tensor | None] = []
    for m in bias:
        if m is None:
            out.append(None)
            continue
        if id(m) not in seen:
            m4 = m.reshape((1,) * (4 - m.dim()) + tuple(m.shape))
            seen[id(m)] = m4[b if m4.shape[0] > 1 else 0].to("cpu", torch.float32).contiguous()
        out.append(seen[id(m)])
    return out


def attention_maps(
    model: torch.nn.Module,
    image: ImageSource,
    *,
    layer: int = -1,
    query: Query = "cls",
    resolution: int | str | None = "auto",
    max_tokens: int = MAX_TOKENS,
    keep_qk: bool = False,
    max_gflop: float | None = None,
) -> AttentionMaps:
    """Per-head attention of `query` in every layer of `model` on `image`, from one forward pass.

    model: a timm VisionTransformer (see `load_vit`). image: path, bytes, PIL image (any mode;
    EXIF honoured) or uint8 array (H, W[, C]). resolution: shorter side in px, "auto" (480 for
    DINO, else the trained size), None/"native" (only cropped to the patch grid) or "dino480"
    (squashed to 480 x 480 as DINO's visualize_attention.py). The crop to the patch grid is the
    model's family's (`model.crop_rule`, set by `load_vit`: top-left for DINO, else centre).
    query: "cls" or (row, col) of a patch. layer: selected layer (negative counts from the end).
    max_gflop: refuse at once (BudgetError naming the largest resolution that fits) when the pass's
    estimated cost (`attention.vit.cost.forward_gflop`) is over it; None = no compute budget.
    Fused attention stays on and the model's outputs are unchanged.

    Thread-safe: many threads may call it at once on one shared model; each call records only
    its own pass (hooks hand q and k to a recorder bound to the calling context).
    """
    check_supported(model)
    img = load_image(image)
    patch = model.patch_embed.patch_size[0]
    cfg = model.pretrained_cfg
    auto = isinstance(resolution, str) and resolution.strip().lower() == "auto"
    res = default_resolution(model) if auto else check_resolution(resolution, patch)
    if max_gflop is not None:
        check_budget(
            model,
            img.size,
            res,
            max_gflop,
            name=getattr(model, "alias", "this model"),
            device=str(next(model.parameters()).device),
        )
    crop = getattr(model, "crop_rule", "center")
    x, shown = to_tensor(
        img, patch_size=patch, mean=cfg["mean"], std=cfg["std"], resolution=res, crop=crop, max_tokens=max_tokens
    )
    grid = (x.shape[2] // patch, x.shape[3] // patch)
    P = model.num_prefix_tokens
    n_layers = len(model.blocks)
    layer = _layer_index(layer, n_layers)
    t0 = time.perf_counter()
    with torch.inference_mode():
        rec = _pass(model, x, token_index(query, grid, P), keep_qk)
    scores = rec.rows_cpu()[0]
    seconds = time.perf_counter() - t0
    return AttentionMaps(
        scores=scores.numpy(),
        weights=torch.softmax(scores, -1).numpy(),
        grid=grid,
        image=shown,
        patch_size=patch,
        num_prefix_tokens=P,
        layer=layer,
        query=norm_query(query),
        seconds=seconds,
        qk=[(_on_cpu(q[0]), _on_cpu(k[0])) for q, k in rec.qk] if keep_qk else None,
        scale=rec.scale[0],
        bias=_sample_bias(rec.bias, 0) if keep_qk and any(m is not None for m in rec.bias) else None,
    )


def _pass(model: torch.nn.Module, x: torch.Tensor, query_index, keep_qk: bool) -> _Rows:
    """One fused forward pass of x (B, C, H, W) recording each sample's query row in every layer."""
    if x.dim() != 4:
        raise InputError(f"Input of shape {tuple(x.shape)} is not accepted; expected a batch (B, C, H, W).")
    B = x.shape[0]
    idx = torch.as_tensor(query_index, dtype=torch.long).reshape(-1)
    if idx.numel() == 1:
        idx = idx.expand(B)
    if idx.numel() != B:
        raise InputError(f"{idx.numel()} query indices for a batch of {B}; give one int or one per sample.")
    param = next(model.parameters())
    rec = _Rows(idx.clone(), keep_qk, len(model.blocks))
    with recording(model, rec):
        model.forward_features(x.to(param.device, param.dtype))
    if any(r is None for r in rec.rows):
        raise UnsupportedModelError(
            f"{type(model.blocks[0].attn).__name__}: a layer ran without an attention-kernel call the engine "
            "could read."
        )
    return rec


@torch.inference_mode()
def query_rows(model: torch.nn.Module, x: torch.Tensor, query_index=0, *, keep_qk: bool = False):
    """The engine of `attention_maps`, on a preprocessed batch: one fused forward pass of
    x (B, C, H, W) with the kernel hooks (`capture`). query_index: one token index for every sample,
    or one per sample (a sequence or tensor (B,)). Returns (scores, qk): scores float32 (B, L, H, N)
    on CPU, every layer's raw q_i . k_j * scale (+ the kernel's additive bias, e.g. relative
    position) for token i = query_index[b]; qk, with keep_qk, per sample a list over layers of
    (q, k) float32 (H, N, d) on CPU, else None."""
    rec = _pass(model, x, query_index, keep_qk)
    scores = rec.rows_cpu()
    if not keep_qk:
        return scores, None
    return scores, [[(_on_cpu(q[b]), _on_cpu(k[b])) for q, k in rec.qk] for b in range(x.shape[0])]


def threshold_masks(maps: np.ndarray, threshold: float = 0.6) -> np.ndarray:
    """DINO's masks: per head, the smallest set of patches holding >= `threshold` of its mass.

    maps: (H, gh, gw) non-negative -> bool (H, gh, gw). threshold in (0, 1].
    """
    if not 0 < threshold <= 1:
        raise InputError(
            f"Threshold {threshold} is out of range; accepted: more than 0, at most 1 (share of mass kept)."
        )
    H = maps.shape[0]
    flat = maps.reshape(H, -1).astype(np.float64)
    order = np.argsort(-flat, axis=1, kind="stable")  # descending
    val = np.take_along_axis(flat, order, 1)
    cum = np.cumsum(val, 1) / np.maximum(val.sum(1, keepdims=True), 1e-30)
    keep_sorted = np.concatenate([np.ones((H, 1), bool), cum[:, :-1] < threshold - 1e-12], 1)
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, 1)
    return keep.reshape(maps.shape)
