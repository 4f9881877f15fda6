"""Train `digit_clip` on the shipped MNIST digits (seeded; about 10-20 minutes on this shared 2-core machine).

    python -m weights.train_digit_clip --init weights/digit_clip.safetensors   # into retrained/
    python -m weights.train_digit_clip --replace    # into weights/, replacing the shipped ones

The image tower pools by the mean of its patch tokens (so each patch token is what the image embedding is made
of) and starts from mnist_vit's shipped weights (its classifier head dropped; its final norm becomes the pool's
norm), or from a digit_clip's (`--init`); the text tower and the projections from random or the given weights.
Each step sees a batch of canvases of one size (28 x 28 up to 84 x 84, mostly the cheap 1 x 1 and 2 x 2 cells)
holding 1 to 3 digits of different classes (mnist_vit's jitter each) at random places (`attention.planted`'s
layout: a cell of 28 px each, shifted by up to 6 px), and for each canvas its hard negative: the same canvas with
one digit (the one a caption names) replaced by a digit of a class it lacks, in the same place. Three losses,
over the ten digits' captions (a random template each, the text tower trained with them):
- image to text: for each digit present, its caption against the captions of the digits absent (the other
  digits present are left out, not pushed down): the image matches every caption naming a digit it holds;
- caption to image: the named digit's caption prefers its canvas to the hard negative, and the new digit's
  caption the hard negative: the score must come from that digit, in that place;
- dense (DENSE_WEIGHT): each patch token through the pool's norm and the projection, as if it were the pooled
  token, against the ten captions (a fixed scale, DENSE_SCALE): a patch with a digit's ink (`patch_labels`: the
  canvas's own layout) names that digit's caption; a blank patch no caption in particular (BLANK_WEIGHT).
  The patch labels come from where the canvas put each digit: this is dense supervision, not the captions alone.
Only the split's train digits are used; the held-out ones are the planted check's (bench/bench_digit_clip.py).
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

from attention import mnist, planted
from attention.config import WEIGHTS_DIR
from attention.vit.models.mnist_vit import _augment, _digits
from attention.vit.text import digit_clip as dc

BACKGROUND = (0 - mnist.MEAN) / mnist.STD  # a blank pixel, normalised
CELL = planted.CELL
# (rows, cols) of 28 px cells per canvas size, and how often each is drawn: single digits keep the tower's
# one-digit accuracy, the larger canvases teach it to tell digits apart by place
SIZES = ((1, 1), (2, 2), (2, 3), (3, 3))
SIZE_WEIGHTS = (0.35, 0.4, 0.1, 0.15)  # the cheap sizes most: a step's time grows with the canvas's tokens
SHIFT = 6  # px a digit moves off its cell's corner, each way
PATCH = 4  # the tower's patch size
INK = 0.5 / mnist.STD  # a pixel is ink when it is over half of full brightness (normalised units over blank)
BLANK_WEIGHT = 0.2  # the blank patches' term of the dense loss
DENSE_WEIGHT = 2.0  # the dense loss beside the image-caption loss
DENSE_SCALE = 10.0  # the dense loss's fixed logit scale (the model's own is learned for the image-level loss)


def draw(x: torch.Tensor, y: torch.Tensor, cls: int, gen: torch.Generator, jitter: bool) -> torch.Tensor:
    """One random digit of class `cls` from (x, y), (1, 28, 28), with mnist_vit's jitter if `jitter`."""
    pool = (y == cls).nonzero()[:, 0]
    digit = x[int(pool[int(torch.randint(len(pool), (1,), generator=gen))])]
    return _augment(digit[None], gen)[0] if jitter else digit


