"""A transformers DINOv2-S/14 model object (random weights) through the engine, against transformers'
own ways to get attention, at 224, 518 and 784 px, in one run:

    python -m bench.bench_backbones              # the three sizes (several minutes on 2 cores)
    python -m bench.bench_backbones --px 224     # one size
    python -m bench.bench_backbones --overhead   # the engine's per-layer cost where Python dominates (below)

- fused:  the model's own forward under attn_implementation="sdpa" (no attention returned)
- ours:   `query_rows` on that same object: every layer's CLS row, read at its fused kernel
- eager:  transformers' way to get attention: attn_implementation="eager", output_attentions=True
          (every layer's N x N kept)
Times: median of interleaved repeats in one process, relative to fused (goal: ours <= 1.1x).
Peak extra memory: each method in its own fresh subprocess, peak RSS (CPU) or
torch.cuda.max_memory_allocated (CUDA) minus the level before the call (goal: ours O(N), like fused).

--overhead: a CPU stand-in for a launch-bound GPU forward, where the engine's per-layer Python and
extra kernels are what a pass adds. One thread, batch 1, a tiny input (--px, default 28: 5 tokens),
transformers' DINOv2-S/14 and timm's ViT-S/16 (random weights; --narrow: the same 12 layers at width
24, so that the model's own matmuls cost next to nothing), fused forward and `query_rows` interleaved
(median of --reps): ours / fused and the microseconds the engine adds per layer; then, with the model on
the `meta` device, the aten ops (kernels on a GPU: views and allocations left out) a pass adds per layer.
--against COMMIT: the engine as it was at COMMIT too, in the same process and the same interleaving
(its `attention` package from `git archive`, imported as `attention_then` on a copy of the model).
"""

from __future__ import annotations

import argparse
import json

from bench.common import cuda_synced, in_fresh_process, interleaved_medians, markdown_table, peak_growth_mb

SIZES = (224, 518, 784)
METHODS = ("fused", "ours", "eager")
DINOV2_S14 = dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, patch_size=14)


def setup(size: int, device: str):
    import torch
    import transformers as T

    torch.manual_seed(0)
    cfg = T.Dinov2Config(image_size=518, **DINOV2_S14)
    model = T.Dinov2Model(cfg).eval().to(device)
    model.set_attn_implementation("sdpa")
    eager = T.Dinov2Model(cfg).eval().to(device)
    eager.load_state_dict(model.state_dict())
    eager.set_attn_implementation("eager")
    x = torch.randn(1, 3, size, size, device=device)
    return model, eager, x


def runner(method: str, model, eager, x):
    from attention.vit.engine.rows import query_rows

    if method == "fused":
        return lambda: model(pixel_values=x)
    if method == "ours":
        return lambda: query_rows(model, x, 0)
    if method == "eager":
        return lambda: eager(pixel_values=x, output_attentions=True)
    raise ValueError(method)


def added_ops(model, fused, x) -> tuple[float, float]:
    """(aten ops (not views, allocations or detaches), host<->device copies) `run_pass` adds to `fused(x)`,
    per layer of 12, counted on the meta device (the model is moved there)."""
    from collections import Counter

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    from attention.vit.engine.rows import run_pass

    skip = {torch.ops.aten.empty, torch.ops.aten.empty_strided, torch.ops.aten.detach, torch.ops.aten.alias}

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            devices = {t.device for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)}
            n["copies"] += len(devices) > 1
            n["ops"] += not func.is_view and func.overloadpacket not in skip
            return out

    model.to("meta")
    x = torch.empty(x.shape, device="meta")
    counts = []
    for f in (lambda: fused(x), lambda: run_pass(model, x, 0, False)):
        n: Counter = Counter()
        with torch.inference_mode(), Count():
            f()
        counts.append(n)
    return (counts[1]["ops"] - counts[0]["ops"]) / 12, (counts[1]["copies"] - counts[0]["copies"]) / 12


