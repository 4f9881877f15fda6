"""Attention of many images at once: one forward pass per batch of same-grid images.

The one batched path of the package (datasets: `attention.dataset`; videos use it too). Images
are preprocessed by the one preprocessing `attention_maps` uses too (`preprocess.Preprocess`; or
first resized to the nearest of a few aspect-ratio grids, `Preprocess.of(..., buckets=k)`), grouped by patch grid
(`group_by_grid`: a batch holds one grid size, so it is one forward with no padding), and each
sample keeps only its query's row in each kept layer (the engine's `rows.run_pass`), O(H x N), never
H x N x N; on a GPU the model runs in half precision (as `load_vit` loads it) while scores and
softmax are fp32.

    prep = Preprocess.of(model, resolution="auto")
    items = [prep(img) for img in images]                       # Prepared: x (C, H, W), shown, grid
    for group in group_by_grid(items, batch_size=64):           # lists of one grid each
        xs = torch.stack([p.x for p in group])                  # (B, C, H, W)
        for res in batch_maps(model, xs, layer=-1, keep_tokens=True):
            res.maps, res.mean, res.masks(0.6), res.embedding   # (H, gh, gw), (gh, gw), bool, (D,)

Per sample, the results equal `attention_maps` on that image alone (fp32: within 1e-5), whatever
the batch size (tests/vit/engine/test_batch.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
import torch
from PIL import Image

from attention.errors import InputError
from attention.validate import layer_index
from attention.vit.backbone import describe
from attention.vit.engine.capture import BlockTokens, recording
from attention.vit.engine.extract import AttentionMaps, _pad_prefix, threshold_masks
from attention.vit.engine.pooling import embedding_kind, embeddings
from attention.vit.engine.query import POOL, Query
from attention.vit.engine.query import default as default_query
from attention.vit.engine.query import index as query_index
from attention.vit.engine.query import parse as parse_query
from attention.vit.engine.request import THRESHOLD
from attention.vit.engine.rows import run_pass

T = TypeVar("T")


class GridBuckets(Generic[T]):
    """Streaming grouping by patch grid: `add` returns a full batch (`batch_size` items of one grid)
    or None; `flush` returns what is left, one batch per grid (in order of first arrival)."""

    def __init__(self, batch_size: int, grid_of: Callable[[T], tuple[int, int]] = lambda p: p.grid):
        if batch_size < 1:
            raise InputError(f"Batch size {batch_size} is out of range; accepted: 1 or more.")
        self.batch_size, self.grid_of = batch_size, grid_of
        self._open: dict[tuple[int, int], list[T]] = {}

    def add(self, item: T) -> list[T] | None:
        group = self._open.setdefault(tuple(self.grid_of(item)), [])
        group.append(item)
        if len(group) < self.batch_size:
            return None
        return self._open.pop(tuple(self.grid_of(item)))

    def flush(self) -> list[list[T]]:
        out, self._open = list(self._open.values()), {}
        return out


def group_by_grid(items: Iterable[T], batch_size: int, grid_of=lambda p: p.grid) -> Iterator[list[T]]:
    """Batches of at most `batch_size` items sharing one grid, each item in exactly one batch; full
    batches as soon as they fill, the partial ones at the end."""
    buckets = GridBuckets(batch_size, grid_of)
    for item in items:
        if (full := buckets.add(item)) is not None:
            yield full
    yield from buckets.flush()


@dataclass
class BatchMaps:
    """One sample's attention from a batched pass. Lr recorded layers (all, or the selected one),
    H heads, N = P + gh*gw tokens (P prefix tokens)."""

    scores: np.ndarray  # float32 (Lr, H, N): q_i . k_j * scale of the query token, before softmax
    weights: np.ndarray  # float32 (Lr, H, N): softmax of scores
    recorded: tuple[int, ...]  # the layer index of each row of scores
    layer: int  # the selected layer, 0..L-1
    query: Query
    grid: tuple[int, int]
    patch_size: int
    num_prefix_tokens: int
    scale: float
    tokens: np.ndarray | None = field(default=None, repr=False)  # float32 (N, D): last layer, after the norm
    prefix: tuple[str, ...] = ("cls",)  # names of the P prefix tokens in order (`query.prefix_tokens`)
    pooled: np.ndarray | None = field(default=None, repr=False)  # float32 (D,): `pooling.embeddings`
    embedding_kind: str = "cls"  # what `embedding` is: a key of `pooling.EMBEDDINGS`
    pool: bool = False  # the model pools by attention: the query "pool" exists (its row: recorded (0,))
    blocks: int = 0  # the model's layers

    @property
    def maps(self) -> np.ndarray:
        """float32 (H, gh, gw): the selected layer's query row over patch tokens."""
        w = self.weights[self.recorded.index(self.layer), :, self.num_prefix_tokens :]
        return w.reshape(-1, *self.grid)

    @property
    def mean(self) -> np.ndarray:
        """float32 (gh, gw): the selected layer's map averaged over heads."""
        return self.maps.mean(0)

    def masks(self, threshold: float = THRESHOLD.default) -> np.ndarray:
        """bool (H, gh, gw): DINO's threshold masks of the selected layer (`threshold_masks`)."""
        return threshold_masks(self.maps, threshold)

    @property
    def embedding(self) -> np.ndarray:
        """float32 (D,): the image's embedding, `embedding_kind` (`pooling.embeddings`): the CLS token after
        the final norm, or for a model without CLS its own pooling (GAP, the attention pool's output)."""
        if self.pooled is None:
            raise InputError("This result kept no tokens; call batch_maps with keep_tokens=True.")
        return self.pooled

    def attention_maps(self, image: Image.Image, seconds: float = 0.0) -> AttentionMaps:
        """As `AttentionMaps` (for views and files); needs every layer (`batch_maps(..., every_layer=True)`).
        image: the sample's preprocessed RGB image (`Prepared.shown`)."""
        if len(self.recorded) != int(self.recorded[-1]) + 1:
            raise InputError("AttentionMaps needs every layer; call batch_maps with every_layer=True.")
        return AttentionMaps(
            scores=self.scores,
            weights=self.weights,
            grid=self.grid,
            image=image,
            patch_size=self.patch_size,
            num_prefix_tokens=self.num_prefix_tokens,
            layer=self.layer,
            query=self.query,
            seconds=seconds,
            scale=self.scale,
            tokens=self.prefix,
            pool=self.pool,
            blocks=self.blocks,
        )


