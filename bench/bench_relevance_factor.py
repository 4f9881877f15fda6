"""What one relevance job costs over one forward pass of the same input, at several token counts (issue 32):
the factor `attention.vit.engine.cost.relevance_gflop` prices, measured rather than assumed.

    python -m bench.bench_relevance_factor [--model mnist_vit] [--sides 28,128,256,384,512] [--reps 3]

time: `relevance_rows` (a fused forward, a backward, Chefer's rule, grad-rollout and the CLS attention from
rows of A and dA rebuilt chunk by chunk) over a plain fused forward `model(x)` of the same input: medians
of interleaved repeats, torch on 1 thread. Beside it, the factor the price predicts
(`relevance_gflop / forward_gflop`). The model: mnist_vit (ships with the app: patch 4, 4 layers, width 64)
or a timm name with random weights and an ImageNet head (vit_small_patch16_224).
"""

from __future__ import annotations

import argparse
import json

from bench.common import interleaved_medians, load_average, markdown_table, random_vit, readme_block


def model_of(name: str):
    if name == "mnist_vit":
        from attention.vit.models.loader import load_vit

        return load_vit("mnist_vit")
    return random_vit(name, num_classes=1000).requires_grad_(False)


def main() -> None:
    import torch

    from attention.vit.engine.cost import dims, forward_gflop, relevance_gflop
    from attention.vit.relevance import relevance_rows

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mnist_vit")
    ap.add_argument("--sides", default="28,128,256,384", help="input sides in px (square)")
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = model_of(args.model)
    p = dims(model)[4]
    rows, out = [], []
    for side in [int(s) for s in args.sides.split(",")]:
        x = torch.randn(1, model.patch_embed.proj.in_channels, side, side)
        tokens = (side // p) ** 2

        def forward(x=x):
            with torch.inference_mode():
                model(x)

        t = interleaved_medians({"forward": forward, "relevance": lambda x=x: relevance_rows(model, x)}, args.reps)
        measured = t["relevance"] / t["forward"]
        priced = relevance_gflop(model, tokens) / forward_gflop(model, tokens)
        out.append({"side": side, "tokens": tokens, **t, "measured": measured, "priced": priced})
        rows.append(
            (
                f"{side} px",
                f"{tokens:,}",
                f"{t['forward'] * 1e3:.1f} ms",
                f"{t['relevance'] * 1e3:.0f} ms",
                f"{measured:.1f}x",
                f"{priced:.1f}x",
            )
        )
        print(json.dumps(out[-1]), flush=True)
    print(f"load average {load_average():.1f} (2 cores shared)")
    header = ["input", "patch tokens", "forward", "relevance", "relevance / forward", "priced"]
    print(readme_block("bench_relevance_factor", args.model, markdown_table(header, rows)))


if __name__ == "__main__":
    main()
