"""What the feature views add to the forward pass that makes the attention maps, in one run.

    python -m bench.bench_features [--size 480] [--rounds 15]

ViT-S/16 (timm vit_small_patch16_224.dino, random weights) on a 720x480 photo at 480 px: the pass
as the app runs it (`attention_maps`, q/k kept) with and without `features.recording` (hooks copy
every block's output tokens as float16), interleaved; then the three views computed from them.
Target: recording adds <= 5% to the pass.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import PHOTO, cuda_synced, interleaved_times, random_vit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=480)
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()

    import torch
    from PIL import Image

    from attention.vit.engine import features
    from attention.vit.engine.extract import attention_maps

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = random_vit().to(device)
    img = Image.open(PHOTO).convert("RGB").resize((720, 480), Image.BICUBIC)

    def plain():
        attention_maps(model, img, resolution=a.size, keep_qk=True)

    def recorded():
        with features.recording(model) as rec:
            attention_maps(model, img, resolution=a.size, keep_qk=True)
        return rec.tokens

    runs = interleaved_times([cuda_synced(plain), cuda_synced(recorded)], a.rounds)  # warm-up: hooks installed
    times = dict(zip(("plain", "recorded"), runs))
    tokens = recorded()
    P, grid = model.num_prefix_tokens, (a.size // 16, 720 * a.size // 480 // 16)
    t0 = time.perf_counter()
    features.feature_maps(tokens, grid, P, -1, (5, 7))
    views = time.perf_counter() - t0
    p, r = statistics.median(times["plain"]), statistics.median(times["recorded"])
    per_round = statistics.median(b / a_ for a_, b in zip(times["plain"], times["recorded"]))
    print(f"# {device}, torch {torch.__version__}, ViT-S/16 at {a.size} px: {grid[0]}x{grid[1]} patches")
    print(f"pass (attention maps, q/k kept):      {p * 1000:8.1f} ms (median of {a.rounds})")
    print(f"pass + feature recording:             {r * 1000:8.1f} ms")
    print(f"ratio: {r / p:.3f} (per-round median {per_round:.3f}); target <= 1.05")
    print(f"tokens kept: {tokens.nbytes / 2**20:.1f} MB float16 {tokens.shape}")
    print(f"pca + similarity + norms of one layer: {views * 1000:.1f} ms")


if __name__ == "__main__":
    main()
