"""One evaluation run over a dataset: every item's maps scored (`score_maps`), in shards of consecutive items
written as they finish (OUT/scores/shard-00000.jsonl: one line per item), so a run resumes where it stopped;
under torch.distributed (`torchrun`) rank r of W takes shards r, r + W, ... as `extract` does; rank 0 then
reads every shard and writes one table of means with 95% confidence intervals (OUT/table.md, OUT/table.json).

    table = evaluate(open_items("planted:1000"), load_vit("mnist_vit"), Path("out"), maps=("chefer", "random"))
    print(table.markdown())

Intervals: a mean of per-item figures (AUCs, deletion, insertion, pointing) +- 1.96 standard errors (the
normal approximation, ddof = 1); mIoU and pixel accuracy are the dataset's (from the summed counts, as Chefer
et al.'s `imagenet_seg_eval.py`), their interval the 2.5th and 97.5th percentiles of 1,000 bootstrap
resamples of the items (seeded).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attention.dataset.dist import all_sum, barrier, init_dist
from attention.dataset.shards import check_run
from attention.errors import AttentionError, InputError
from attention.vit.engine.request import RESOLUTION
from attention.vit.score.compute import PROTOCOLS, check_options, score_maps
from attention.vit.score.data import Items
from attention.vit.score.maps import check_names
from attention.vit.score.protocol import STEPS, Segmentation
from attention.vit.score.target import scorer

MEANS = ("auc_positive", "auc_negative", "top1_positive", "top1_negative", "deletion", "insertion", "pointing")
BETTER = {"auc_positive": "lower", "auc_negative": "higher", "deletion": "lower", "insertion": "higher"}
BETTER |= {"top1_positive": "lower", "top1_negative": "higher"}
BOOTSTRAP = 1000


def shard_path(out: Path, k: int) -> Path:
    return out / "scores" / f"shard-{k:05d}.jsonl"


def _row(i: int, it, scored) -> dict:
    maps = {}
    for name, s in scored.maps.items():
        f = {k: v for k, v in s.figures().items() if k in MEANS}
        if s.segmentation is not None:
            seg = s.segmentation
            f["seg"] = [seg.correct, seg.labeled, *seg.inter, *seg.union]
        maps[name] = f
    return {"id": i, "name": it.name, "target": scored.target, "top": scored.top, "maps": maps}


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


@dataclass
class Table:
    """Per map, per figure: (mean, low, high, n); items scored, failures, the run's settings and time."""

    figures: dict[str, dict[str, tuple[float, float, float, int]]]
    items: int
    failed: list[dict]
    settings: dict
    seconds: float = 0.0
    done_now: int = 0
    world: int = 1

    def markdown(self) -> str:
        """The table, one row per map (ordered by positive AUC, lower first), mean [95% interval] per figure."""
        cols = [c for c in (*MEANS, "miou", "pixel_accuracy") if any(c in f for f in self.figures.values())]
        head = [f"{c} ({BETTER[c]} is better)" if c in BETTER else c for c in cols]
        lines = ["| map | " + " | ".join(head) + " |", "|---" * (len(cols) + 1) + "|"]
        rows = sorted(self.figures.items(), key=lambda kv: kv[1].get("auc_positive", (0,))[0])
        for name, f in rows:
            cells = [f"{f[c][0]:.3f} [{f[c][1]:.3f}, {f[c][2]:.3f}]" if c in f else "" for c in cols]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def _ci(values: list[float]) -> tuple[float, float, float, int]:
    a = np.asarray(values, np.float64)
    m = float(a.mean())
    half = 1.96 * float(a.std(ddof=1)) / math.sqrt(len(a)) if len(a) > 1 else float("nan")
    return m, m - half, m + half, len(a)


def _seg_ci(counts: np.ndarray, seed: int = 0) -> dict[str, tuple[float, float, float, int]]:
    """mIoU and pixel accuracy of summed counts (n, 6: correct, labeled, inter bg/fg, union bg/fg), and their
    bootstrap intervals over the items."""

    def figures(c: np.ndarray) -> tuple[float, float]:
        s = c.sum(0)
        seg = Segmentation(int(s[0]), int(s[1]), (int(s[2]), int(s[3])), (int(s[4]), int(s[5])))
        return seg.miou, seg.pixel_accuracy

    whole = figures(counts)
    rng = np.random.default_rng(seed)
    boot = np.array([figures(counts[rng.integers(0, len(counts), len(counts))]) for _ in range(BOOTSTRAP)])
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    n = len(counts)
    return {"miou": (whole[0], lo[0], hi[0], n), "pixel_accuracy": (whole[1], lo[1], hi[1], n)}