def engine_at(commit: str):
    """`query_rows` of this repository's engine as it was at `commit`, importable beside today's: its
    `attention` package extracted with `git archive` into a temporary folder as `attention_then`."""
    import atexit
    import importlib
    import importlib.util
    import re
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp(prefix="engine_then_"))
    atexit.register(shutil.rmtree, root, True)
    tar = subprocess.run(["git", "archive", commit, "attention"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=tar, check=True)
    (root / "attention").rename(root / "attention_then")
    for f in (root / "attention_then").rglob("*.py"):
        f.write_text(re.sub(r"\b(from|import) attention\b", r"\1 attention_then", f.read_text()))
    pkg = root / "attention_then"  # imported as a package by its location (no import path edited)
    spec = importlib.util.spec_from_file_location(
        "attention_then", pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    sys.modules["attention_then"] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return importlib.import_module("attention_then.vit.engine.rows").query_rows


def overhead(px: int, reps: int, narrow: bool, against: str | None = None) -> None:
    """Print, per model, the fused forward, `query_rows`, their ratio and the engine's us per layer
    (and the engine's at commit `against`, on a copy of the model, in the same interleaving)."""
    import copy

    import timm
    import torch
    import transformers as T

    from attention.vit.engine.rows import query_rows

    then = engine_at(against) if against else None
    torch.set_num_threads(1)
    torch.manual_seed(0)
    hf_kw = dict(hidden_size=24, num_attention_heads=2, intermediate_size=96) if narrow else {}
    cfg = T.Dinov2Config(image_size=518, **(DINOV2_S14 | hf_kw))
    hf = T.Dinov2Model(cfg).eval()
    hf.set_attn_implementation("sdpa")
    tm_kw = dict(embed_dim=24, num_heads=2) if narrow else dict(embed_dim=384, num_heads=6)
    tm = timm.models.VisionTransformer(patch_size=16, depth=12, num_classes=0, dynamic_img_size=True, **tm_kw).eval()
    print(f"torch {torch.__version__}, 1 thread, batch 1, {px} px, {'width 24' if narrow else 'ViT-S widths'}")
    for name, model, fused, p in (
        ("transformers Dinov2Model S/14", hf, lambda x: hf(pixel_values=x), 14),
        ("timm VisionTransformer S/16", tm, lambda x: tm.forward_features(x), 16),
    ):
        x = torch.randn(1, 3, max(p, px // p * p), max(p, px // p * p))
        with torch.inference_mode():
            fns = {"fused": lambda f=fused, x=x: f(x), "ours": lambda m=model, x=x: query_rows(m, x, 0)}
            if then is not None:  # its own copy: each engine installs its hooks once per model
                fns["then"] = lambda m=copy.deepcopy(model), x=x: then(m, x, 0)
            t = interleaved_medians(fns, reps)
        if then is not None:
            print(
                f"{name} at {against}: ours / fused {t['then'] / t['fused']:.2f}x, "
                f"+{(t['then'] - t['fused']) / 12 * 1e6:.0f} us per layer"
            )
        per_layer = (t["ours"] - t["fused"]) / 12 * 1e6
        print(
            f"{name}: fused {t['fused'] * 1e3:.2f} ms, ours {t['ours'] * 1e3:.2f} ms, "
            f"ours / fused {t['ours'] / t['fused']:.2f}x, +{per_layer:.0f} us per layer; per layer on meta: "
            "+{:.2f} aten ops, +{:.2f} host<->device copies".format(*added_ops(model, fused, x)),
            flush=True,
        )


def synced(fn, device: str):
    """fn, followed by a CUDA synchronize when the bench runs on `device` "cuda"."""
    return cuda_synced(fn) if device == "cuda" else fn


def child_memory(size: int, method: str, device: str) -> None:
    """In a fresh process: peak memory growth (MB) during one call of `method`, after a warm-up call."""
    import torch

    with torch.inference_mode():
        model, eager, x = setup(size, device)
        fn = runner(method, model, eager, x)
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            synced(fn, device)()
            extra = (torch.cuda.max_memory_allocated() - base) / 2**20
        else:
            extra = peak_growth_mb(fn)
    print(json.dumps({"extra_mb": extra}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--px", type=int, default=None, help="one size only")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when there is one)")
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--overhead", action="store_true", help="the per-layer cost where Python dominates (CPU)")
    ap.add_argument("--narrow", action="store_true", help="with --overhead: width 24, the model's matmuls ~free")
    ap.add_argument("--against", help="with --overhead: the engine at this git commit too, interleaved")
    args = ap.parse_args()
    if args.overhead:
        overhead(args.px or 28, args.reps if args.reps != 5 else 300, args.narrow, args.against)
        return
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.child:
        child_memory(int(args.child[0]), args.child[1], args.child[2])
        return
    rows = []
    for size in [args.px] if args.px else SIZES:
        with torch.inference_mode():
            model, eager, x = setup(size, device)
            t = interleaved_medians({m: synced(runner(m, model, eager, x), device) for m in METHODS}, args.reps)
            del model, eager, x
        mem = {m: in_fresh_process(__spec__.name, ["--child", str(size), m, device])["extra_mb"] for m in METHODS}
        n = 1 + (size // 14) ** 2
        rows.append(
            [
                f"{size} px ({n} tokens)",
                f"{t['fused'] * 1e3:.0f} ms",
                f"{t['ours'] / t['fused']:.2f}x",
                f"{t['eager'] / t['fused']:.2f}x",
                f"{mem['fused']:.0f} MB",
                f"{mem['ours']:.0f} MB",
                f"{mem['eager']:.0f} MB",
            ]
        )
        print(f"{size} px: {t} {mem}", flush=True)
    head = ["input", "fused forward", "ours / fused", "eager attentions / fused", "fused peak +", "ours peak +"]
    print(f"\ntransformers Dinov2Model ViT-S/14, random weights, {device}, torch {torch.__version__}")
    print(markdown_table([*head, "eager peak +"], rows))


if __name__ == "__main__":
    main()