@torch.inference_mode()
def batch_maps(
    model: torch.nn.Module,
    xs: torch.Tensor,
    *,
    layer: int = -1,
    query: Query | Sequence[Query] | None = None,
    every_layer: bool = False,
    keep_tokens: bool = False,
) -> list[BatchMaps]:
    """Attention of `query` in each of B preprocessed images of one grid, from one forward pass.

    xs: float (B, C, H, W), H and W multiples of the patch (`Preprocess`, stacked). layer: the selected
    layer (negative counts from the end). query: a token the model has ("cls", "reg0", "pool", ...), (row, col),
    or one of them per sample; None: the model's own (`query.default`, as `attention_maps`: CLS, else the
    attention-pooling head's query, else the centre patch). A sample whose query is "pool" has one row,
    the pool's attention after the last layer (`recorded` (0,), layer 0, as `attention_maps`).
    every_layer: keep every layer's row (needed for `BatchMaps.attention_maps`), else the selected
    layer's only. keep_tokens: keep the last layer's tokens (N, D) after the final norm (patch features)
    and the embedding (`pooling.embeddings`). Returns one BatchMaps per sample, on the CPU, fp32.
    """
    if xs.ndim != 4 or xs.shape[0] < 1:
        raise InputError(f"Images of shape {tuple(xs.shape)} are not a batch; accepted: (B, C, H, W), B >= 1.")
    bb = describe(model)
    B, patch = xs.shape[0], bb.patch_size
    grid = bb.grid(xs.shape[2], xs.shape[3])
    P, L = bb.num_prefix_tokens, bb.depth
    layer = layer_index(layer, L)
    names, pool = bb.prefix, bb.pool
    many = query if isinstance(query, (list, tuple)) and _many(query) else [query] * B
    own = (*names, *([POOL] if pool else []))
    queries = [default_query(own, grid) if q is None else parse_query(q) for q in many]
    if len(queries) != B:
        raise InputError(f"{len(queries)} queries for {B} images; accepted: one query, or one per image.")
    index = torch.tensor([query_index(q, grid, names, pool) for q in queries])  # -1: the pool's query
    tok = BlockTokens(L - 1)
    recorded = tuple(range(L)) if every_layer else (layer,)
    with recording(model, tok) if keep_tokens else nullcontext():
        rec = run_pass(model, xs, index.clamp(min=0), False, pool=bool((index < 0).any()), layers=recorded)
    scores = rec.rows_cpu()  # (B, len(recorded), H, N) fp32 on the CPU
    weights = torch.softmax(scores, -1).numpy()
    tokens = tok.tokens.cpu().numpy() if keep_tokens else None
    pooled, kind = embeddings(model, tok.tokens) if keep_tokens else (None, embedding_kind(model))
    scale = rec.scale[layer]  # the scale the kernel was given (not the module's attribute)
    out = []
    for b in range(B):
        s, w, rb, lb = scores[b].numpy(), weights[b], recorded, layer
        if index[b] < 0:  # the pool's one attention, after the last layer, as attention_maps
            row = rec.pool[0][b].float().cpu()  # type: ignore[index]
            s_b = _pad_prefix(row, P + grid[0] * grid[1] - row.shape[-1])[None]
            s, w, rb, lb = s_b.numpy(), torch.softmax(s_b, -1).numpy(), (0,), 0
        out.append(
            BatchMaps(
                scores=s,
                weights=w,
                recorded=rb,
                layer=lb,
                query=queries[b],
                grid=grid,
                patch_size=patch,
                num_prefix_tokens=P,
                scale=scale,
                tokens=None if tokens is None else tokens[b],
                prefix=names,
                pooled=None if pooled is None else pooled[b],
                embedding_kind=kind,
                pool=pool,
                blocks=L,
            )
        )
    return out


def _many(query) -> bool:
    """True when `query` is a sequence of queries rather than one (row, col) pair."""
    return len(query) > 0 and not (len(query) == 2 and all(isinstance(v, (int, np.integer)) for v in query))
