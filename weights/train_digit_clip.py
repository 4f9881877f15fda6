"""Train `digit_clip` on the shipped MNIST digits (seeded; a few minutes on 2 CPU cores).

    python -m attention.vit.text.train_digit_clip              # into retrained/
    python -m attention.vit.text.train_digit_clip --replace    # into weights/, replacing the shipped ones

The image tower starts from mnist_vit's shipped weights (its classifier head dropped), the text tower and the
projections from random. Each step sees one of two batches, in turn: single 28 x 28 digits (mnist_vit's
jitter) and 56 x 56 canvases of 2 x 2 cells holding two digits of different classes in two random cells.
The loss is the image-to-text cross-entropy over the ten digits' captions (a random template each, the text
tower trained with them) against the digits present (1, or 1/2 each for a canvas): a CLIP whose scaled
cosine says which digits an image holds. Only the split's train digits are used; the held-out ones are the
planted check's (bench/bench_digit_clip.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attention import mnist
from attention.config import WEIGHTS_DIR
from attention.vit.mnist_vit import _augment, _digits
from attention.vit.text import digit_clip as dc

BACKGROUND = (0 - mnist.MEAN) / mnist.STD  # a blank pixel, normalised


def canvas(x: torch.Tensor, y: torch.Tensor, n: int, gen: torch.Generator, cells=(2, 2), per=2):
    """n canvases (n, 1, 28 * rows, 28 * cols), each with `per` digits of different classes from (x, y) in
    random distinct cells; returns (canvases, targets (n, 10) summing to 1, cells (n, per), labels (n, per))."""
    rows, cols = cells
    out = torch.full((n, 1, 28 * rows, 28 * cols), BACKGROUND)
    target = torch.zeros(n, 10)
    where = torch.zeros(n, per, dtype=torch.long)
    labels = torch.zeros(n, per, dtype=torch.long)
    for i in range(n):
        cells_i = torch.randperm(rows * cols, generator=gen)[:per]
        used: set[int] = set()
        for j, c in enumerate(cells_i.tolist()):
            while True:
                k = int(torch.randint(len(y), (1,), generator=gen))
                if int(y[k]) not in used:
                    break
            used.add(int(y[k]))
            r, q = divmod(c, cols)
            out[i, :, 28 * r : 28 * r + 28, 28 * q : 28 * q + 28] = x[k]
            target[i, y[k]] += 1.0 / per
            where[i, j], labels[i, j] = c, y[k]
    return out, target, where, labels


def train(steps: int = 600, seed: int = 0, out: Path = Path("retrained"), device: str = "cpu") -> dict:
    """Train, save weights and config into `out`, return the held-out accuracies (single digits; the
    top-2 captions of two-digit canvases)."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x, y, tr, ho = _digits()
    clip = dc.build()
    own = {k: v for k, v in load_file(WEIGHTS_DIR / "mnist_vit.safetensors").items() if not k.startswith("head.")}
    clip.visual.trunk.load_state_dict(own)
    clip = clip.to(device)
    x = x.to(device)
    tok = clip.tokenizer
    opt = torch.optim.AdamW(clip.parameters(), lr=1e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=steps, pct_start=0.1)
    xt, yt = x[tr], y[tr]
    t0 = time.time()
    for step in range(steps):
        clip.train()
        if step % 2 == 0:
            idx = torch.randint(len(yt), (64,), generator=gen)
            img, target = _augment(xt[idx].cpu(), gen).to(device), F.one_hot(yt[idx], 10).float().to(device)
        else:  # two digits, or three every other time
            img, target, _, _ = canvas(xt.cpu(), yt, 24, gen, per=2 + (step % 4 == 3))
            img, target = img.to(device), target.to(device)
        templates = torch.randint(len(dc.TEMPLATES), (10,), generator=gen).tolist()
        ids = tok([dc.caption(d, t) for d, t in enumerate(templates)]).to(device)
        text = F.normalize(clip.encode_text(ids), dim=-1)
        emb = F.normalize(clip.encode_image(img), dim=-1)
        logits = clip.logit_scale.exp() * emb @ text.T
        loss = -(target * logits.log_softmax(-1)).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            clip.logit_scale.clamp_(0, np.log(100))
        if step % 50 == 49 or step == steps - 1:
            print(f"step {step + 1}/{steps} loss {loss.item():.3f} ({time.time() - t0:.0f}s)", flush=True)
    clip = clip.cpu()
    acc = evaluate(clip, x[ho].cpu(), y[ho], seed)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in clip.state_dict().items()}, out / f"{dc.ALIAS}.safetensors")
    meta = {**dc.CONFIG, "heldout": acc, "train": {"steps": steps, "seed": seed, "init": "mnist_vit", "device": device}}
    (out / f"{dc.ALIAS}.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(acc))
    return acc


def evaluate(clip: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, seed: int = 0) -> dict:
    """Held-out accuracy: single digits by their best caption; two-digit canvases by their two best captions."""
    clip.eval()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        text = F.normalize(clip.encode_text(clip.tokenizer([dc.caption(d) for d in range(10)])), dim=-1)
        single = (F.normalize(clip.encode_image(x), dim=-1) @ text.T).argmax(-1) == y
        img, _, _, labels = canvas(x, y, 500, gen)
        top2 = (F.normalize(clip.encode_image(img), dim=-1) @ text.T).topk(2, -1).indices.sort(-1).values
        pair = (top2 == labels.sort(-1).values).all(-1)
    return {
        "single_digit_accuracy": round(single.float().mean().item(), 4),
        "two_digit_canvas_accuracy": round(pair.float().mean().item(), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attention.vit.text.train_digit_clip", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--steps", type=int, default=600, help="optimiser steps (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("retrained"), help="output folder (default retrained/)")
    parser.add_argument("--device", default="cpu", help="torch device (default %(default)s)")
    parser.add_argument("--replace", action="store_true", help="write into weights/, replacing the shipped weights")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    train(args.steps, args.seed, WEIGHTS_DIR if args.replace else args.out, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
