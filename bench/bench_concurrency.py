"""How a crowd is served: isolation mechanism by throughput, and the compute budget's calibration.

    python -m bench.bench_concurrency            # ViT-S/16, random weights, 2 cores: about 2 minutes
    python -m bench.bench_concurrency --quick    # fewer requests

Isolation (`attention.vit.extract`): each forward pass records into its own recorder, bound to the
calling context, so passes may run at once on one shared model. The alternative is a lock per
model (one pass at a time). This bench serves the same K requests (different images, queries)
three ways, on one shared model, and prints requests per second relative to one at a time:
- lock:        one request at a time (what a per-model lock gives)
- per-call x2: two threads at once, per-call recording (what the app runs: concurrency 2)
- per-call x4: four threads at once
Every answer is checked against its solo result (0 wrong is required; the bench says so).

Budget (`attention.vit.cost`): for several resolutions it prints the estimated GFLOP of one pass,
the measured seconds and the achieved GFLOP/s, so `ATTENTION_MAX_GFLOP_CPU` can be read as
seconds on this machine. The isolation table is also printed as a Markdown block for the docs (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bench.common import PHOTO, markdown_table, median_seconds, random_vit, readme_block


def isolation_table(rates: dict[str, float], wrong: int) -> str:
    """{way: requests/s} ("lock" first: one at a time) as a Markdown table, with each way's ratio to it."""
    base = rates["lock"]
    header = ["isolation", "requests/s", "ratio to one at a time", "wrong answers (all ways)"]
    return markdown_table(header, [(k, f"{v:.2f}", f"{v / base:.2f}", wrong) for k, v in rates.items()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--resolution", type=int, default=480)
    args = ap.parse_args()

    import numpy as np
    import torch

    from attention.config import SETTINGS
    from attention.vit.cost import forward_gflop, patch_tokens
    from attention.vit.extract import attention_maps

    model = random_vit()
    model.alias = "dino_vits16 (random weights)"
    photos = sorted(PHOTO.parent.glob("*.jpg"))
    k = 4 if args.quick else 8
    reqs = [
        dict(
            image=str(photos[i % len(photos)]),
            query="cls" if i % 2 else (i % 5, (3 * i) % 7),
            resolution=args.resolution,
        )
        for i in range(k)
    ]
    solo = [attention_maps(model, **r).scores for r in reqs]  # also warms up

    def serve(threads: int, lock: threading.Lock | None) -> tuple[float, int]:
        wrong = 0

        def one(i):
            if lock is None:
                return attention_maps(model, **reqs[i]).scores
            with lock:
                return attention_maps(model, **reqs[i]).scores

        t0 = time.perf_counter()
        with ThreadPoolExecutor(threads) as ex:
            outs = list(ex.map(one, range(k)))
        dt = time.perf_counter() - t0
        for a, b in zip(outs, solo):
            wrong += not np.allclose(a, b, atol=1e-5)
        return k / dt, wrong

    rounds = 1 if args.quick else 3
    rates: dict[str, list[float]] = {"lock": [], "per-call x2": [], "per-call x4": []}
    wrong = 0
    for _ in range(rounds):  # interleaved, so drift hits each alike
        for name, (th, lk) in {
            "lock": (2, threading.Lock()),
            "per-call x2": (2, None),
            "per-call x4": (4, None),
        }.items():
            r, w = serve(th, lk)
            rates[name].append(r)
            wrong += w
    base = statistics.median(rates["lock"])
    print(
        f"isolation: {k} requests at {args.resolution} px on one shared ViT-S/16, "
        f"{torch.get_num_threads()} torch threads, "
        f"median of {rounds} interleaved rounds"
    )
    for name, rs in rates.items():
        med = statistics.median(rs)
        print(f"  {name:12s} {med:6.2f} req/s   ratio to one at a time: {med / base:.2f}")
    print(f"  wrong answers: {wrong} (every answer compared with its solo result)")
    print(
        readme_block(
            "bench_concurrency",
            "isolation",
            isolation_table({n: statistics.median(r) for n, r in rates.items()}, wrong),
        )
    )

    print(f"\nbudget calibration (CPU budget now {SETTINGS.gflop_cpu:g} GFLOP per pass):")
    from PIL import Image

    img = Image.open(photos[0]).convert("RGB")
    for res in [224, 480] if args.quick else [224, 480, 800, 1200]:
        tokens = patch_tokens(img.size, 16, res)
        g = forward_gflop(model, tokens)
        s = median_seconds(lambda res=res: attention_maps(model, img, resolution=res), 1 if res > 800 else 3)
        print(f"  {res:5d} px  {tokens:6,d} tokens  {g:8.1f} GFLOP  {s:7.2f} s  {g / s:6.1f} GFLOP/s")


if __name__ == "__main__":
    main()
