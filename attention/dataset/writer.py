"""The writing stage of an extraction run: one background thread turns each batch's results into
shard rows (masks computed over the whole batch) and writes the shards, in order, while the main
thread runs the next forward."""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from attention.dataset.decode import Item
from attention.errors import AttentionError
from attention.vit.batch import BatchMaps
from attention.vit.extract import threshold_masks
from attention.vit.features import pca as pca_colors
from attention.vit.query import to_text


@dataclass
class Shard:
    """What shard k has so far: rows, failures ({id, name, reason}), when it was started."""

    k: int
    rows: list[dict] = field(default_factory=list)
    fails: list[dict] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)


def batch_rows(
    items: list[Item], results: list[BatchMaps], threshold: float, pca: bool
) -> tuple[list[dict], list[dict]]:
    """Shard rows of one batch (one grid), maps, mean and masks computed on the stacked (B, H, gh, gw);
    and the failures ({id, name, reason}) of items whose row cannot be made (PCA of too few patches)."""
    maps = np.stack([r.maps for r in results])  # (B, H, gh, gw)
    B, H, gh, gw = maps.shape
    masks = threshold_masks(maps.reshape(B * H, gh, gw), threshold).reshape(maps.shape)
    means = maps.mean(1)
    rows, fails = [], []
    for b, (it, r) in enumerate(zip(items, results)):
        row = {
            "id": it.id,
            "name": it.name,
            "width": it.size[0],
            "height": it.size[1],
            "grid_h": gh,
            "grid_w": gw,
            "query": to_text(r.query),
            "maps": maps[b],
            "mean": means[b],
            "masks": masks[b],
            "embedding": r.embedding,
        }
        if pca:
            try:
                row["pca"] = pca_colors(r.tokens[r.num_prefix_tokens :], r.grid)
            except AttentionError as e:
                fails.append({"id": it.id, "name": it.name, "reason": str(e)})
                continue
        rows.append(row)
    return rows, fails


class Writer:
    """One background thread running tasks in order (rows of a batch, a shard's file) while the main
    thread runs the next forward; at most `depth` tasks wait (each holds a batch's results).
    `close` waits for every task and raises the first task's error."""

    def __init__(self, depth: int = 2):
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="extract-writer")
        self.pending: deque[Future] = deque()
        self.depth = depth

    def submit(self, fn, *args) -> None:
        while len(self.pending) >= self.depth:
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(fn, *args))

    def close(self) -> None:
        try:
            while self.pending:
                self.pending.popleft().result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
