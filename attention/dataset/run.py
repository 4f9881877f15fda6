"""One extraction run over a dataset: decode in DataLoader workers, one forward per batch of one grid,
write shards; split by rank under torch.distributed (`torchrun`), resumable.

Three stages overlap: worker processes decode and resize (one torch thread each; the decoded pixels
travel as pickled numpy arrays, not torch's shared-memory tensors, whose per-tensor file descriptor
cost more than the decoding), the main thread runs the forward passes, and one writer thread turns
each batch's results into rows (masks batched over the whole batch) and writes the shards.

Items are cut into shards of `shard_size` consecutive items; rank r of W takes shards r, r + W, ...
(no overlap, no gap, whatever W), skips those already finished, and writes its own; rank 0 writes the
index once every rank is done. Batches never span shards, so a shard's contents do not depend on
how many processes ran, and on the CPU (fp32) they are the same whatever the batch size.

    summary = extract(open_source("photos/"), load_vit("dino_vits16"), Path("out"), model_name="dino_vits16")
    print(summary.text())
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from attention.dataset.shards import check_run, is_done, write_index, write_shard
from attention.dataset.sources import Source
from attention.errors import AttentionError, InputError
from attention.images import MAX_TOKENS
from attention.validate import check_threshold, layer_index
from attention.vit.backbone import describe
from attention.vit.engine.batch import BatchMaps, GridBuckets, batch_maps
from attention.vit.engine.extract import threshold_masks
from attention.vit.engine.features import pca as pca_colors
from attention.vit.engine.pooling import EMBEDDINGS, embedding_kind
from attention.vit.engine.preprocess import Preprocess
from attention.vit.engine.query import Query, has_pool, prefix_tokens, to_text, tokens_of
from attention.vit.engine.query import default as default_query
from attention.vit.engine.query import index as query_index
from attention.vit.engine.query import parse as parse_query


@dataclass(frozen=True)
class Item:
    """One decoded item: x float32 (C, H, W) and its grid, or the reason it could not be read."""

    id: int
    name: str
    x: np.ndarray | None = None  # numpy: pickled through the worker's pipe (see the module's docstring)
    grid: tuple[int, int] | None = None
    size: tuple[int, int] | None = None  # (W, H) px as the model sees it
    error: str | None = None


class Decoded(Dataset):
    """`source`'s items `ids`, each decoded and preprocessed (in a DataLoader worker); a bad item
    becomes an Item with its reason, never an exception."""

    def __init__(self, source: Source, prep: Preprocess, ids: list[int]):
        self.source, self.prep, self.ids = source, prep, ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, j: int) -> Item:
        i = self.ids[j]
        name = f"item {i}"
        try:
            name = self.source.name(i)
            p = self.prep(self.source.get(i))
            return Item(i, name, p.x.numpy(), p.grid, p.shown.size)
        except AttentionError as e:
            reason = str(e)
        except Exception as e:  # anything a decoder or a dataset row can raise: recorded, never fatal
            reason = f"{type(e).__name__}: {e}"
        return Item(i, name, error=reason)


def _items(batch: Item) -> Item:  # the DataLoader's collate: items pass one by one
    return batch


@dataclass
class Summary:
    """What a run did. images/failed: the whole output so far; done_now: images this run (all ranks)."""

    out: Path
    images: int
    failed: list[dict]
    shards: int
    skipped: int  # shards already finished before this run
    done_now: int
    seconds: float
    world: int
    missing: list[int] = field(default_factory=list)

    def text(self, max_failures: int = 10) -> str:
        """A one-screen report: totals, throughput, failures with reasons (the first few)."""
        rate = self.done_now / self.seconds if self.seconds > 0 else 0.0
        procs = f"{self.world} process{'es' if self.world > 1 else ''}"
        lines = [
            f"{self.images:,} images in {self.shards} shards -> {self.out}/ (index.parquet, index.json)",
            f"this run: {self.done_now:,} images in {self.seconds:.1f} s, {rate:.1f} images/s on {procs}"
            + (f"; {self.skipped} finished shards skipped" if self.skipped else ""),
        ]
        if self.missing:
            lines.append(f"not finished: shards {self.missing} (run again to complete them)")
        lines.append(f"failed: {len(self.failed)}" + (" (recorded in index.parquet, skipped)" if self.failed else ""))
        lines += [f"  {f['name']}: {f['reason']}" for f in self.failed[:max_failures]]
        if len(self.failed) > max_failures:
            lines.append(f"  ... and {len(self.failed) - max_failures} more (index.json)")
        return "\n".join(lines)


def dist_env() -> tuple[int, int, int]:
    """(rank, world size, local rank) as torchrun (or srun + torchrun) sets them; (0, 1, 0) alone."""
    return (int(os.environ.get(k, d)) for k, d in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)))


def auto_workers(device: torch.device | str, cpus: int | None = None) -> int:
    """DataLoader workers when none are asked, from the cores this process has (`os.cpu_count()`
    shared by torchrun's local processes): on a GPU decoding is the bottleneck, cores - 1 (at most 8);
    on the CPU the forward takes every core and decoding is a few percent of it: one worker per 8
    cores, none below 8 (a worker decoding during the forward stalls one of its threads, and with it
    the others at each barrier; decoding inline between batches costs the same CPU and no copy)."""
    cpus = cpus or max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    if torch.device(device).type != "cpu":
        return max(1, min(8, cpus - 1))
    return min(8, cpus // 8)


@dataclass
class _Shard:
    """What shard k has so far: rows, failures ({id, name, reason}), when it was started."""

    k: int
    rows: list[dict] = field(default_factory=list)
    fails: list[dict] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)


def _rows(items: list[Item], results: list[BatchMaps], threshold: float, pca: bool) -> tuple[list[dict], list[dict]]:
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


class _Writer:
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


def extract(
    source: Source,
    model: torch.nn.Module,
    out: Path,
    *,
    model_name: str,
    layer: int = -1,
    query: Query | None = None,
    resolution: int | str | None = "auto",
    threshold: float = 0.6,
    buckets: int = 0,
    pca: bool = False,
    batch_size: int = 64,
    shard_size: int = 1024,
    workers: int | None = None,
    max_tokens: int = MAX_TOKENS,
    progress: bool = True,
) -> Summary:
    """Extract every item of `source` into `out` (see `attention.dataset.shards` for the files).

    model: loaded on this rank's device (fp16 on a GPU). layer: the maps' layer. query: whose attention the
    maps are (a token name or (row, col)); None: the model's own, as `attention_maps` (CLS, else its
    attention-pooling head's query, else the centre patch): recorded in run.json ("query"), in each row
    (column "query", `query.to_text`) and in the shards' metadata. The embedding column is the model's
    (`pooling.embeddings`: CLS, else its own pooling), named in run.json and the metadata ("embedding").
    threshold: DINO's
    mask threshold. buckets: resize each image to the nearest of that many aspect-ratio grids
    (`preprocess.aspect_buckets`; 0: keep each image's aspect, as `attention_maps`). pca: also the last
    layer's patch features' first three principal components. workers: DataLoader processes
    decoding (None: `auto_workers`).
    Under torch.distributed (initialised, or the torchrun environment: it is initialised here, gloo
    on CPU, nccl on GPUs) each rank takes its shards. Returns the Summary (on every rank).
    """
    threshold = check_threshold(threshold)
    param = next(model.parameters())
    workers = auto_workers(param.device) if workers is None else workers
    if shard_size < 1 or workers < 0:
        raise InputError(f"Shard size {shard_size} / workers {workers}: accepted shard size >= 1, workers >= 0.")
    t0 = time.perf_counter()
    rank, world, _ = _init_dist()
    prep = Preprocess.of(model, resolution, max_tokens, buckets)
    layer = layer_index(layer, describe(model).depth)
    query = None if query is None else parse_query(query)
    if query is not None:
        query_index(query, (1 << 20, 1 << 20), prefix_tokens(model), has_pool(model))  # a token it lacks: now
    own = default_query(tokens_of(model), (0, 0))  # the model's own: a token, or the centre patch of each image
    asked = to_text(query) if query is not None else own if isinstance(own, str) else "the centre patch"
    kind = embedding_kind(model)
    n = len(source)
    n_shards = math.ceil(n / shard_size)
    config = {
        "model": model_name,
        "layer": layer,
        "query": asked,
        "embedding": f"{kind}: {EMBEDDINGS[kind]}",
        "resolution": prep.resolution,
        "threshold": threshold,
        "buckets": [list(g) for g in prep.buckets],
        "pca": pca,
        "shard_size": shard_size,
        "source": source.spec,
    }
    out.mkdir(parents=True, exist_ok=True)
    check_run(out, config, write=rank == 0)
    mine = range(rank, n_shards, world)
    todo = [k for k in mine if not is_done(out, k)]
    ids = [i for k in todo for i in range(k * shard_size, min(n, (k + 1) * shard_size))]
    dl = DataLoader(
        Decoded(source, prep, ids),
        batch_size=None,
        num_workers=workers,
        collate_fn=_items,
        prefetch_factor=max(2, 2 * batch_size // workers) if workers else None,  # about two batches ahead
    )
    from tqdm.auto import tqdm

    bar = tqdm(total=len(ids), unit="img", desc="extract", disable=not progress or rank != 0, file=sys.stderr)
    buckets: GridBuckets[Item] = GridBuckets(batch_size, lambda it: it.grid)
    writer = _Writer()
    done = 0

    def post(shard: _Shard, items: list[Item], results: list[BatchMaps]) -> None:  # on the writer thread
        rows, fails = _rows(items, results, threshold, pca)
        shard.rows += rows
        shard.fails += fails

    def write(shard: _Shard) -> None:  # on the writer thread, after the shard's every batch
        seconds = round(time.perf_counter() - shard.started, 3)
        write_shard(
            out,
            shard.k,
            shard.rows,
            shard.fails,
            pca,
            metadata={"query": config["query"], "embedding": config["embedding"], "model": model_name},
            seconds=seconds,
            rank=rank,
        )

    def run(shard: _Shard, items: list[Item]) -> None:
        nonlocal done
        try:
            xs = torch.from_numpy(np.stack([it.x for it in items]))  # (B, C, H, W): the one copy
            results = batch_maps(model, xs, layer=layer, query=query, keep_tokens=True)
        except Exception as e:  # a batch that fails (out of memory, ...) is retried one image at a time
            if len(items) > 1:
                for it in items:
                    run(shard, [it])
                return
            shard.fails.append({"id": items[0].id, "name": items[0].name, "reason": f"{type(e).__name__}: {e}"})
            bar.update(1)
            return
        writer.submit(post, shard, items, results)
        done += len(items)
        bar.update(len(items))

    def finish(shard: _Shard) -> None:
        for group in buckets.flush():
            run(shard, group)
        writer.submit(write, shard)

    shard = None
    try:
        for it in dl:
            k = it.id // shard_size
            if shard is None or k != shard.k:
                if shard is not None:
                    finish(shard)
                shard = _Shard(k)
            if it.error is not None:
                shard.fails.append({"id": it.id, "name": it.name, "reason": it.error})
                bar.update(1)
            elif (full := buckets.add(it)) is not None:
                run(shard, full)
        if shard is not None:
            finish(shard)
    finally:  # shards already finished are written even when the run is interrupted
        writer.close()
    bar.close()
    done, left = _sum([done, len(todo)], world, model)
    index = write_index(out, n_shards, config) if rank == 0 else None
    _barrier(world)
    if index is None:
        import json

        index = json.loads((out / "index.json").read_text())
    return Summary(
        out=out,
        images=index["images"],
        failed=index["failures"],
        shards=n_shards,
        skipped=n_shards - left,
        done_now=done,
        seconds=time.perf_counter() - t0,
        world=world,
        missing=index["missing_shards"],
    )


def _init_dist() -> tuple[int, int, int]:
    """Join the torchrun process group (gloo on CPU, nccl on GPUs) when WORLD_SIZE > 1."""
    rank, world, local = dist_env()
    if world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    return rank, world, local


def _sum(values: list[int], world: int, model: torch.nn.Module) -> list[int]:
    """`values` summed over ranks (waits for every rank: the shards are all written after it)."""
    if world == 1:
        return values
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.int64, device=next(model.parameters()).device)
    dist.all_reduce(t)
    return t.tolist()


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
