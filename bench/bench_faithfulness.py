"""The sanity table of the scores (issue 44), on data made here: planted held-out digits with their masks
(`attention.planted`), scored by `python -m attention evaluate`'s own run (`attention.vit.score.run.evaluate`).

mnist_vit: one digit on its 28 x 28 input, the explained class the digit's own. digit_clip: two digits on a
56 x 56 canvas (2 x 2 cells), the prompts their two captions, the explained answer the first digit's caption,
its mask the first digit's. Beside every method, two controls: "truth" (the share of each patch inside the
explained digit's mask, the other digit's patches ranked last, below the background: the map built to be right,
which should score better than every method) and "random"
(a seeded uniform map: chance; its positive and negative AUCs equal within their intervals).
Also the cost: the run's seconds per item against one forward of one input (median of 20, same thread count).

    python -m bench.bench_faithfulness                 # 200 canvases per model (~4 min on 1 thread)
    python -m bench.bench_faithfulness --items 40
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

MODELS = {
    "mnist_vit": dict(
        maps=("attention", "rollout", "chefer", "grad_rollout", "random", "truth"), cells=(1, 1), digits=1
    ),
    "digit_clip": dict(
        maps=("attention", "rollout", "chefer", "legrad", "similarity", "random", "truth"), cells=(2, 2), digits=2
    ),
}


def one_forward(sc, image) -> float:
    """Seconds of one forward of one prepared input (median of 20)."""
    from attention.vit.engine.preprocess import Preprocess

    x = Preprocess.of(sc.image_model, "native")(image).x[None]
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        sc.predict(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(name: str, items: int, out: Path, protocols: tuple[str, ...] = ("perturbation", "deletion", "insertion")):
    """(the table, seconds per item, seconds of one forward) of `name` on `items` planted canvases."""
    from attention.vit.models.loader import load_vit
    from attention.vit.score import scorer
    from attention.vit.score.data import open_items
    from attention.vit.score.run import evaluate

    cfg = MODELS[name]
    model = load_vit(name, device="cpu")
    data = open_items(f"planted:{items}", cells=cfg["cells"], digits=cfg["digits"], captions=name == "digit_clip")
    table = evaluate(
        data, model, out, model_name=name, maps=cfg["maps"], resolution="native", protocols=protocols, progress=False
    )
    first = data[0]
    fwd = one_forward(scorer(model, list(first.prompts) if first.prompts else None), first.image)
    return table, table.seconds / max(1, table.done_now), fwd


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_faithfulness", description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=200, help="planted canvases per model (default 200)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated: mnist_vit, digit_clip")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the CPU is shared)")
    p.add_argument("--protocols", default="perturbation,deletion,insertion", help="comma-separated (default: all)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            table, per_item, fwd = run(name, args.items, Path(tmp), tuple(args.protocols.split(",")))
        print(f"\n{name}: {table.items} planted canvases, {len(table.failed)} failed; mean [95% interval]")
        print(f"cost: {per_item * 1e3:.0f} ms an item (every map, {args.protocols}) = {per_item / fwd:.0f} forwards")
        print(f"of one input ({fwd * 1e3:.2f} ms), {args.threads} thread(s)\n")
        print(table.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
