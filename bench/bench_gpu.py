"""The GPU path, measured in one run: precision against fp32, forward time per dtype, what a
click costs next to a forward, and the longest pass the GPU budget admits (ZeroGPU's duration).

    python -m bench.bench_gpu                      # on a CUDA machine (falls back to CPU, smaller)
    python -m bench.bench_gpu --models vit_small_patch16_224.dino --repeats 5

Weights are random (the hub cannot be reached here), with q and k scaled so attention is peaked
like a trained DINO's and a visible pattern in the position embedding. Printed per model:
- precision: each half dtype against fp32 on the same weights and image, per layer and head:
  max |w - w32| / max(w32) (percent of the head's peak) and how often the peak patch agrees;
- forward:   `query_rows` (one pass, every layer's CLS row) and a plain `forward_features`, median ms;
- clicks:    in-process `tab_frame` after a cached pass (patch click, layer change, head change)
             divided by the pass itself (`get_pass`, q/k kept): what needs no forward;
- budget:    the largest resolution within ATTENTION_MAX_GFLOP_GPU and its pass's time, for
             `spaces.GPU(duration=...)`.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import numpy as np
import torch

from bench.common import PHOTO, cuda_synced, median_seconds, random_vit

ALIASES = {"vit_small_patch16_224.dino": "dino_vits16", "vit_base_patch8_224.dino": "dino_vitb8"}


def peaked(name: str) -> torch.nn.Module:
    """A random-weight timm ViT whose attention is peaked (q, k scaled) with a patterned pos-embed."""
    model = random_vit(name)
    with torch.no_grad():
        for blk in model.blocks:
            d = blk.attn.qkv.weight.shape[1]
            blk.attn.qkv.weight[: 2 * d] *= 3.0  # q and k rows: sharper softmax
        g = model.pos_embed.shape[1] - model.num_prefix_tokens
        s = int(g**0.5)
        yy, xx = torch.meshgrid(torch.arange(s), torch.arange(s), indexing="ij")
        wave = torch.sin(xx / 2.0) + torch.cos(yy / 3.0)  # (s, s)
        model.pos_embed[0, model.num_prefix_tokens :] += 0.5 * wave.reshape(-1, 1)
    return model


def timed(fn, device: torch.device, repeats: int) -> float:
    """Median wall ms of `fn()` after one warm-up (the GPU's work included)."""
    return median_seconds(cuda_synced(fn) if device.type == "cuda" else fn, repeats, warmup=True) * 1000


def precision(models: dict, img, device: torch.device) -> dict[str, tuple[float, float, float]]:
    """Per dtype: (max, median) over layers and heads of |w - w32| / peak(w32) in %, and peak agreement."""
    from attention.vit.engine.extract import attention_maps

    ref = attention_maps(models[torch.float32], img, resolution=480).weights  # (L, H, N)
    peak = ref.max(-1, keepdims=True)
    out = {}
    for dtype, m in models.items():
        if dtype == torch.float32:
            continue
        w = attention_maps(m, img, resolution=480).weights
        rel = (np.abs(w - ref) / peak).max(-1) * 100  # (L, H)
        agree = float((w.argmax(-1) == ref.argmax(-1)).mean())
        out[str(dtype).split(".")[-1]] = (float(rel.max()), float(np.median(rel)), agree)
    return out


def clicks(model: torch.nn.Module, alias: str, img_path: str, device: torch.device, repeats: int) -> dict[str, float]:
    """In-process ms of a pass (q/k kept) and of frames that reuse it, on the model's own device/dtype."""
    from attention.vit.draw.frames import ViewSpec, tab_frame
    from attention.vit.models import loader as registry
    from attention.vit.serve import passes

    dtype = next(model.parameters()).dtype
    registry._cache[(alias, str(device), str(dtype))] = model  # the bench's random model stands in for the hub's
    root = tempfile.mkdtemp(prefix="bench_gpu_")
    out = {}

    def one_pass():  # no cache: a forward each time
        return passes.get_pass(img_path, alias, 480)

    out["pass (forward, q/k kept)"] = timed(one_pass, device, repeats)
    p = one_pass()
    out["patch click"] = timed(lambda: tab_frame(p, ViewSpec(query=(7, 11)), root=root), device, repeats)
    out["layer change"] = timed(lambda: tab_frame(p, ViewSpec(query="cls", layer=3), root=root), device, repeats)
    out["head change"] = timed(lambda: tab_frame(p, ViewSpec(query="cls"), head=2, root=root), device, repeats)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(ALIASES))
    ap.add_argument("--image", default=str(PHOTO))
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()

    from PIL import Image

    from attention.config import SETTINGS
    from attention.vit.engine.cost import forward_gflop, largest_resolution, patch_tokens
    from attention.vit.engine.extract import attention_maps, query_rows
    from attention.vit.models.loader import default_dtype

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    img = Image.open(a.image).convert("RGB")
    what = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"# {what}; torch {torch.__version__}; image {Path(a.image).name} {img.size[0]}x{img.size[1]} at 480 px")
    print(f"# default dtype on this device: {default_dtype(device)}")
    dtypes = [torch.float32, torch.float16, torch.bfloat16] if device.type == "cuda" else [torch.float32]
    for name in a.models:
        base = peaked(name)
        models = {dt: copy.deepcopy(base).to(device, dt) for dt in dtypes}
        tokens = patch_tokens(img.size, base.patch_embed.patch_size[0], 480)
        print(f"\n## {name} (random weights, peaked), {tokens} tokens")
        if len(models) > 1:
            for dt, (mx, med, agree) in precision(models, img, device).items():
                print(f"precision {dt:9s}: max {mx:.3f}% of peak, median {med:.3f}%, same peak patch {agree:.1%}")
        from attention.images import to_tensor

        cfg = base.pretrained_cfg
        x, _ = to_tensor(
            img, patch_size=base.patch_embed.patch_size[0], mean=cfg["mean"], std=cfg["std"], resolution=480
        )
        for dt, m in models.items():
            xd = x.to(device, dt)
            rows = timed(lambda m=m, xd=xd: query_rows(m, xd), device, a.repeats)
            plain = timed(lambda m=m, xd=xd: m.forward_features(xd), device, a.repeats)
            print(f"forward   {str(dt).split('.')[-1]:9s}: query_rows {rows:8.2f} ms, plain forward {plain:8.2f} ms")
        m = models[default_dtype(device)]
        c = clicks(m, ALIASES.get(name, "dino_vits16"), a.image, device, max(3, a.repeats // 4))
        fwd = c.pop("pass (forward, q/k kept)")
        print(f"pass (forward, q/k kept, {default_dtype(device)}): {fwd:.1f} ms")
        for k, v in c.items():
            print(f"  {k:13s}: {v:7.1f} ms = {v / fwd:.2f} x the pass")
        budget = SETTINGS.budget_gflop(str(device))
        r = largest_resolution(m, img.size, budget)
        if r:
            tokens = patch_tokens(img.size, m.patch_embed.patch_size[0], r)
            try:
                big = cuda_synced(
                    lambda m=m, r=r, n=max(tokens + 1, 16384): attention_maps(
                        m, img, resolution=r, keep_qk=True, max_tokens=n
                    )
                )
                s = median_seconds(big, 1)
                print(
                    f"budget {budget:,.0f} GFLOP: largest resolution {r} px, {tokens:,} tokens, "
                    f"{forward_gflop(m, tokens):,.0f} GFLOP, pass with q/k kept {s:.2f} s"
                )
            except Exception as e:  # noqa: BLE001 - report, don't stop the bench
                print(f"budget {budget:,.0f} GFLOP: resolution {r} px, {tokens:,} tokens: {type(e).__name__}: {e}")
        del models
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
