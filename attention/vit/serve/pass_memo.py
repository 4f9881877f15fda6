"""`Pass`: one forward pass of one image through one model at one resolution, with every layer's q, k
and v kept, and what it answers without a new forward: a new query is one row per layer from the kept
q/k (`at`), rollout is computed once per (query, layer) (`rollout`), the block outputs' feature maps.
Its memos are guarded by a lock: a shipped example's pass is shared by every visitor. The server's store
of passes and the forward that makes one are `passes`; a visitor's state holds only a `Ref`.

    res = p.at(query=(2, 3), layer=-1)                             # AttentionMaps for patch (2, 3)
    roll = p.rollout((2, 3), layer=-1)                             # (gh, gw)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from attention.errors import InputError
from attention.vit.engine import features
from attention.vit.engine.cost import rollout_gflop
from attention.vit.engine.extract import AttentionMaps
from attention.vit.engine.flow import rollout_map
from attention.vit.engine.query import Query, parse
from attention.vit.engine.query import default as default_query

PassKey = tuple[str, str, str, str]
"""(image digest, model, resolution, scope): scope "" for a shipped example (one pass shared by every
visitor), else the visitor who sent the picture (theirs alone, so no visitor can time whether someone
else sent it)."""


@dataclass(frozen=True)
class Ref:
    """A visitor's handle on their pass: a few bytes in their session; the pass itself is in a
    SharedCache, whose byte budget bounds every visitor's passes together."""

    key: PassKey
    grid: tuple[int, int]
    num_layers: int
    num_heads: int
    source: tuple | None = None  # the stamp of the image file it was shown for (`inputs.source_stamp`)


@dataclass
class Pass:
    """A cached forward pass (see the module docstring). `base` has the model's default query
    (`query.default`: CLS, else the pooling head's, else the centre patch) and q/k kept."""

    key: PassKey
    model: str
    base: AttentionMaps
    device: str
    tokens: np.ndarray | None = field(default=None, repr=False)  # float16 (L, N, d): every block's output
    _queries: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _rollouts: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _flights: dict = field(default_factory=dict, repr=False)  # a lock per rollout being computed
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # the memos are shared

    MEMO = 8  # queries and rollouts remembered per pass

    @property
    def ref(self) -> Ref:
        """What a visitor's state keeps of this pass: its key and shape (the pass lives in `PASSES`)."""
        return Ref(self.key, self.base.grid, self.num_layers, self.num_heads)

    @property
    def nbytes(self) -> int:
        """Bytes this pass can hold: kept q/k/v (and bias, the pool's q/k), the block outputs, its rows,
        the image, full memos of queries and rollouts."""
        b = self.base
        qk = sum(q.nbytes + k.nbytes for q, k in b.qk or []) + sum(v.nbytes for v in b.v or [])
        qk += sum({id(m): m.nbytes for m in b.bias or [] if m is not None}.values())  # relative-position bias
        qk += sum(t.nbytes for t in (b.pool_qk or ())[:2])
        rows = b.scores.nbytes + b.weights.nbytes
        tokens = 0 if self.tokens is None else self.tokens.nbytes
        return (
            qk
            + tokens
            + rows * (1 + self.MEMO)
            + b.image.width * b.image.height * 3
            + self.MEMO * b.weights.shape[-1] * 4
        )

    @property
    def num_layers(self) -> int:
        return self.base.depth

    @property
    def num_heads(self) -> int:
        return self.base.weights.shape[1]

    @property
    def query_tokens(self) -> list[str]:
        """The named queries the model has (`query.tokens_of`): what a query picker offers besides patches."""
        return [*self.base.tokens, *(["pool"] if self.base.pool else [])]

    @property
    def default_query(self) -> Query:
        """The query an empty query means for this model (`query.default`)."""
        return default_query(self.query_tokens, self.base.grid)

    def at(self, query: Query | None = None, layer: int = -1) -> AttentionMaps:
        """The pass seen from `query` (None: `default_query`) at `layer` (no new forward). Raises
        InputError off the grid/depth, or for a token the model lacks (naming what it has)."""
        q = self.default_query if query is None else parse(query)
        self.base.index_of(q)  # a token the model lacks: refused before anything is memoised
        with self._lock:
            if q not in self._queries:
                self._queries[q] = self.base if q == self.base.query else self.base.requery(q)
                while len(self._queries) > self.MEMO:
                    self._queries.popitem(last=False)
            res = self._queries[q]
        return res.at_layer(layer)

    def feature_maps(
        self, query: Query | None = None, layer: int = -1, background: float | None = None, pca_style: str = "minmax"
    ) -> dict[str, np.ndarray]:
        """float32 pca (gh, gw, 3), similarity to `query` (gh, gw) and norms (gh, gw) of layer `layer`'s
        output tokens (`features.feature_maps`: pca_style, background), from this pass. InputError off the
        depth or grid."""
        if self.tokens is None:
            raise InputError("This pass kept no features; run it again through `get_pass`.")
        b = self.base
        i = b.index_of(self.default_query if query is None else query)
        if i < 0:
            raise InputError("The pooling head's query is not a token of the blocks: it has no features to compare.")
        return features.feature_maps(self.tokens, b.grid, b.num_prefix_tokens, layer, i, background, pca_style)

    def _rollout_key(self, query: Query | None, layer: int, options: dict) -> tuple[AttentionMaps, tuple]:
        res = self.at(query, layer)
        return res, (res.query, res.layer, tuple(sorted(options.items())))

    def rollout(self, query: Query | None = None, layer: int = -1, **options) -> np.ndarray:
        """float32 (gh, gw): attention rollout of `query` through layers 0..layer, memoised.
        options: `flow.rollout`'s head_fusion ("mean", "max", "min"), discard_ratio, discard ("row", "global").
        Computed outside the memos' lock (a long rollout never holds up another visitor's `at` of a shared pass)
        and once: a second caller asking for the same rollout meanwhile waits for the first one's result."""
        res, key = self._rollout_key(query, layer, options)
        with self._lock:
            if key in self._rollouts:
                return self._rollouts[key]
            flight = self._flights.setdefault(key, threading.Lock())
        try:
            with flight:
                with self._lock:
                    if key in self._rollouts:
                        return self._rollouts[key]
                roll = rollout_map(res, **options)
                with self._lock:
                    self._rollouts[key] = roll
                    while len(self._rollouts) > self.MEMO:
                        self._rollouts.popitem(last=False)
                return roll
        finally:
            with self._lock:
                if self._flights.get(key) is flight and not flight.locked():
                    del self._flights[key]

    def has_rollout(self, query: Query | None = None, layer: int = -1, **options) -> bool:
        """Whether `rollout(query, layer, **options)` is memoised (answered without computing)."""
        _, key = self._rollout_key(query, layer, options)
        with self._lock:
            return key in self._rollouts

    def rollout_gflop(self, query: Query | None = None, layer: int = -1, **options) -> float:
        """Estimated GFLOP of computing `rollout(query, layer, **options)` (`cost.rollout_gflop`: its layers
        0..layer, every head's N x N entries, its discard rule), memoised or not."""
        res, _ = self._rollout_key(query, layer, options)
        q = self.base.qk[0][0] if self.base.qk else None
        if q is None:
            raise InputError("Rollout needs every layer's q and k: this pass kept none.")
        H, N, d = q.shape
        rule, ratio = options.get("discard", "row"), options.get("discard_ratio", 0.0) or 0.0
        return rollout_gflop(res.layer + 1, H, N, H * d, rule, ratio)