def table_of(out: Path, n_shards: int, settings: dict) -> Table:
    """The table of every finished shard's rows (read from OUT/scores/)."""
    rows, failed = [], []
    for k in range(n_shards):
        path = shard_path(out, k)
        if path.exists():
            for line in path.read_text().splitlines():
                r = json.loads(line)
                (failed if "error" in r else rows).append(r)
    figures: dict[str, dict] = {}
    names = list(dict.fromkeys(n for r in rows for n in r["maps"]))
    for name in names:
        per = [r["maps"][name] for r in rows if name in r["maps"]]
        f = {c: _ci([p[c] for p in per]) for c in MEANS if all(c in p for p in per) and per}
        segs = [p["seg"] for p in per if "seg" in p]
        if segs:
            f |= _seg_ci(np.asarray(segs, np.int64))
        figures[name] = f
    return Table(figures, len(rows), failed, settings)


def evaluate(
    items: Items,
    model: torch.nn.Module,
    out: Path,
    *,
    model_name: str,
    maps: tuple[str, ...],
    prompts: list[str] | None = None,
    resolution=RESOLUTION,
    steps=STEPS,
    value: str = "black",
    unit: str = "patch",
    protocols=PROTOCOLS,
    tolerance: float = 1.0,
    shard_size: int = 100,
    seed: int = 0,
    progress: bool = True,
) -> Table:
    """Score `maps` on every item of `items` into `out` (resumed when run.json there has the same settings);
    the table on every rank (rank 0 writes table.md and table.json). prompts: CLIP's, for items without their
    own. A failed item (unreadable image, a typed error) is recorded with its reason and left out of the table."""
    if shard_size < 1:
        raise InputError(f"Shard size {shard_size}: accepted 1 or more.")
    t0 = time.perf_counter()
    rank, world, _ = init_dist()
    settings = {
        "model": model_name,
        "maps": list(maps),
        "prompts": prompts,
        "resolution": str(resolution),
        "steps": list(steps),
        "value": value,
        "unit": unit,
        "protocols": list(protocols),
        "tolerance": tolerance,
        "seed": seed,
        "shard_size": shard_size,
        "source": items.spec,
    }
    out.mkdir(parents=True, exist_ok=True)
    check_run(out, settings, write=rank == 0)
    n_shards = math.ceil(len(items) / shard_size)
    todo = [k for k in range(rank, n_shards, world) if not shard_path(out, k).exists()]
    scorers: dict = {}  # by prompts: an item's own (planted captions), else `prompts` (None: a classifier)

    def scorer_for(own: tuple[str, ...] | None):
        key = own or (tuple(prompts) if prompts else None)
        if key not in scorers:
            scorers.clear() if len(scorers) > 64 else None
            scorers[key] = scorer(model, list(key) if key else None)
        return scorers[key]

    if len(items):  # the settings and map names checked once, before any shard
        check_options(steps, value, unit, protocols, tolerance)
        check_names(scorer_for(items[0].prompts), maps)
    from tqdm.auto import tqdm

    total = sum(min(len(items), (k + 1) * shard_size) - k * shard_size for k in todo)
    bar = tqdm(total=total, unit="item", desc="evaluate", disable=not progress or rank != 0, file=sys.stderr)
    done = 0
    for k in todo:
        rows = []
        for i in range(k * shard_size, min(len(items), (k + 1) * shard_size)):
            try:
                it = items[i]
                sc = scorer_for(it.prompts)
                scored = score_maps(
                    sc, it.image, list(maps), it.target, mask=it.mask, others=it.others, resolution=resolution,
                    steps=steps, value=value, unit=unit, protocols=protocols, tolerance=tolerance, seed=seed + i,
                )  # fmt: skip
                rows.append(_row(i, it, scored))
            except AttentionError as e:
                rows.append({"id": i, "name": f"item {i}", "error": f"{type(e).__name__}: {e}"})
            done += 1
            bar.update(1)
        _write(shard_path(out, k), rows)
    bar.close()
    (done,) = all_sum([done], world, model)
    barrier(world)
    table = table_of(out, n_shards, settings)
    table.seconds, table.done_now, table.world = time.perf_counter() - t0, done, world
    if rank == 0:
        (out / "table.md").write_text(table.markdown() + "\n")
        doc = {"figures": table.figures, "items": table.items, "failed": table.failed, "settings": settings}
        (out / "table.json").write_text(json.dumps(doc, indent=1))
    return table
