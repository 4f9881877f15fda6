"""Cost of text relevance (issue 35) for a CLIP ViT-B/16 with random weights: time against a plain forward at
224, 448 and 896 px, and peak memory against the full-matrix reference.

    python -m bench.bench_text_relevance --device cuda     # times and peak memory (GPU: max_memory_allocated)
    python -m bench.bench_text_relevance                   # CPU, 1 thread: times; memory in fresh processes (RSS)
    python -m bench.bench_text_relevance --time-only       # times only
    python -m bench.bench_text_relevance --factor          # the measured factor over a forward against the price
    python -m bench.bench_text_relevance --time-only --clock thread --compare   # CPU seconds of the one torch
                                      # thread; beside the path before backward.FusedRows (one prompt)

Model: open_clip CLIP with a timm image tower, `vit_base_patch16_clip_224` (12 blocks, 12 heads, width 768,
class-token pool, linear projection to 512) and CLIP's text tower, random weights, fp32. (open_clip's native
ViT-B-16 tower is not read yet: the timm tower is the same architecture, CLIP's pre-norm ViT.)
time: `text_relevance_rows` (one fused forward, one batched backward, Chefer's rule, LeGrad's last 2 blocks and
the patch similarity) for 1 and 4 prompts / a plain forward `encode_image` under inference_mode; medians of
interleaved repeats. memory: peak allocated beyond the model and input during one call, for the plain forward,
ours (1 and 4 prompts) and the full-matrix reference (tests/vit/text_reference.py: unfused attention, every layer's
N x N attention and its gradient kept, R N x N).
"""

from __future__ import annotations

import argparse
import json
import time

from bench.common import cuda_synced, interleaved_medians, markdown_table

TIMM = "vit_base_patch16_clip_224"


def setup(device: str, depth: int = 12):
    import open_clip
    import torch

    torch.manual_seed(0)
    vision = dict(timm_model_name=TIMM, timm_pool="token", timm_proj="linear", image_size=224)
    text = dict(context_length=77, vocab_size=49408, width=512, heads=8, layers=12)
    clip = open_clip.CLIP(embed_dim=512, vision_cfg=vision, text_cfg=text).eval().requires_grad_(False)
    if depth < 12:
        clip.visual.trunk.blocks = clip.visual.trunk.blocks[:depth]
    from attention.vit.text.tower import ready

    ready(clip)  # any input size (before the reference copies it)
    return clip.to(device)


def child_memory(size: int, method: str, depth: int) -> None:
    """In a fresh process (CPU): peak RSS growth (MB) during one call of `method`, after a warm-up at 64 px."""
    import torch
    import torch.nn.functional as F

    from bench.common import peak_growth_mb
    from tests.vit import text_reference as ref

    torch.set_num_threads(1)
    clip = setup("cpu", depth)
    text = F.normalize(torch.randn(4, 512), dim=-1)
    model = ref.explicit(clip) if method == "reference" else clip

    def call(x):
        if method == "reference":
            return ref.chefer(model, x, text[0], inplace=True)
        return runners(clip, x, text)[method]()

    call(torch.randn(1, 3, 64, 64))
    x = torch.randn(1, 3, size, size)
    print(json.dumps({"extra_mb": peak_growth_mb(lambda: call(x))}))


def cpu_memory(size: int, method: str, depth: int = 12) -> float:
    from bench.common import in_fresh_process

    return in_fresh_process(__spec__.name, ["--child", str(size), method, str(depth)])["extra_mb"]


def runners(clip, x, text):
    import torch

    from attention.vit.text.compute import text_relevance_rows
    from attention.vit.text.tower import ready

    tower = ready(clip)

    def plain():
        with torch.inference_mode():
            return clip.encode_image(x)

    def unfused():  # one prompt by the path before backward.FusedRows: torch's kernel backward, then the rows
        from attention.vit.text import record

        fits, record.fits = record.fits, lambda *a: False
        try:
            return text_relevance_rows(clip, tower, x, text[:1])
        finally:
            record.fits = fits

    return {
        "plain": plain,
        "ours_1": lambda: text_relevance_rows(clip, tower, x, text[:1]),
        "ours_4": lambda: text_relevance_rows(clip, tower, x, text),
        "unfused_1": unfused,
    }


