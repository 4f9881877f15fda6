"""Training the shipped `mnist_vit` (a development tool, out of the runtime package).

python -m weights.train_mnist_vit evaluate          # held-out accuracy of the shipped weights
python -m weights.train_mnist_vit train             # retrains (seeded, ~15 min on 1 thread) into retrained/
python -m weights.train_mnist_vit train --replace   # ... into weights/, replacing the shipped ones
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attention.config import WEIGHTS_DIR
from attention.vit.models.mnist_vit import CONFIG, _augment, _digits, evaluate, heldout_accuracy
from attention.vit.models.weights import build_local


def _batches(x: torch.Tensor, y: torch.Tensor, size: int, gen: torch.Generator):
    perm = torch.randperm(len(y), generator=gen)
    for i in range(0, len(y), size):
        idx = perm[i : i + size]
        yield x[idx], y[idx]


def train(epochs: int = 100, seed: int = 0, out: Path = Path("retrained")) -> float:
    """Train on the split's train digits, save weights and config into `out`, return held-out accuracy."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x, y, tr, ho = _digits()
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
            print(
                f"epoch {ep + 1}/{epochs} loss {loss.item():.3f} heldout_acc {evaluate(model, x[ho], y[ho]):.4f} "
                f"({time.time() - t0:.0f}s)",
                flush=True,
            )
    acc = evaluate(model, x[ho], y[ho])
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out / "mnist_vit.safetensors")
    (out / "mnist_vit.json").write_text(
        json.dumps({**CONFIG, "heldout_accuracy": round(acc, 4), "train": {"epochs": epochs, "seed": seed}}, indent=2)
        + "\n"
    )
    print(f"heldout_accuracy={acc:.4f} ({len(ho)} held-out digits)")
    return acc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m weights.train_mnist_vit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("evaluate", help="print the held-out accuracy of the shipped weights")
    tr = sub.add_parser("train", help="retrain from scratch (seeded; ~15 min on one CPU thread)")
    tr.add_argument("--epochs", type=int, default=100, help="epochs (default %(default)s)")
    tr.add_argument("--seed", type=int, default=0, help="seed (default %(default)s)")
    tr.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the CPU is shared)")
    tr.add_argument("--out", type=Path, default=Path("retrained"), help="output folder (default retrained/)")
    tr.add_argument("--replace", action="store_true", help="write into weights/, replacing the shipped weights")
    args = parser.parse_args(argv)
    if args.command == "evaluate":
        print(f"mnist_vit_heldout_accuracy={heldout_accuracy():.4f}")
        return 0
    torch.set_num_threads(args.threads)
    train(args.epochs, args.seed, WEIGHTS_DIR if args.replace else args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
