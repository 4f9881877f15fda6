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
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from attention.dataset.decode import Decoded, Item, auto_workers, one_by_one
from attention.dataset.dist import all_sum, barrier, init_dist
from attention.dataset.shards import check_run, is_done, write_index, write_shard
from attention.dataset.sources import Source
from attention.dataset.writer import Shard, Writer, batch_rows
from attention.errors import InputError
from attention.images import MAX_TOKENS
from attention.validate import layer_index
from attention.vit.backbone import describe
from attention.vit.engine.batch import BatchMaps, GridBuckets, batch_maps
from attention.vit.engine.pooling import EMBEDDINGS, embedding_kind
from attention.vit.engine.preprocess import Preprocess
from attention.vit.engine.query import Query, has_pool, prefix_tokens, to_text, tokens_of
from attention.vit.engine.query import default as default_query
from attention.vit.engine.query import index as query_index
from attention.vit.engine.query import parse as parse_query
from attention.vit.engine.request import RESOLUTION, THRESHOLD


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


def extract(
    source: Source,
    model: torch.nn.Module,
    out: Path,
    *,
    model_name: str,
    layer: int = -1,
    query: Query | None = None,
    resolution: int | str | None = RESOLUTION,
    threshold: float = THRESHOLD.default,
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
    threshold = THRESHOLD.check(threshold)
    param = next(model.parameters())
    workers = auto_workers(param.device) if workers is None else workers
    if shard_size < 1 or workers < 0:
        raise InputError(f"Shard size {shard_size} / workers {workers}: accepted shard size >= 1, workers >= 0.")
    t0 = time.perf_counter()
    rank, world, _ = init_dist()
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
        collate_fn=one_by_one,
        prefetch_factor=max(2, 2 * batch_size // workers) if workers else None,  # about two batches ahead
    )
    from tqdm.auto import tqdm

    bar = tqdm(total=len(ids), unit="img", desc="extract", disable=not progress or rank != 0, file=sys.stderr)
    buckets: GridBuckets[Item] = GridBuckets(batch_size, lambda it: it.grid)
    writer = Writer()
    done = 0

    def post(shard: Shard, items: list[Item], results: list[BatchMaps]) -> None:  # on the writer thread
        rows, fails = batch_rows(items, results, threshold, pca)
        shard.rows += rows
        shard.fails += fails

    def write(shard: Shard) -> None:  # on the writer thread, after the shard's every batch
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

    def run(shard: Shard, items: list[Item]) -> None:
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

    def finish(shard: Shard) -> None:
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
                shard = Shard(k)
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
    done, left = all_sum([done, len(todo)], world, model)
    index = write_index(out, n_shards, config) if rank == 0 else None
    barrier(world)
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