def canvases(x, y, n: int, gen: torch.Generator, cells=(2, 2), per=(2, 2), shift: int = 0, jitter: bool = False):
    """n canvases (n, 1, 28 * rows, 28 * cols) from digits (x, y), each with k (per[0] to per[1]) digits of
    different classes in random distinct cells, shifted by up to `shift` px (`attention.planted.layout` and
    `compose`: inside the canvas; overlaps keep the brighter pixel). Returns (canvases, present (n, 10) bool,
    digits [(class, digit, top, left)] per canvas)."""
    rng = np.random.default_rng(int(torch.randint(2**62, (1,), generator=gen)))
    out = torch.empty((n, 1, CELL * cells[0], CELL * cells[1]))
    present = torch.zeros(n, 10, dtype=torch.bool)
    placed = []
    for i in range(n):
        k = int(rng.integers(per[0], per[1] + 1))
        _, classes, corners = planted.layout(rng, cells, k, shift)
        digits = [(int(c), draw(x, y, int(c), gen, jitter), int(t), int(q)) for c, (t, q) in zip(classes, corners)]
        out[i, 0] = _compose(digits, cells)
        present[i, classes] = True
        placed.append(digits)
    return out, present, placed


def _compose(digits: list, cells: tuple[int, int]) -> torch.Tensor:
    """The canvas (28 * rows, 28 * cols) of [(class, digit (1, 28, 28), top, left)] on the blank background."""
    stack = np.stack([d[0].numpy() for _, d, _, _ in digits])
    corners = np.array([(t, q) for *_, t, q in digits])
    return torch.from_numpy(planted.compose(stack, corners, cells, BACKGROUND))


