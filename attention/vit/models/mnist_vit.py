"""`mnist_vit`: a small timm ViT trained here on the shipped MNIST digits.

It makes the app useful offline with real trained attention and lets the tests check
attention on real weights. Digits 28x28, patch 4: a 7x7 grid plus CLS. This module holds its
architecture, its digits, their augmentation (digit_clip's training uses it too) and its held-out
accuracy; training it is a development tool, out of the package: `python -m weights.train_mnist_vit --help`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attention import mnist
from attention.config import WEIGHTS_DIR
from attention.vit.models.weights import build_local

CONFIG = {
    "architecture": "vit_tiny_patch16_224",
    "model_args": {
        "img_size": 28,
        "patch_size": 4,
        "in_chans": 1,
        "num_classes": 10,
        "embed_dim": 64,
        "depth": 4,
        "num_heads": 4,
        "mlp_ratio": 2.0,
    },
    "pretrained_cfg": {
        "mean": [mnist.MEAN],
        "std": [mnist.STD],
        "input_size": [1, 28, 28],
        "interpolation": "bilinear",
        "crop_pct": 1.0,
        "num_classes": 10,
    },
}


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


def _digits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The shipped digits, normalised (n, 1, 28, 28), labels (n,), and the train / held-out indices."""
    d = mnist.load_subset()
    x = (torch.from_numpy(d.images).float()[:, None] / 255 - mnist.MEAN) / mnist.STD
    tr, ho = (torch.from_numpy(i) for i in mnist.split(len(d.labels)))
    return x, torch.from_numpy(d.labels), tr, ho


def heldout_accuracy() -> float:
    """Accuracy of the shipped mnist_vit (with its classifier head) on the 1,000 held-out digits."""
    from safetensors.torch import load_file

    x, y, _, ho = _digits()
    model = build_local(CONFIG)
    model.load_state_dict(load_file(WEIGHTS_DIR / "mnist_vit.safetensors"))
    return evaluate(model, x[ho], y[ho])
