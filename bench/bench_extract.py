"""Cost of attention extraction against a plain fused forward, in one run (CPU, random weights).

    python -m bench.bench_extract            # full table (a few minutes on 2 cores)
    python -m bench.bench_extract --quick    # 224 px only
    python -m bench.bench_extract --only dinov3   # the configurations whose model name contains "dinov3"

For each model/size it prints, relative to a plain fused `forward_features` of the same model
and input:
- rows:     `query_rows` (CLS, every layer's row, one pass) on the same input tensor: the
            extraction's own cost
- maps:     `attention_maps` end to end (also decoding the image, resizing, normalising)
- rollout:  `attention_maps(keep_qk=True)` + chunked `rollout`: time ratio, peak extra memory
- explicit: the DINO-style reference, every layer computing softmax(q k^T) v by hand
            (timm's unfused path) and the last layer's full N x N attention kept
Times: median of interleaved repeats in one process. Peak extra memory: each method in its
own fresh subprocess, peak RSS minus RSS after the model and input are ready.
"""

from __future__ import annotations

import argparse
import json

from bench.common import in_fresh_process, interleaved_medians, peak_growth_mb, random_vit

CONFIGS = [
    ("vit_small_patch16_224.dino", 224),
    ("vit_small_patch16_224.dino", 480),
    ("vit_small_patch16_224.dino", 1024),
    ("vit_small_patch8_224.dino", 480),
    # DINOv3 ViT-S/16 (timm Eva: RoPE after q/k norms, 4 registers): the kernel hook reads q, k after RoPE
    ("vit_small_patch16_dinov3", 480),
    ("vit_small_patch16_dinov3", 1024),
]
METHODS = ("plain", "rows", "maps", "rollout", "explicit")


def setup(name: str, size: int):
    import numpy as np
    from PIL import Image

    model = random_vit(name)
    img = Image.fromarray((np.random.default_rng(0).random((size, size, 3)) * 255).astype(np.uint8))
    from attention.images import to_tensor

    cfg = model.pretrained_cfg
    x, _ = to_tensor(img, patch_size=model.patch_embed.patch_size[0], mean=cfg["mean"], std=cfg["std"], resolution=size)
    return model, img, x


def runner(method: str, model, img, x, size: int):

    from attention.vit.engine.extract import attention_maps, query_rows
    from attention.vit.engine.flow import rollout

    if method == "plain":
        return lambda: model.forward_features(x)
    if method == "rows":  # extraction alone, on the same input tensor as "plain"
        return lambda: query_rows(model, x, 0)
    if method == "maps":  # end to end: decode, preprocess, forward with extraction, result arrays
        return lambda: attention_maps(model, img, resolution=size)
    if method == "rollout":
        return lambda: rollout(attention_maps(model, img, resolution=size, keep_qk=True))
    if method == "explicit":

        def explicit():
            kept = []
            blocks = model.blocks
            for b in blocks:
                b.attn.fused_attn = False
            h = blocks[-1].attn.attn_drop.register_forward_hook(lambda m, a, o: kept.append(o))  # last layer's N x N
            try:
                return model.forward_features(x), kept
            finally:
                h.remove()
                for b in blocks:
                    b.attn.fused_attn = True

        return explicit
    raise ValueError(method)


def child_memory(name: str, size: int, method: str) -> None:
    """In a fresh process: peak RSS growth (MB) during one call of `method` (after a warm-up call)."""
    import torch

    with torch.inference_mode():
        model, img, x = setup(name, size)
        fn = runner(method, model, img, x, size)
        fn()  # warm-up: allocator pools and lazy inits are not the method's cost
        extra = peak_growth_mb(fn)
    print(json.dumps({"extra_mb": extra}))


def times(name: str, size: int, reps: int, methods=METHODS) -> dict[str, float]:
    import torch

    with torch.inference_mode():
        model, img, x = setup(name, size)
        return interleaved_medians({m: runner(m, model, img, x, size) for m in methods}, reps)


def memory(name: str, size: int, method: str) -> float:
    return in_fresh_process(__spec__.name, ["--child", name, str(size), method])["extra_mb"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=None, help="run the configurations whose model name contains this")
    ap.add_argument("--px", type=int, default=None, help="run only the configurations at this size")
    ap.add_argument("--reps", type=int, default=None, help="interleaved repeats (default 15 below 300 tokens, else 9)")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    ap.add_argument("--child", nargs=3)
    args = ap.parse_args()
    if args.child:
        child_memory(args.child[0], int(args.child[1]), args.child[2])
        return
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU, random weights")
    print(
        "time: ratio to plain forward_features (median of interleaved repeats); "
        "memory: peak extra MB of one call in a fresh process, and its ratio to plain's"
    )
    cols = (
        "model",
        "px",
        "N",
        "plain s",
        "rows/pl",
        "maps/pl",
        "roll/pl",
        "expl/pl",
        "+MB pl",
        "+MB rows",
        "+MB maps",
        "+MB roll",
        "+MB expl",
        "rows MB/pl",
        "maps MB/pl",
    )
    print(("{:28s}" + " {:>5s}" * 2 + " {:>8s}" + " {:>7s}" * 4 + " {:>8s}" * 5 + " {:>10s}" * 2).format(*cols))
    configs = (
        CONFIGS[:1]
        if args.quick
        else [c for c in CONFIGS if (args.only is None or args.only in c[0]) and (args.px is None or c[1] == args.px)]
    )
    for name, size in configs:
        patch = 8 if "patch8" in name else 16
        n = (size // patch) ** 2 + (5 if "dinov3" in name else 1)  # prefix: CLS (+ 4 registers)
        reps = args.reps or (15 if n < 300 else 9)
        methods = [m for m in METHODS if m in args.methods.split(",")]
        t = times(name, size, reps, methods)
        mem = {m: memory(name, size, m) if m in methods else float("nan") for m in METHODS}
        r = {m: t[m] / t["plain"] if m in methods else float("nan") for m in METHODS}
        print(
            ("{:28s} {:5d} {:5d} {:8.3f}" + " {:7.3f}" * 4 + " {:8.0f}" * 5 + " {:10.3f}" * 2).format(
                name,
                size,
                n,
                t["plain"],
                r["rows"],
                r["maps"],
                r["rollout"],
                r["explicit"],
                *(mem[m] for m in METHODS),
                mem["rows"] / max(mem["plain"], 1e-9),
                mem["maps"] / max(mem["plain"], 1e-9),
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
