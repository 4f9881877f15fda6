"""Attention videos: batched frames vs one frame at a time, and the memory of one large frame.

    python -m bench.bench_video            # both parts (several minutes on 2 cores)
    python -m bench.bench_video --quick    # 4 frames, the memory part at the smaller sizes only

Speed (CPU, ViT-S/16 with random weights, `examples/videos/chelsea.mp4` at 480 px: 640x480, a 30x40
grid, the same frames for every method, decoding included): frames per second of
- batched:    `attention_video` iterated, `--batch` frames per forward (`attention.vit.batch`)
- one:        the same code, one frame per forward (batch_size=1)
- DINO loop:  DINO's video_generation.py loop on the same decoded frames and preprocessing: one frame
              at a time through `get_last_selfattention`, i.e. every layer computing softmax(q k^T) by
              hand (timm's unfused path) and the last layer's full N x N attention kept, the CLS row
              taken from it (its OpenCV JPEG round trip to disk is left out, in its favour)
Times: the median of interleaved repeats in one process; ratios from the same run.

Memory (CPU, ViT-S/8, random weights): peak RSS growth during one frame's extraction, each in a
fresh process (as bench_extract): ours (`batch.batch_maps`, fused attention, O(N) rows) and DINO's
explicit attention. DINO's is measured where it fits here and given for 720x1280 (14,400 patches) by
its formula, heads x N^2 x 4 bytes per attention matrix, scaled by the measured peak / formula ratio
(DINO#213: out of memory allocating 4.64 GiB = 6 x 14401^2 x 4 bytes).

Each part ends with its table as docs/video.md quotes it (Markdown, between its markers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import NamedTuple

from bench import bench_extract
from bench.common import (
    ROOT,
    in_fresh_process,
    interleaved_times,
    load_average,
    markdown_table,
    random_vit,
    readme_block,
    reset_peak,
    status_mb,
)

CLIP = ROOT / "examples" / "videos" / "chelsea.mp4"
SIZES = [(360, 640), (480, 848), (720, 1280)]  # (H, W) frames for the memory part
HEADS, PATCH = 6, 8  # ViT-S/8's, for the memory part


def speed_table(batch: int, n_frames: int, fps: dict[str, float]) -> str:
    """docs/video.md's speed table (Markdown): frames/s of "batched", "one" and "DINO loop", and the ratios."""
    header = [
        "",
        f"batched ({batch} frames a forward)",
        "one frame at a time (same code)",
        "DINO's loop (`get_last_selfattention` per frame)",
    ]
    b, o, d = fps["batched"], fps["one"], fps["DINO loop"]
    return markdown_table(
        header,
        [
            (
                f"ViT-S/16, {n_frames} frames of `{CLIP.name}` at 480 px (30x40 patches), frames/s",
                f"{b:.3f}",
                f"{o:.3f}",
                f"{d:.3f}",
            ),
            ("ratio of batched to it", "1", f"{b / o:.2f}x", f"{b / d:.2f}x"),
        ],
    )


class Frame(NamedTuple):
    """One frame size of the memory part: peak RSS growth, MB (DINO's None where not run)."""

    h: int
    w: int
    ours_mb: float
    dino_mb: float | None


