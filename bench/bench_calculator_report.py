"""Cost of the calculator's HTML report for big inputs: every table vs heatmaps only, in one run.

    python -m bench.bench_calculator_report            # 64 x 64 Q, K, V, 4 heads, causal mask
    python -m bench.bench_calculator_report --n 32 --heads 2

Prints, for the same seeded inputs: the time of the numbers (`run`), and the time and size of
`to_html` with a table for every matrix (`table_max=None`, the report before TABLE_MAX) and with
the default TABLE_MAX (bigger matrices are heatmaps only). Times: median of `--repeats`,
interleaved.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attention.calculator import Settings
from attention.calculator.report import TABLE_MAX, compute, to_html
from bench.common import interleaved_medians


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="rows and columns of Q, K and V")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    matrices = {k: np.round(rng.normal(size=(args.n, args.n)), 2) for k in "QKV"}
    t0 = time.perf_counter()
    r = compute(matrices, Settings(heads=args.heads, mask_mode="causal"))
    numbers = time.perf_counter() - t0
    limits = {"every table": None, f"TABLE_MAX={TABLE_MAX}": TABLE_MAX}
    times = interleaved_medians({k: lambda t=t: to_html(r, t) for k, t in limits.items()}, args.repeats, warmup=False)
    sizes = {k: len(to_html(r, t).encode()) for k, t in limits.items()}
    print(f"{args.n} x {args.n} Q, K, V, {args.heads} heads, causal mask; numbers (run): {numbers:.3f} s")
    for name in times:
        print(f"  to_html, {name:<13} {times[name]:7.3f} s  {sizes[name] / 1e6:7.3f} MB")
    before, after = times.values()
    size_before, size_after = sizes.values()
    print(f"  ratio before/after: time {before / after:.1f}x, size {size_before / size_after:.1f}x")


if __name__ == "__main__":
    main()