def peak_mb(fn, device: str) -> float:
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def factor(model: str, sides: list[int], prompts: list[int], reps: int) -> None:
    """Text relevance / plain forward measured at each side (square, px) and prompt count, beside the factor
    `price.text_relevance_gflop` prices (over `cost.forward_gflop`): the server's budget check uses the price."""
    import torch
    import torch.nn.functional as F

    from attention.vit.engine.cost import forward_gflop
    from attention.vit.text.compute import text_relevance_rows
    from attention.vit.text.price import text_relevance_gflop
    from attention.vit.text.tower import ready
    from bench.common import load_average

    if model == "digit_clip":
        from attention.vit.text.digit_clip import load_digit_clip

        clip = load_digit_clip()
    else:
        clip = setup("cpu")
    tower = ready(clip)
    trunk, p = tower.trunk, tower.trunk.patch_embed.patch_size[0]
    text = F.normalize(torch.randn(max(prompts), clip.text_projection.shape[-1]), dim=-1)
    rows = []
    for side in sides:
        x = torch.randn(1, trunk.patch_embed.proj.in_channels, side, side)
        tokens = (side // p) ** 2

        def plain(x=x):
            with torch.inference_mode():
                clip.encode_image(x)

        fns = {"plain": plain, **{k: (lambda x=x, k=k: text_relevance_rows(clip, tower, x, text[:k])) for k in prompts}}
        t = interleaved_medians(fns, reps)
        for k in prompts:
            row = {"side": side, "tokens": tokens, "prompts": k, "measured": round(t[k] / t["plain"], 2)}
            row["priced"] = round(text_relevance_gflop(trunk, tokens, k) / forward_gflop(trunk, tokens), 2)
            print(json.dumps(row), flush=True)
            rows.append([f"{side} px", f"{tokens:,}", str(k), f"{row['measured']}x", f"{row['priced']}x"])
    print(f"{model}, CPU 1 thread, load average {load_average():.1f}")
    print(markdown_table(["input", "patch tokens", "prompts", "measured / forward", "priced"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sizes", default="224,448,896")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time-only", action="store_true", help="times only (no memory: its fresh processes take minutes)")
    ap.add_argument("--factor", action="store_true", help="the measured factor against the price")
    ap.add_argument("--model", default="digit_clip", help="--factor: digit_clip or clip_b16 (random weights)")
    ap.add_argument("--prompts", default="1,8", help="--factor: prompt counts")
    ap.add_argument(
        "--clock",
        choices=("wall", "thread"),
        default="wall",
        help="CPU: thread = the calling thread's CPU seconds (torch runs on it alone), for a shared machine",
    )
    ap.add_argument("--compare", action="store_true", help="also one prompt by the path before FusedRows (CPU)")
    ap.add_argument("--child", nargs=3)
    args = ap.parse_args()
    if args.child:
        child_memory(int(args.child[0]), args.child[1], int(args.child[2]))
        return
    import torch
    import torch.nn.functional as F

    from tests.vit import text_reference as ref

    if args.factor:
        torch.set_num_threads(1)
        default = "56,112,224" if args.model == "digit_clip" else "224,448"
        sides = [int(s) for s in (args.sizes if args.sizes != "224,448,896" else default).split(",")]
        factor(args.model, sides, [int(k) for k in args.prompts.split(",")], args.reps)
        return
    if args.device == "cpu":
        torch.set_num_threads(1)
    clip = setup(args.device)
    text = F.normalize(torch.randn(4, 512, device=args.device), dim=-1)
    dev = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU, 1 thread, {args.clock} clock"
    print(f"torch {torch.__version__}, {dev}, CLIP ViT-B/16 (timm tower {TIMM}), random weights, fp32")
    explicit = ref.explicit(clip) if args.device != "cpu" else None  # the reference's model, copied once
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        x = torch.randn(1, 3, size, size, device=args.device)
        fns = runners(clip, x, text)
        if args.device != "cpu":
            fns = {k: cuda_synced(f) for k, f in fns.items()}
        big_cpu = size >= 896 and args.device == "cpu"  # at most 2 calls each, 1 prompt only: minutes per call
        if not args.compare:
            fns.pop("unfused_1")
        if big_cpu:
            fns.pop("ours_4")
        clock = time.thread_time if args.clock == "thread" and args.device == "cpu" else time.perf_counter
        if big_cpu:  # first-call costs paid at a small size
            small = torch.randn(1, 3, 224, 224)
            for fn in runners(clip, small, text).values():
                fn()
        t = interleaved_medians(fns, min(args.reps, 2) if big_cpu else args.reps, warmup=not big_cpu, clock=clock)
        t.setdefault("ours_4", float("nan"))
        row = {"px": size, "tokens": (size // 16) ** 2 + 1, **{f"{k}_ms": round(v * 1e3, 1) for k, v in t.items()}}
        row["ratio_1"] = round(t["ours_1"] / t["plain"], 2)
        row["ratio_4"] = round(t["ours_4"] / t["plain"], 2)
        if "unfused_1" in t:
            row["ratio_unfused_1"] = round(t["unfused_1"] / t["plain"], 2)
        if args.time_only:
            pass
        elif args.device != "cpu":
            row["plain_mb"] = round(peak_mb(fns["plain"], args.device))
            row["ours_1_mb"] = round(peak_mb(fns["ours_1"], args.device))
            row["ours_4_mb"] = round(peak_mb(fns["ours_4"], args.device))
            try:
                row["reference_mb"] = round(
                    peak_mb(lambda x=x: ref.chefer(explicit, x, text[0], inplace=True), args.device)
                )
            except torch.OutOfMemoryError:
                row["reference_mb"] = "out of memory"
        else:
            row["plain_mb"], row["ours_1_mb"] = round(cpu_memory(size, "plain")), round(cpu_memory(size, "ours_1"))
            row["ours_4_mb"] = "-" if big_cpu else round(cpu_memory(size, "ours_4"))
            if size >= 896:  # 12 blocks would need ~20 GB: extrapolated linearly from 2 and 4 blocks
                r2, r4 = cpu_memory(size, "reference", 2), cpu_memory(size, "reference", 4)
                row["reference_mb"] = (
                    f"~{round(r2 + (r4 - r2) / 2 * 10, -2):,.0f} MB (from 2 and 4 blocks: {r2:,.0f}, {r4:,.0f})"
                )
            else:
                row["reference_mb"] = round(cpu_memory(size, "reference"))
        print(json.dumps(row), flush=True)
        results.append(row)
    header = ["input", "tokens N", "plain forward", "text relevance, 1 prompt", "4 prompts"]
    header += ["peak: plain", "ours (1)", "ours (4)", "full-matrix reference"]
    print(markdown_table(header, [table_row(r) for r in results]))


def table_row(r: dict) -> list[str]:
    """One row of the printed table."""

    def mb(k: str) -> str:
        v = r.get(k, "-")
        return f"{v:,} MB" if isinstance(v, int) else str(v)

    four = "-" if r["ours_4_ms"] != r["ours_4_ms"] else f"{r['ours_4_ms']} ms ({r['ratio_4']}x)"  # NaN: not run
    times = [f"{r['plain_ms']} ms", f"{r['ours_1_ms']} ms ({r['ratio_1']}x)", four]
    mems = [mb(k) for k in ("plain_mb", "ours_1_mb", "ours_4_mb", "reference_mb")]
    return [f"{r['px']} px", f"{r['tokens']:,}", *times, *mems]


if __name__ == "__main__":
    main()