def hard_negatives(x, y, img, present, placed, gen, jitter: bool = True):
    """For each canvas, one of its digits (the named one, its class `named`) replaced in the same place by a
    digit of a class the canvas lacks (`other`): (negatives like img, their present, named (n,), other (n,))."""
    neg, neg_present = img.clone(), present.clone()
    named, other = torch.zeros(len(img), dtype=torch.long), torch.zeros(len(img), dtype=torch.long)
    cells = (img.shape[2] // CELL, img.shape[3] // CELL)
    for i, digits in enumerate(placed):
        j = int(torch.randint(len(digits), (1,), generator=gen))
        cls, _, top, left = digits[j]
        absent = (~present[i]).nonzero()[:, 0]
        new = int(absent[int(torch.randint(len(absent), (1,), generator=gen))])
        swapped = [*digits[:j], (new, draw(x, y, new, gen, jitter), top, left), *digits[j + 1 :]]
        neg[i, 0] = _compose(swapped, cells)
        neg_present[i, cls], neg_present[i, new] = False, True
        named[i], other[i] = cls, new
    return neg, neg_present, named, other


def batch(x, y, gen, size: tuple[int, int], n: int):
    """One step's images (2n: n canvases of `size` cells, then their hard negatives), present (2n, 10), the
    named / other classes (n,) of each pair, and the n canvases' patch labels (n, rows * 7, cols * 7)."""
    per = (1, min(3, size[0] * size[1]))
    img, present, placed = canvases(x, y, n, gen, size, per, SHIFT * (size != (1, 1)), jitter=True)
    neg, neg_present, named, other = hard_negatives(x, y, img, present, placed, gen)
    labels = torch.stack([patch_labels(digits, img.shape[2:]) for digits in placed])
    return torch.cat([img, neg]), torch.cat([present, neg_present]), named, other, labels


def patch_labels(digits: list, shape: tuple[int, int], patch: int = PATCH) -> torch.Tensor:
    """Each patch's digit class, long (H / patch, W / patch): the digit with the most ink pixels (over INK of
    the normalised range) in it, -1 where no digit has ink."""
    H, W = shape
    ink = torch.zeros(10, H, W)
    for cls, digit, top, left in digits:
        ink[cls, top : top + CELL, left : left + CELL] += (digit[0] > BACKGROUND + INK).float()
    count = ink.reshape(10, H // patch, patch, W // patch, patch).sum((2, 4))
    best = count.argmax(0)
    return torch.where(count.amax(0) > 0, best, torch.full_like(best, -1))


def dense_loss(patch_logits: torch.Tensor, labels: torch.Tensor, blank_weight: float = BLANK_WEIGHT) -> torch.Tensor:
    """patch_logits (n, Np, 10) against labels (n, Np): cross-entropy on the patches with ink; the blank ones
    pushed to no caption in particular (cross-entropy with the uniform target), weighted `blank_weight`."""
    logp = patch_logits.log_softmax(-1)
    inked = labels >= 0
    ink = F.nll_loss(logp[inked], labels[inked]) if inked.any() else logp.sum() * 0
    blank = -logp[~inked].mean() if (~inked).any() else logp.sum() * 0
    return ink + blank_weight * blank


def loss_of(logits: torch.Tensor, present: torch.Tensor, named: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """logits (2n, 10) of canvases then their negatives: each present digit's caption against the absent ones',
    plus each pair's two captions choosing their own canvas of the pair."""
    n = len(named)
    eye = torch.eye(10, dtype=torch.bool)
    # (2n, 10 positives, 10): for positive d, the other present classes are left out
    left_out = present[:, None, :] & ~eye[None]
    z = logits[:, None, :].masked_fill(left_out, float("-inf"))
    nll = -(z.log_softmax(-1).diagonal(dim1=1, dim2=2))  # (2n, 10)
    i2t = nll[present].mean()
    if len(logits) == n:  # no hard negatives in the batch: image to text alone
        return i2t
    ar = torch.arange(n)
    pos = torch.stack([logits[ar, named], logits[n + ar, named]], 1)  # named caption: canvas, negative
    neg = torch.stack([logits[n + ar, other], logits[ar, other]], 1)  # new caption: negative, canvas
    t2i = -(pos.log_softmax(-1)[:, 0].mean() + neg.log_softmax(-1)[:, 0].mean()) / 2
    return i2t + t2i


def train(
    steps: int = 150,
    seed: int = 0,
    out: Path = Path("retrained"),
    device: str = "cpu",
    n: int = 6,
    init=None,
    sizes: tuple = SIZES,
    negatives: bool = True,
) -> dict:
    """Train, save weights and config into `out`, return the held-out accuracies (single digits; the
    top-2 captions of two-digit canvases). init: a digit_clip's weights to start from (.safetensors), else the
    image tower from mnist_vit's and the rest from random."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x, y, tr, ho = _digits()
    clip = dc.build()
    if init is None:
        own = load_file(WEIGHTS_DIR / "mnist_vit.safetensors")
        own = {k: v for k, v in own.items() if not k.startswith("head.")}
        clip.visual.trunk.load_state_dict(pooled_names(own, clip.visual.trunk))
    else:
        clip.load_state_dict(pooled_names(load_file(init), clip))
    clip = clip.to(device)
    tok = clip.tokenizer
    lr = 1e-3
    opt = torch.optim.AdamW(clip.parameters(), lr=lr, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    xt, yt = x[tr], y[tr]
    weights = torch.tensor([SIZE_WEIGHTS[SIZES.index(z)] if z in SIZES else 1.0 for z in sizes])
    t0 = time.time()
    for step in range(steps):
        clip.train()
        size = sizes[int(torch.multinomial(weights, 1, generator=gen))]
        img, present, named, other, labels = batch(xt, yt, gen, size, n * 2 if size == (1, 1) else n)
        if not negatives:  # the canvases alone
            img, present = img[: len(labels)], present[: len(labels)]
        templates = torch.randint(len(dc.TEMPLATES), (10,), generator=gen).tolist()
        ids = tok([dc.caption(d, t) for d, t in enumerate(templates)]).to(device)
        text = F.normalize(clip.encode_text(ids), dim=-1)
        trunk, head = clip.visual.trunk, clip.visual.head
        tokens = trunk.forward_features(img.to(device))
        emb = F.normalize(head(trunk.forward_head(tokens)), dim=-1)
        each = F.normalize(head(trunk.head(trunk.fc_norm(tokens[: len(labels), trunk.num_prefix_tokens :]))), dim=-1)
        scale = clip.logit_scale.exp()
        loss = loss_of((scale * emb @ text.T).cpu(), present, named, other)
        loss = loss + DENSE_WEIGHT * dense_loss((DENSE_SCALE * each @ text.T).cpu(), labels.flatten(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            clip.logit_scale.clamp_(0, np.log(100))
        if step % 50 == 49 or step == steps - 1:
            print(f"step {step + 1}/{steps} loss {loss.item():.3f} ({time.time() - t0:.0f}s)", flush=True)
    clip = clip.cpu()
    acc = evaluate(clip, x[ho], y[ho], seed)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in clip.state_dict().items()}, out / f"{dc.ALIAS}.safetensors")
    start = "mnist_vit" if init is None else f"{Path(init).name} (sha256 {_sha256(init)[:16]})"
    train_meta = {"steps": steps, "seed": seed, "init": start, "device": device, "canvases_per_step": n}
    train_meta |= {"sizes": [list(z) for z in sizes], "hard_negatives": negatives, "lr": lr}
    meta = {**dc.CONFIG, "heldout": acc, "train": train_meta}
    (out / f"{dc.ALIAS}.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(acc))
    return acc


def pooled_names(state: dict, model: torch.nn.Module) -> dict:
    """`state` with its final norm's tensors renamed to `model`'s: a class-token tower's `norm` is a mean-pooled
    one's `fc_norm` (timm puts the norm after the pool), so a token-pooled tower starts a mean-pooled one."""
    have = set(model.state_dict())
    out = {}
    for k, v in state.items():
        alt = k.replace("norm.", "fc_norm.") if k.endswith(("norm.weight", "norm.bias")) and "blocks" not in k else k
        out[alt if k not in have and alt in have else k] = v
    return out


def _sha256(path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def evaluate(clip: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, seed: int = 0) -> dict:
    """Held-out accuracy: single digits by their best caption; two-digit canvases (2 x 2 cells) by their two
    best captions."""
    clip.eval()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        text = F.normalize(clip.encode_text(clip.tokenizer([dc.caption(d) for d in range(10)])), dim=-1)
        single = (F.normalize(clip.encode_image(x), dim=-1) @ text.T).argmax(-1) == y
        img, present, _ = canvases(x, y, 500, gen)
        top2 = (F.normalize(clip.encode_image(img), dim=-1) @ text.T).topk(2, -1).indices
        pair = present.gather(1, top2).all(-1)
    return {
        "single_digit_accuracy": round(single.float().mean().item(), 4),
        "two_digit_canvas_accuracy": round(pair.float().mean().item(), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m weights.train_digit_clip", description=__doc__.splitlines()[0])
    parser.add_argument("--init", type=Path, help="start from these digit_clip weights (.safetensors)")
    parser.add_argument("--steps", type=int, default=150, help="optimiser steps (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("retrained"), help="output folder (default retrained/)")
    parser.add_argument("--device", default="cpu", help="torch device (default %(default)s)")
    parser.add_argument("--replace", action="store_true", help="write into weights/, replacing the shipped weights")
    parser.add_argument("--sizes", nargs="+", default=None, help="canvas sizes in cells, e.g. 3x3 2x2 (default: all)")
    parser.add_argument("--canvases", type=int, default=6, help="canvases a step (default %(default)s)")
    parser.add_argument("--no-negatives", action="store_true", help="no hard negatives (image-to-text and dense)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sizes = tuple(tuple(int(v) for v in z.split("x")) for z in args.sizes) if args.sizes else SIZES
    out = WEIGHTS_DIR if args.replace else args.out
    train(args.steps, args.seed, out, args.device, args.canvases, args.init, sizes, not args.no_negatives)
    return 0


if __name__ == "__main__":
    sys.exit(main())