def tokens(h: int, w: int) -> int:
    return (h // PATCH) * (w // PATCH) + 1


def memory_table(frames: list[Frame], dino_ratio: float) -> str:
    """docs/video.md's memory table (Markdown); a size DINO's way did not run is given by its formula,
    heads x N^2 x 4 B per layer, times `dino_ratio` (its measured peak / formula)."""
    header = ["one frame through ViT-S/8, peak memory growth"] + [
        f"{f.h}x{f.w} ({tokens(f.h, f.w):,}{' tokens' if i == 0 else ''})" for i, f in enumerate(frames)
    ]

    def dino(f: Frame) -> str:
        if f.dino_mb is not None:
            return f"{f.dino_mb:,.0f} MB"
        matrix = HEADS * tokens(f.h, f.w) ** 2 * 4
        peak = round(matrix / 2**20 * dino_ratio, -1)
        return (
            f"~{peak:,.0f} MB: heads x N^2 x 4 B = {matrix / 2**30:.2f} GiB per layer "
            f"(DINO#213's out-of-memory), times the measured {dino_ratio:.1f} (its softmax is a second N x N copy); "
            "not run here"
        )

    return markdown_table(
        header,
        [
            ["this engine (fused attention, the query's rows only)"] + [f"{f.ours_mb:,.0f} MB" for f in frames],
            ["DINO's explicit attention"] + [dino(f) for f in frames],
        ],
    )


def model(name: str):
    m = random_vit(name)
    m.crop_rule = "top-left"  # DINO's
    return m.requires_grad_(False)


def dino_loop(m, frames, prep):
    """DINO's loop: per frame, preprocess, get_last_selfattention (explicit attention in every layer,
    the last N x N kept), the CLS row over patches, the mean of heads."""
    out = []
    for f in frames:
        x = prep(f.rgb).x[None]
        _, kept = bench_extract.runner("explicit", m, None, x, None)()
        attn = kept[-1]  # (1, H, N, N)
        out.append(attn[0, :, 0, m.num_prefix_tokens :].mean(0))
    return out


def speed(n_frames: int, batch: int, reps: int) -> None:
    import torch

    from attention import videos
    from attention.vit.preprocess import Preprocess
    from attention.vit.video import attention_video

    m = model("vit_small_patch16_224")
    seconds = n_frames / 10  # the clip is 10 fps
    prep = Preprocess.of(m, 480)

    def run(bs: int):
        return lambda: [f.mean for f in attention_video(m, CLIP, resolution=480, seconds=seconds, batch_size=bs)]

    def dino():
        return dino_loop(m, list(videos.frames(CLIP, seconds=seconds)), prep)

    fns = {"batched": run(batch), "one": run(1), "DINO loop": dino}
    with torch.inference_mode():
        for fn in fns.values():  # warm-up
            assert len(fn()) == n_frames
        t = dict(zip(fns, interleaved_times(list(fns.values()), reps, warmup=False)))
    fps = {k: n_frames / statistics.median(v) for k, v in t.items()}
    print(f"\nspeed: ViT-S/16 (random weights), {n_frames} frames of {CLIP.name} at 480 px (640x480, 30x40 grid), CPU")
    print(f"{'method':12s} {'frames/s':>9s} {'median s':>9s}  all runs (s)")
    for k in fns:
        print(f"{k:12s} {fps[k]:9.3f} {n_frames / fps[k]:9.2f}  {', '.join(f'{v:.2f}' for v in t[k])}")
    print(f"batched ({batch}/forward) vs one at a time: {fps['batched'] / fps['one']:.2f}x")
    print(f"batched ({batch}/forward) vs DINO's loop:    {fps['batched'] / fps['DINO loop']:.2f}x")
    print(f"one at a time vs DINO's loop:       {fps['one'] / fps['DINO loop']:.2f}x")
    print(readme_block("bench_video", "speed", speed_table(batch, n_frames, fps)))


def child(method: str, h: int, w: int) -> None:
    """In a fresh process: peak RSS growth (MB) during one frame's extraction by `method`."""
    import numpy as np
    import torch

    from attention.vit.batch import batch_maps
    from attention.vit.preprocess import Preprocess

    with torch.inference_mode():
        m = model("vit_small_patch8_224")
        prep = Preprocess.of(m, None)
        frame = (np.random.default_rng(0).random((h, w, 3)) * 255).astype(np.uint8)
        x = prep(frame).x[None]
        small = prep(frame[:64, :64]).x[None]
        if method == "ours":
            fn = lambda xx: batch_maps(m, xx)  # noqa: E731
        else:
            fn = lambda xx: bench_extract.runner("explicit", m, None, xx, None)()  # noqa: E731
        fn(small)  # warm-up on a small frame: lazy inits are not the method's cost
        base = reset_peak()
        t0 = time.perf_counter()
        fn(x)
        secs = time.perf_counter() - t0
        peak = status_mb("VmHWM")
    print(json.dumps({"extra_mb": peak - base, "seconds": secs}))


def measure(method: str, h: int, w: int) -> dict:
    out = in_fresh_process(__spec__.name, ["--child", method, str(h), str(w)], check=False)
    return {"extra_mb": float("nan"), "seconds": float("nan"), **out}


def memory(quick: bool) -> None:
    heads, p = HEADS, PATCH
    print("\nmemory: one frame through ViT-S/8 (random weights, 6 heads), native size, CPU; peak RSS growth, MB")
    print(f"{'frame':>10s} {'N':>6s} {'ours MB':>8s} {'ours s':>7s} {'DINO MB':>8s} {'DINO s':>7s} {'formula MB':>10s}")
    ratios, frames = [], []
    for h, w in SIZES:
        n = (h // p) * (w // p) + 1
        formula = heads * n * n * 4 / 2**20  # one layer's attention matrix, fp32
        big = (h, w) == SIZES[-1]
        if quick and big:
            continue
        ours = measure("ours", h, w)
        dino = {"extra_mb": float("nan"), "seconds": float("nan")} if big else measure("dino", h, w)
        if dino["extra_mb"] == dino["extra_mb"]:
            ratios.append(dino["extra_mb"] / formula)
        d_mb = f"{dino['extra_mb']:8.0f}" if not big else f"{'~' + format(formula * max(ratios), '.0f'):>8s}"
        frames.append(Frame(h, w, ours["extra_mb"], None if big else dino["extra_mb"]))
        print(
            f"{f'{h}x{w}':>10s} {n:6d} {ours['extra_mb']:8.0f} {ours['seconds']:7.1f} {d_mb} "
            f"{dino['seconds']:7.1f} {formula:10.0f}"
        )
    if ratios:
        print(f"DINO measured / formula (heads x N^2 x 4 B): {', '.join(f'{r:.2f}' for r in ratios)}")
        n = (720 // p) * (1280 // p) + 1
        print(
            f"720x1280: DINO's one matrix {heads * n * n * 4 / 2**30:.2f} GiB (DINO#213's 4.64 GiB); its peak, by the "
            f"measured ratio, ~{heads * n * n * 4 * max(ratios) / 2**30:.1f} GiB (not run here: 24 GiB shared)"
        )
        print(readme_block("bench_video", "memory", memory_table(frames, max(ratios))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {load_average():.1f}")
    if not args.skip_speed:
        speed(4 if args.quick else args.frames, args.batch, 1 if args.quick else args.reps)
    memory(args.quick)


if __name__ == "__main__":
    main()
