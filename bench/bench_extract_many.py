"""Throughput over many images: the per-image CLI vs batched `extract` vs timm's batched forward alone.

    python -m bench.bench_extract_many                    # ViT-S/16 at 224 px, 512 images, CPU
    python -m bench.bench_extract_many --images 128 --rounds 1
    python -m bench.bench_extract_many --device cuda --batch-sizes 32,64,128,256   # on a GPU (fp16)

Images: 256 x 256 JPEGs cut from the shipped photos (one grid at 224 px), written to a temporary folder.
Images per second, each method over all the images, methods interleaved round after round (median):
  per-image  `python -m attention maps FILES --resolution 224` (its code path, `main(["maps", ...])`):
             one forward per image, PNG overlays and the .npz written per image (on the first
             --per-image images: its rate is per image, and it is slow)
  extract    `python -m attention extract FOLDER --resolution 224` (`main(["extract", ...])`): DataLoader
             workers decoding (as many as extract picks from os.cpu_count(), unless --workers), one
             forward per batch, rows and Parquet shards on a writer thread, index
  limit      timm's `forward_features` alone on the already decoded, batched tensors (the ceiling)
and prints extract / limit (target >= 0.85) and extract / per-image (target >= 2). Then extract under
`torchrun --nproc_per_node 1` and `2` (gloo on CPU; 4 shards, so each of 2 ranks has 2), each its own
rate as its summary prints it.
The rates are also printed as a Markdown block for docs/extract.md.

The model is `dino_vits16` through `load_vit`: the real weights when cached, else *random* weights of
the same architecture in a temporary HF cache (same cost); the output says which.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import PHOTO, ROOT, load_average, markdown_table, offline_dino, readme_block


def make_images(folder: Path, n: int, side: int = 256) -> list[Path]:
    """n JPEGs of side x side px, random crops of the shipped photos."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    photos = [Image.open(p).convert("RGB") for p in sorted(PHOTO.parent.glob("*.jpg"))]
    out = []
    for i in range(n):
        im = photos[i % len(photos)]
        s = int(rng.integers(side // 2, min(im.size) + 1))
        x, y = int(rng.integers(0, im.size[0] - s + 1)), int(rng.integers(0, im.size[1] - s + 1))
        p = folder / f"img_{i:05d}.jpg"
        im.crop((x, y, x + s, y + s)).resize((side, side), Image.BICUBIC).save(p, quality=90)
        out.append(p)
    return out


def quiet(fn):
    """fn with its stdout and stderr (progress lines) discarded."""

    def run():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return fn()

    return run


def torchrun_rate(nproc: int, folder: Path, out: Path, args, env: dict) -> float:
    """images/s of `extract` under torchrun with `nproc` processes, as its summary prints it."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    cmd += ["-m", "attention", "extract", str(folder), "--out", str(out), "--model", "dino_vits16"]
    cmd += ["--resolution", "224", "--batch-size", str(args.batch_size), *workers_flag(args), "--no-progress"]
    cmd += ["--shard-size", str(max(args.batch_size, args.images // 4))]  # 4 shards, 2 per rank
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    m = re.search(r"([\d.]+) images/s on", r.stdout)
    if r.returncode or m is None:
        raise SystemExit(f"torchrun {nproc} failed:\n{r.stdout}\n{r.stderr[-3000:]}")
    return float(m.group(1))


def rates_table(rate: dict[str, float]) -> str:
    """{method: images/s} ("per-image", "extract bN", "limit bN") as a Markdown table, each with the ratio
    of batched extract (at the same batch; per-image: the first batch) to it."""
    first = next(k for k in rate if k.startswith("extract"))

    def extract_to(k: str) -> float:
        return rate[k.replace("limit", "extract")] / rate[k] if k != "per-image" else rate[first] / rate[k]

    header = ["method", "images/s", "extract / it"]
    return markdown_table(header, [(k, f"{v:.2f}", f"{extract_to(k):.2f}") for k, v in rate.items()])


def workers_flag(args) -> list[str]:
    """`--workers N` when the bench was given one, else nothing (extract's own choice)."""
    return [] if args.workers is None else ["--workers", str(args.workers)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (median)")
    ap.add_argument("--per-image", type=int, default=64, help="images the per-image path runs on")
    ap.add_argument("--batch-size", type=int, default=64, help="extract's and the limit's batch (CPU)")
    ap.add_argument("--workers", type=int, default=None, help="extract's DataLoader workers (default: its own choice)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-sizes", default="32,64,128,256", help="GPU only: batch sizes to compare")
    ap.add_argument("--no-torchrun", action="store_true", help="skip the 1 vs 2 process runs")
    args = ap.parse_args()

    home, weights = offline_dino("bench-many")

    import torch

    from attention.__main__ import main as cli
    from attention.vit.models import load_vit
    from attention.vit.preprocess import Preprocess

    tmp = Path(tempfile.mkdtemp(prefix="bench-many-"))
    folder = tmp / "images"
    folder.mkdir()
    files = make_images(folder, args.images)
    model = load_vit("dino_vits16", device=args.device)
    prep = Preprocess.of(model, 224)
    param = next(model.parameters())
    print(f"{args.images} images of 256x256 px at 224 px ({prep(files[0]).grid} grid), {weights}")
    from attention.dataset.decode import auto_workers

    workers = auto_workers(param.device) if args.workers is None else args.workers
    print(
        f"device {args.device} ({param.dtype}), {torch.get_num_threads()} torch threads, {os.cpu_count()} cores, "
        f"extract with {workers} DataLoader worker(s)"
    )
    print(f"load average before: {load_average():.2f}")

    def limit_at(bs: int):
        xs = torch.stack([prep(f).x for f in files])  # decoded once, outside the timing

        def run():
            with torch.inference_mode():
                for i in range(0, len(xs), bs):
                    model.forward_features(xs[i : i + bs].to(param.device, param.dtype))
            if param.is_cuda:
                torch.cuda.synchronize()

        return run

    def extract_at(bs: int):
        def run():
            out = tmp / "out"
            shutil.rmtree(out, ignore_errors=True)  # a fresh run each time (no resumption)
            argv = ["extract", str(folder), "--out", str(out), "--model", "dino_vits16", "--resolution", "224"]
            assert cli([*argv, "--batch-size", str(bs), *workers_flag(args), "--no-progress"]) == 0

        return quiet(run)

    few = files[: args.per_image]

    def per_image():
        out = tmp / "maps"
        shutil.rmtree(out, ignore_errors=True)
        assert cli(["maps", *map(str, few), "--out", str(out), "--model", "dino_vits16", "--resolution", "224"]) == 0

    gpu = param.is_cuda
    sizes = [int(b) for b in args.batch_sizes.split(",")] if gpu else [args.batch_size]
    methods = {"per-image": quiet(per_image)}
    for bs in sizes:
        methods[f"extract b{bs}"] = extract_at(bs)
        methods[f"limit b{bs}"] = limit_at(bs)
    with torch.inference_mode():  # warm-up: first-call costs
        model.forward_features(prep(files[0]).x[None].to(param.device, param.dtype))
    count = {k: len(few) if k == "per-image" else len(files) for k in methods}
    times: dict[str, list[float]] = {k: [] for k in methods}
    for r in range(args.rounds):
        for name, fn in methods.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
            rate = count[name] / times[name][-1]
            print(f"  round {r + 1} {name:>14}: {rate:8.1f} images/s (load {load_average():.2f})", flush=True)
    rate = {k: count[k] / statistics.median(v) for k, v in times.items()}
    print(f"\nimages/s, median of {args.rounds} interleaved rounds (load average now {load_average():.2f}):")
    for name, v in rate.items():
        print(f"  {name:>14}: {v:8.1f}")
    for bs in sizes:
        e, lim = rate[f"extract b{bs}"], rate[f"limit b{bs}"]
        print(
            f"  batch {bs}: extract / limit = {e / lim:.2f} (target >= 0.85); "
            f"extract / per-image = {e / rate['per-image']:.2f} (target >= 2)"
        )
    print(readme_block("bench_extract_many", "rates", rates_table(rate)))
    if not args.no_torchrun and not gpu:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        one = torchrun_rate(1, folder, tmp / "tr1", args, env)
        two = torchrun_rate(2, folder, tmp / "tr2", args, env)
        print(f"torchrun extract: 1 process {one:.1f} images/s, 2 processes {two:.1f} images/s ({two / one:.2f}x)")
    shutil.rmtree(tmp, ignore_errors=True)
    if home:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
