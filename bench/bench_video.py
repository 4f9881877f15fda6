"""Attention videos: batched frames vs one frame at a time, and the memory of one large frame.

    python bench/bench_video.py            # both parts (several minutes on 2 cores)
    python bench/bench_video.py --quick    # 4 frames, the memory part at the smaller sizes only

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
fresh process (as bench_extract.py): ours (`batch.batch_maps`, fused attention, O(N) rows) and DINO's
explicit attention. DINO's is measured where it fits here and given for 720x1280 (14,400 patches) by
its formula, heads x N^2 x 4 bytes per attention matrix, scaled by the measured peak / formula ratio
(DINO#213: out of memory allocating 4.64 GiB = 6 x 14401^2 x 4 bytes).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CLIP = ROOT / "examples" / "videos" / "chelsea.mp4"
SIZES = [(360, 640), (480, 848), (720, 1280)]  # (H, W) frames for the memory part


def model(name: str):
    import timm
    import torch

    torch.manual_seed(0)
    m = timm.create_model(name, pretrained=False, num_classes=0, dynamic_img_size=True).eval()
    m.crop_rule = "top-left"  # DINO's
    return m.requires_grad_(False)


def dino_loop(m, frames, prep):
    """DINO's loop: per frame, preprocess, get_last_selfattention (explicit attention in every layer,
    the last N x N kept), the CLS row over patches, the mean of heads."""
    import bench_extract

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
    from attention.vit.batch import Preprocess
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
        t = {k: [] for k in fns}
        for _ in range(reps):  # interleaved, so drifting load hits every method alike
            for k, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                t[k].append(time.perf_counter() - t0)
    fps = {k: n_frames / statistics.median(v) for k, v in t.items()}
    print(f"\nspeed: ViT-S/16 (random weights), {n_frames} frames of {CLIP.name} at 480 px (640x480, 30x40 grid), CPU")
    print(f"{'method':12s} {'frames/s':>9s} {'median s':>9s}  all runs (s)")
    for k in fns:
        print(f"{k:12s} {fps[k]:9.3f} {n_frames / fps[k]:9.2f}  {', '.join(f'{v:.2f}' for v in t[k])}")
    print(f"batched ({batch}/forward) vs one at a time: {fps['batched'] / fps['one']:.2f}x")
    print(f"batched ({batch}/forward) vs DINO's loop:    {fps['batched'] / fps['DINO loop']:.2f}x")
    print(f"one at a time vs DINO's loop:       {fps['one'] / fps['DINO loop']:.2f}x")


def child(method: str, h: int, w: int) -> None:
    """In a fresh process: peak RSS growth (MB) during one frame's extraction by `method`."""
    import bench_extract
    import numpy as np
    import torch

    from attention.vit.batch import Preprocess, batch_maps

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
        gc.collect()
        base = bench_extract._status_mb("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak (VmHWM) to the current RSS
        t0 = time.perf_counter()
        fn(x)
        secs = time.perf_counter() - t0
        peak = bench_extract._status_mb("VmHWM")
    print(json.dumps({"extra_mb": peak - base, "seconds": secs}))


def measure(method: str, h: int, w: int) -> dict:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}  # freed tensors go back to the OS at once
    out = subprocess.run(
        [sys.executable, __file__, "--child", method, str(h), str(w)], capture_output=True, text=True, env=env
    )
    if out.returncode:
        return {"extra_mb": float("nan"), "seconds": float("nan"), "error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory(quick: bool) -> None:
    heads, p = 6, 8
    print("\nmemory: one frame through ViT-S/8 (random weights, 6 heads), native size, CPU; peak RSS growth, MB")
    print(f"{'frame':>10s} {'N':>6s} {'ours MB':>8s} {'ours s':>7s} {'DINO MB':>8s} {'DINO s':>7s} {'formula MB':>10s}")
    ratios = []
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


def main() -> None:
    ap = argparse.ArgumentParser()
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

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    if not args.skip_speed:
        speed(4 if args.quick else args.frames, args.batch, 1 if args.quick else args.reps)
    memory(args.quick)


if __name__ == "__main__":
    main()
