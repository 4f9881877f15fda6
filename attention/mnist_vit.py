"""`mnist_vit`: a small timm ViT trained here on the shipped MNIST digits.

It makes the app useful offline with real trained attention and lets the tests check
attention on real weights. Train it (seeded, CPU, a few minutes) with

    python -m attention.mnist_vit          # writes weights/mnist_vit.{json,safetensors}

which prints the held-out accuracy. Digits 28x28, patch 4: a 7x7 grid plus CLS.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from attention import mnist
from attention.models import WEIGHTS_DIR, build_local

CONFIG = {
    "architecture": "vit_tiny_patch16_224",
    "model_args": {
        "img_size": 28, "patch_size": 4, "in_chans": 1, "num_classes": 10,
        "embed_dim": 64, "depth": 4, "num_heads": 4, "mlp_ratio": 2.0,
    },
    "pretrained_cfg": {
        "mean": [mnist.MEAN], "std": [mnist.STD], "input_size": [1, 28, 28],
        "interpolation": "bilinear", "crop_pct": 1.0, "num_classes": 10,
    },
}


def _batches(x: torch.Tensor, y: torch.Tensor, size: int, gen: torch.Generator):
    perm = torch.randperm(len(y), generator=gen)
    for i in range(0, len(y), size):
        idx = perm[i:i + size]
        yield x[idx], y[idx]


def _augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random small affine jitter (rotation +-12 deg, scale 0.9-1.1, shift +-2 px). x: (B, 1, 28, 28)."""
    b = x.shape[0]
    ang = (torch.rand(b, generator=gen) - 0.5) * 2 * np.deg2rad(12)
    sc = 0.9 + 0.2 * torch.rand(b, generator=gen)
    sh = (torch.rand(b, 2, generator=gen) - 0.5) * 2 * (2 / 14)
    cos, sin = torch.cos(ang) / sc, torch.sin(ang) / sc
    theta = torch.stack([torch.stack([cos, -sin, sh[:, 0]], 1), torch.stack([sin, cos, sh[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    bg = (0 - mnist.MEAN) / mnist.STD
    return F.grid_sample(x - bg, grid, align_corners=False, padding_mode="zeros") + bg


def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Accuracy of `model` on normalised digits x (n, 1, 28, 28) with labels y (n,)."""
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(-1) == y).float().mean().item()


def train(epochs: int = 100, seed: int = 0, out=WEIGHTS_DIR) -> float:
    """Train on the split's train digits, save weights and config, return held-out accuracy."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    d = mnist.load_subset()
    x = (torch.from_numpy(d.images).float()[:, None] / 255 - mnist.MEAN) / mnist.STD
    y = torch.from_numpy(d.labels)
    tr, ho = (torch.from_numpy(i) for i in mnist.split(len(y)))
    model = build_local(CONFIG)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    steps = epochs * -(-len(tr) // 128)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=steps, pct_start=0.1)
    t0 = time.time()
    for ep in range(epochs):
        model.train()
        for xb, yb in _batches(x[tr], y[tr], 128, gen):
            loss = F.cross_entropy(model(_augment(xb, gen)), yb, label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        if ep % 10 == 9 or ep == epochs - 1:
            print(f"epoch {ep + 1}/{epochs} loss {loss.item():.3f} heldout_acc {evaluate(model, x[ho], y[ho]):.4f} "
                  f"({time.time() - t0:.0f}s)", flush=True)
    acc = evaluate(model, x[ho], y[ho])
    from safetensors.torch import save_file

    out.mkdir(exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out / "mnist_vit.safetensors")
    (out / "mnist_vit.json").write_text(json.dumps({**CONFIG, "heldout_accuracy": round(acc, 4),
                                                    "train": {"epochs": epochs, "seed": seed}}, indent=2) + "\n")
    print(f"heldout_accuracy={acc:.4f} ({len(ho)} held-out digits)")
    return acc


if __name__ == "__main__":
    torch.set_num_threads(1)
    train(epochs=int(sys.argv[1]) if len(sys.argv) > 1 else 100)
