"""Cost of the open-vocabulary rules (issue 43) for a CLIP ViT-B/16 with random weights: each rule's time and
peak memory against a plain forward (`encode_image`) at 224, 448 and 896 px.

    python -m bench.bench_open_vocabulary --device cuda                 # on a GPU: max_memory_allocated
    python -m bench.bench_open_vocabulary --sizes 224                   # CPU, 1 thread: peak RSS growth

Model: open_clip CLIP with timm's `vit_base_patch16_clip_224` tower (12 blocks, 12 heads, width 768, class
token, projection to 512), random weights, fp32; 4 prompts (unit random text embeddings). A rule's call is
`dense.open_vocabulary_rows`: one forward without gradients (fused attention) keeping the last block's q, k, v
and input, then the rule's attention rows a chunk at a time, the patches through the head, the cosines; the
proxy rule's call includes its proxy model's forward (a random DINO ViT-S/16, `proxy.proxy_features`).
Time: medians of interleaved repeats. Memory: beyond the model and input, the plain forward's and each rule's
peak (GPU: `max_memory_allocated`; CPU: the peak RSS growth of one call in a fresh process), and the size of one
full N x N attention matrix of all heads (what a rule that kept it would hold at least).
"""

from __future__ import annotations

import argparse
import json

from bench.common import cuda_synced, interleaved_medians, load_average, markdown_table

RULES = ("maskclip", "sclip", "clearclip", "naclip", "proxy")


def setup(device: str):
    import timm
    import torch

    from bench.bench_text_relevance import setup as clip_setup

    clip = clip_setup(device)
    torch.manual_seed(1)
    dino = timm.create_model("vit_small_patch16_224", num_classes=0, dynamic_img_size=True).eval().to(device)
    return clip, dino


def runners(clip, dino, size: int, device: str) -> dict:
    import torch
    import torch.nn.functional as F
    from PIL import Image

    from attention.vit.text.dense import open_vocabulary_rows
    from attention.vit.text.openvocab import RuleOptions
    from attention.vit.text.proxy import proxy_features
    from attention.vit.text.tower import ready

    tower = ready(clip)
    x = torch.randn(1, 3, size, size, device=device)
    text = F.normalize(torch.randn(4, 512, device=device), dim=-1)
    shown = Image.new("RGB", (size, size), (120, 80, 40))
    grid = (size // 16, size // 16)

    def forward():
        with torch.inference_mode():
            return clip.encode_image(x)

    def rule(name):
        def run():
            feats = proxy_features(dino, shown, grid) if name == "proxy" else None
            return open_vocabulary_rows(clip, tower, x, text, (name,), RuleOptions(), feats)

        return run

    return {"forward": forward, **{r: rule(r) for r in RULES}}


def child_memory(size: int, method: str) -> None:
    """In a fresh process (CPU, 1 thread): peak RSS growth (MB) of one call of `method`, after a warm-up."""
    import torch

    from bench.common import peak_growth_mb

    torch.set_num_threads(1)
    clip, dino = setup("cpu")
    runners(clip, dino, 64, "cpu")[method]()
    fn = runners(clip, dino, size, "cpu")[method]
    print(json.dumps({"extra_mb": peak_growth_mb(fn)}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sizes", type=int, nargs="+", default=[224, 448, 896])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-memory", action="store_true", help="times only")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child_memory(int(args.child[0]), args.child[1])
    import torch

    from bench.bench_text_relevance import peak_mb
    from bench.common import in_fresh_process

    if args.device == "cpu":
        torch.set_num_threads(1)
    clip, dino = setup(args.device)
    rows, out = [], []
    for size in args.sizes:
        fns = {k: cuda_synced(f) for k, f in runners(clip, dino, size, args.device).items()}
        reps = args.repeats if size < 896 or args.device != "cpu" else 1
        t = interleaved_medians(fns, reps)
        mem = {}
        if not args.no_memory:
            for k, f in fns.items():
                if args.device == "cpu":
                    mem[k] = in_fresh_process(__spec__.name, ["--child", str(size), k])["extra_mb"]
                else:
                    mem[k] = peak_mb(f, args.device)
        n = (size // 16) ** 2 + 1
        full_mb = 12 * n * n * 4 / 2**20
        for k in RULES:
            ratio = t[k] / t["forward"]
            m = f"{mem[k]:.0f} MB vs {mem['forward']:.0f} MB" if mem else "-"
            rows.append(
                [size, n, k, f"{t['forward'] * 1e3:.0f}", f"{t[k] * 1e3:.0f}", f"{ratio:.2f}x", m, f"{full_mb:.0f}"]
            )
            out.append(
                {"px": size, "tokens": n, "rule": k, "forward_s": t["forward"], "rule_s": t[k], "ratio": ratio}
                | ({"rule_mb": mem[k], "forward_mb": mem["forward"]} if mem else {})
            )
    dev = (
        torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU, 1 thread, load {load_average():.1f}"
    )
    print(f"open-vocabulary rules, CLIP ViT-B/16 (random weights), 4 prompts, {dev}")
    head = ["px", "tokens", "rule", "forward ms", "rule ms", "rule / forward", "peak beyond the model", "N x N MB"]
    print(markdown_table(head, rows))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
