"""Cost of class relevance (issue 22) on ViT-S/16 with an ImageNet head (CPU, random weights), in one run.

    python -m bench.bench_relevance            # 224 and 480 px times, memory at 224, 480 and 1024 px (~10 min)
    python -m bench.bench_relevance --full     # also the full-matrix reference at 1024 px with all 12 layers (~10 GB)

time: `relevance_rows` (one fused forward + one backward, Chefer's rule, grad-rollout and the CLS attention
from rows of A and dA chunk by chunk) / a plain fused forward `model(x)`: medians of interleaved repeats
in one process, torch on 1 thread (the machine is shared: fewer threads, steadier ratios).
memory: peak extra MB of one call in a fresh process (peak RSS minus RSS once model and input are ready,
after a warm-up call), for ours and for the full-matrix reference (tests/vit/relevance_reference.py:
timm's unfused attention, every layer's N x N attention and its gradient kept, R = N x N). At 1024 px the
reference runs with 2 and 4 blocks by default (its 12-block peak, ~10 GB, is asked for with --full) and
its 12-block figure is extrapolated from those two, marked as such. Ends with the memory table as docs/relevance.md
quotes it (Markdown, between its markers).
"""

from __future__ import annotations

import argparse
import json
from typing import NamedTuple

from bench.common import in_fresh_process, interleaved_medians, markdown_table, peak_growth_mb, random_vit, readme_block

NAME = "vit_small_patch16_224"


def setup(size: int, depth: int = 12):
    import torch

    model = random_vit(NAME, num_classes=1000, depth=depth).requires_grad_(False)  # with its ImageNet head
    x = torch.randn(1, 3, size, size)
    return model, x


def runner(method: str, model, x):
    import torch

    from attention.vit.relevance import relevance_rows
    from tests.vit.relevance_reference import chefer_row, full_attention_and_grads, grad_rollout_row

    if method == "plain":

        def plain():
            with torch.inference_mode():
                return model(x)

        return plain
    if method == "ours":
        return lambda: relevance_rows(model, x)
    if method == "reference":

        def reference():
            A, G, _, _ = full_attention_and_grads(model, x, inplace=True)
            return chefer_row(A, G), grad_rollout_row(A, G, 0.9)

        return reference
    raise ValueError(method)


def child_memory(size: int, method: str, depth: int) -> None:
    """In a fresh process: peak RSS growth (MB) during one call of `method` (after a warm-up call at 224 px)."""
    import torch

    torch.set_num_threads(1)
    model, x = setup(size, depth)
    runner(method, model, setup(224, depth)[1])()  # warm-up at a small size: lazy inits are not the cost
    print(json.dumps({"extra_mb": peak_growth_mb(runner(method, model, x))}))


def memory(size: int, method: str, depth: int = 12) -> float:
    return in_fresh_process(__spec__.name, ["--child", str(size), method, str(depth)])["extra_mb"]


def times(size: int, reps: int) -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    model, x = setup(size)
    return interleaved_medians({m: runner(m, model, x) for m in ("plain", "ours")}, reps)


class Memory(NamedTuple):
    """Peak extra MB of one call at one input size."""

    size: int  # px, square
    tokens: int
    plain: float
    ours: float
    reference: float  # the full-matrix reference, 12 blocks (measured, or extrapolated from 2 and 4)
    blocks_2_4: tuple[float, float] | None = None  # the reference's 2- and 4-block peaks when extrapolated


def memory_table(rows: list[Memory]) -> str:
    """docs/relevance.md's table of peak extra memory (Markdown)."""
    header = ["input", "tokens N", "plain forward", "relevance (ours)", "full-matrix reference"]

    def reference(r: Memory) -> str:
        if r.blocks_2_4 is None:
            return f"{r.reference:,.0f} MB"
        two, four = r.blocks_2_4
        how = f"12 blocks extrapolated from 2 and 4 blocks: {two:,.0f} and {four:,.0f} MB"
        return f"~{round(r.reference, -2):,.0f} MB ({how})"

    return markdown_table(
        header,
        [(f"{r.size} px", f"{r.tokens:,}", f"{r.plain:,.0f} MB", f"{r.ours:,.0f} MB", reference(r)) for r in rows],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="the reference at 1024 px with all 12 blocks (~10 GB)")
    ap.add_argument("--child", nargs=3)
    args = ap.parse_args()
    if args.child:
        child_memory(int(args.child[0]), args.child[1], int(args.child[2]))
        return
    import torch

    print(f"torch {torch.__version__}, 1 thread, CPU, {NAME} (12 blocks, 6 heads, ImageNet head), random weights")
    print("time: relevance (forward + backward + Chefer + grad-rollout + CLS attention) / plain forward")
    for size in (224, 480):
        t = times(size, 9 if size == 224 else 5)
        n = (size // 16) ** 2 + 1
        print(
            f"  {size} px (N={n}): plain {t['plain'] * 1e3:.0f} ms, relevance {t['ours'] * 1e3:.0f} ms, "
            f"ratio {t['ours'] / t['plain']:.2f}x",
            flush=True,
        )
    print("memory: peak extra MB of one call (fresh process)")
    rows = []
    for size in (224, 480, 1024):
        n = (size // 16) ** 2 + 1
        plain, ours = memory(size, "plain"), memory(size, "ours")
        if size == 1024 and not args.full:
            r2, r4 = memory(size, "reference", 2), memory(size, "reference", 4)
            ref = r2 + (r4 - r2) / 2 * 10  # 12 blocks, extrapolated linearly in blocks
            how = f"extrapolated from 2 blocks {r2:.0f} MB and 4 blocks {r4:.0f} MB"
            rows.append(Memory(size, n, plain, ours, ref, (r2, r4)))
        else:
            ref, how = memory(size, "reference"), "measured"
            rows.append(Memory(size, n, plain, ours, ref))
        print(
            f"  {size} px (N={n}): plain forward {plain:.0f} MB, ours {ours:.0f} MB, "
            f"full-matrix reference {ref:.0f} MB ({how}); reference / ours {ref / ours:.1f}x",
            flush=True,
        )
    print(readme_block("bench_relevance", "memory", memory_table(rows)))


if __name__ == "__main__":
    main()
