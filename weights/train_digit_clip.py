"""Train `digit_clip` so that its patch tokens name the digit they hold (seeded; its run: docs/text-relevance.md).

    python -m weights.train_digit_clip --threads 1 --steps 1200 --present-weight 2 --pos-cells 3 --check-every 400
    (the same with --replace)            # into weights/, replacing the shipped ones (default: into retrained/)

Image tower: mnist_vit's timm ViT pooled by the mean of its patch tokens (so the image embedding is made of the
patch tokens the maps read), started from mnist_vit's shipped weights (its classifier dropped; its final norm
becomes the pool's norm) or from a digit_clip's (`--init`); the text tower and the projections from random.
`--pos-cells N`: the tower's position embedding is made for N x N cells of 28 px (img_size 28 N), mnist_vit's
7 x 7 one tiled per cell plus half of it resampled over the grid (`digit_clip_init.tiled_pos`): with mnist_vit's
7 x 7 stretched over a canvas, a lone digit on a canvas had a third of its ink patches naming it.
Each step is four forwards, one per token count (GROUPS): single digits at 28 px (the single-digit accuracy),
single digits at 56 px (the app's "auto" size for a 28 px digit), and canvases of 2 x 2 and 3 x 3 cells of 28 px
holding 1 to 3 digits of different classes at random places (`attention.planted`'s layout, each digit shifted
by up to 6 px); mnist_vit's jitter on every digit. Losses over the ten digits' captions (a random template
each, the text tower trained with them), in `weights/digit_clip_dense.py` but the first:
- caption: the pooled embedding (the model's own logit scale) names each digit present against the captions of
  the digits absent (the other present digits left out, not pushed down);
- dense (DENSE_WEIGHT): each patch token through the pool's norm and the projection, as `Tower.embed_each` reads
  it, against the ten captions and a background threshold (a cosine learnt beside the model, not saved), at a
  fixed scale: a patch holding a digit's ink (a pixel over `planted.INK`, as the planted check counts ink) names
  that digit's caption over the threshold and over the others; a blank patch stays under the threshold for every
  caption (BLANK_WEIGHT). Taken on each of PATHS (`--paths`): the final tokens (the raw similarity) and the
  tokens MaskCLIP, ClearCLIP and NACLIP make from the last block (the app's own rule code, `digit_clip_dense`);
  the 28 px single digits on the first path only;
- present (PRESENT_WEIGHT, canvases and 56 px digits): each ink patch's digit against the other digits of its
  image only, at scale 30 (the segmentation's question: its prompt clearly over the image's other prompts).
The labels come from where the canvas put each digit: dense supervision from the layout, not from the captions
alone. Learning rate: AdamW, linear warm-up then cosine to 0. Only the split's train digits are used; the
held-out ones are the checks' (`evaluate`, `progress`: seed-1 canvases; bench/bench_digit_clip.py: seed 0).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attention import mnist, planted
from attention.config import EXAMPLES_DIR, WEIGHTS_DIR
from attention.vit.models.mnist_vit import _augment, _digits
from attention.vit.text import digit_clip as dc
from attention.vit.text.tower import vision_tower
from weights.digit_clip_dense import dense_loss, present_loss, rule_tokens, tokens_and_block_in
from weights.digit_clip_init import pooled_names, tiled_pos

BACKGROUND = (0 - mnist.MEAN) / mnist.STD  # a blank pixel, normalised
INK = planted.INK / 255 / mnist.STD  # a pixel is ink this far over blank (normalised): the planted check's ink
CELL = planted.CELL
PATCH = 4  # the tower's patch size
GROUPS = ((1, 16), (2, 4), ((2, 2), 4), ((3, 3), 5))  # (a single digit's scale, or a canvas's cells; images a step)
SHIFT = 6  # px a canvas's digit moves off its cell's corner, each way
DENSE_WEIGHT = 2.0  # the dense loss beside the caption loss
PRESENT_WEIGHT = 1.0  # the present loss beside the caption loss
RULES = ("similarity", "maskclip", "sclip", "clearclip", "naclip")  # the forward-only rules the checks read
PATHS = ("similarity", "maskclip", "clearclip", "naclip")  # the tokens the dense loss trains (`digit_clip_dense`)


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
        stack = np.stack([d[0].numpy() for _, d, _, _ in digits])
        out[i, 0] = torch.from_numpy(planted.compose(stack, corners, cells, BACKGROUND))
        present[i, classes] = True
        placed.append(digits)
    return out, present, placed


def patch_labels(digits: list, shape: tuple[int, int], patch: int = PATCH) -> torch.Tensor:
    """Each patch's digit class, long (H / patch, W / patch), of [(class, digit (1, h, w), top, left)] on a
    canvas of `shape`: the digit with the most ink pixels (over INK) in the patch, -1 where none has any."""
    H, W = shape
    ink = torch.zeros(10, H, W)
    for cls, digit, top, left in digits:
        h, w = digit.shape[-2:]
        ink[cls, top : top + h, left : left + w] += (digit[0] > BACKGROUND + INK).float()
    count = ink.reshape(10, H // patch, patch, W // patch, patch).sum((2, 4))
    best = count.argmax(0)
    return torch.where(count.amax(0) > 0, best, torch.full_like(best, -1))


def group(x, y, gen: torch.Generator, kind, n: int):
    """One group of a step: (images (n, 1, H, W), present (n, 10), patch labels (n, H / 4 * W / 4)). kind: an
    int, single digits at that scale (bilinear, as a browser's upscaled digit); else a canvas's (rows, cols)."""
    if isinstance(kind, int):
        idx = torch.randint(len(y), (n,), generator=gen)
        img = _augment(x[idx], gen)
        if kind != 1:
            img = F.interpolate(img, scale_factor=kind, mode="bilinear", align_corners=False)
        placed = [[(int(c), d, 0, 0)] for c, d in zip(y[idx], img)]
        present = F.one_hot(y[idx], 10).bool()
    else:
        img, present, placed = canvases(x, y, n, gen, kind, (1, min(3, kind[0] * kind[1])), SHIFT, jitter=True)
    labels = torch.stack([patch_labels(d, img.shape[2:]) for d in placed])
    return img, present, labels.flatten(1)


def caption_loss(logits: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """logits (n, 10), present (n, 10) bool: each present digit's caption against the absent ones' (the other
    present digits left out), mean over the present digits."""
    eye = torch.eye(10, dtype=torch.bool)
    z = logits[:, None, :].masked_fill(present[:, None, :] & ~eye[None], float("-inf"))  # (n, positive d, 10)
    nll = -(z.log_softmax(-1).diagonal(dim1=1, dim2=2))
    return nll[present].mean()


def train(
    steps: int = 800,
    seed: int = 0,
    out: Path = Path("retrained"),
    init=None,
    checks: int = 100,
    lr: float = 2e-3,
    dense_weight: float = DENSE_WEIGHT,
    paths: tuple[str, ...] = PATHS,
    check_every: int = 0,
    present_weight: float = PRESENT_WEIGHT,
    reps: int = 1,
) -> dict:
    """Train, save weights and config into `out`, return the held-out figures (`evaluate`). init: a digit_clip's
    weights (.safetensors) to start from, else the image tower from mnist_vit's and the rest from random."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x, y, tr, ho = _digits()
    cfg = json.loads(json.dumps(dc.CONFIG))
    cfg["vision"]["model_args"]["img_size"] = CELL * reps
    clip = dc.build(cfg)
    if init is None:
        own = {k: v for k, v in load_file(WEIGHTS_DIR / "mnist_vit.safetensors").items() if not k.startswith("head.")}
        own["pos_embed"] = tiled_pos(own["pos_embed"], clip.visual.trunk.num_prefix_tokens, reps)
        clip.visual.trunk.load_state_dict(pooled_names(own, clip.visual.trunk))
    else:
        clip.load_state_dict(pooled_names(load_file(init), clip))
    tower, tok = vision_tower(clip), clip.tokenizer
    threshold = torch.nn.Parameter(torch.tensor(0.2))
    opt = torch.optim.AdamW([*clip.parameters(), threshold], lr=lr, weight_decay=0.05)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps)))
    )
    xt, yt = x[tr], y[tr]
    t0, prefix = time.time(), tower.num_prefix_tokens
    for step in range(steps):
        clip.train()
        templates = torch.randint(len(dc.TEMPLATES), (10,), generator=gen).tolist()
        text = F.normalize(clip.encode_text(tok([dc.caption(d, t) for d, t in enumerate(templates)])), dim=-1)
        loss, right = torch.zeros(()), []
        for kind, n in GROUPS:
            img, present, labels = group(xt, yt, gen, kind, n)
            tokens, block_in = tokens_and_block_in(tower.trunk, img)
            emb = F.normalize(tower.embed(tokens), dim=-1)
            loss = loss + caption_loss(clip.logit_scale.exp() * emb @ text.T, present)
            used = paths if kind != 1 else paths[:1]  # 28 px single digits: the first path only
            for path in used:
                if path == "similarity":
                    each = tokens[:, prefix:]
                else:
                    grid = (img.shape[2] // PATCH, img.shape[3] // PATCH)
                    each = torch.stack([rule_tokens(tower.trunk, b, path, grid) for b in block_in])
                cosines = F.normalize(tower.embed_each(each), dim=-1) @ text.T
                loss = loss + dense_weight / len(used) * dense_loss(cosines, threshold, labels)
                if present_weight and kind != 1:  # canvases and 56 px digits (one digit: the loss is 0)
                    loss = loss + present_weight / len(used) * present_loss(cosines, labels, present)
                right.append((cosines.argmax(-1) == labels)[labels >= 0].float().mean().item())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(clip.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            clip.logit_scale.clamp_(0, np.log(100))
        if step % 50 == 49 or step in (4, steps - 1):
            ink = " ".join(f"{r:.2f}" for r in right)  # share of ink patches naming their digit, per group
            print(f"step {step + 1}/{steps} loss {loss.item():.3f} ink {ink} ({time.time() - t0:.0f}s)", flush=True)
        if check_every and step % check_every == check_every - 1:
            progress(clip.eval(), step + 1)
            out.mkdir(parents=True, exist_ok=True)  # a checkpoint each check (not the shipped file)
            save_file({k: v.contiguous() for k, v in clip.state_dict().items()}, out / f"step{step + 1}.safetensors")
    minutes = round((time.time() - t0) / 60, 1)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in clip.state_dict().items()}, out / f"{dc.ALIAS}.safetensors")
    figures = evaluate(clip.eval(), x[ho], y[ho], seed, checks)
    start = "mnist_vit" if init is None else f"{Path(init).name} (sha256 {_sha256(init)[:16]})"
    groups = [[list(k) if isinstance(k, tuple) else k, n] for k, n in GROUPS]
    meta = {**cfg, **figures}
    meta["train"] = {"steps": steps, "seed": seed, "init": start, "groups": groups, "lr": lr}
    meta["train"] |= {"dense_weight": dense_weight, "paths": list(paths), "minutes": minutes}
    meta["train"] |= {"present_weight": present_weight, "pos_cells": reps}
    meta["train"]["threads"] = torch.get_num_threads()
    (out / f"{dc.ALIAS}.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(figures))
    return figures


def progress(clip: torch.nn.Module, step: int, n: int = 40) -> None:
    """Print the planted check's best peaks and labels on n canvases of seed 1 (held-out digits, not the bench's
    seed-0 canvases) while training."""
    from bench.bench_digit_clip import evaluate as planted_check

    with torch.no_grad():
        rules = planted_check(clip, n=n, seed=1, rules=RULES)["rules"]
    best = {k: max(rules, key=lambda r: rules[r][k]) for k in ("peaks", "labels")}
    print(f"check {step}: " + " ".join(f"{k} {r} {rules[r][k]:.0%}" for k, r in best.items()), flush=True)


def _sha256(path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def evaluate(clip: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, seed: int = 0, checks: int = 100) -> dict:
    """Held-out figures: single digits by their best caption; two-digit canvases (2 x 2 cells) by their two best
    captions; the planted check's first `checks` canvases per forward-only rule (bench/bench_digit_clip.py); the
    4 example against "a 4, a 9" (its patches per label at the app's "auto" size, per rule)."""
    from attention.vit.text import text_relevance
    from bench.bench_digit_clip import evaluate as planted_check

    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        text = F.normalize(clip.encode_text(clip.tokenizer([dc.caption(d) for d in range(10)])), dim=-1)
        single = (F.normalize(clip.encode_image(x), dim=-1) @ text.T).argmax(-1) == y
        img, present, _ = canvases(x, y, 500, gen)
        top2 = (F.normalize(clip.encode_image(img), dim=-1) @ text.T).topk(2, -1).indices
        pair = present.gather(1, top2).all(-1)
    heldout = {
        "single_digit_accuracy": round(single.float().mean().item(), 4),
        "two_digit_canvas_accuracy": round(pair.float().mean().item(), 4),
    }
    check = planted_check(clip, n=checks, seed=0, rules=RULES)
    tr = text_relevance(clip, EXAMPLES_DIR / "digits" / "digit_4.png", ["a 4", "a 9"], rules=RULES[1:])
    four = {r: {k: int((tr.segmentation(r) == i).sum()) for i, k in ((0, "a 4"), (1, "a 9"), (-1, "none"))}
            for r in RULES}  # fmt: skip
    return {"heldout": heldout, "planted": {"cases": checks, **check["rules"]}, "four_vs_nine": four}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m weights.train_digit_clip", description=__doc__.splitlines()[0])
    parser.add_argument("--init", type=Path, help="start from these digit_clip weights (.safetensors)")
    parser.add_argument("--steps", type=int, default=800, help="optimiser steps (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("retrained"), help="output folder (default retrained/)")
    parser.add_argument("--checks", type=int, default=100, help="planted canvases checked after (default 100)")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default %(default)s)")
    parser.add_argument("--dense-weight", type=float, default=DENSE_WEIGHT, help="the dense loss's weight (default 2)")
    parser.add_argument("--paths", default=",".join(PATHS), help="the dense loss's tokens (default %(default)s)")
    parser.add_argument("--present-weight", type=float, default=PRESENT_WEIGHT, help="the present loss's weight")
    parser.add_argument("--pos-cells", type=int, default=1, help="position embedding for N x N cells (default 1)")
    parser.add_argument("--check-every", type=int, default=0, help="planted check every N steps (default: none)")
    parser.add_argument("--replace", action="store_true", help="write into weights/, replacing the shipped weights")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = WEIGHTS_DIR if args.replace else args.out
    paths = tuple(args.paths.split(","))
    train(
        args.steps,
        args.seed,
        out,
        args.init,
        args.checks,
        args.lr,
        args.dense_weight,
        paths,
        args.check_every,
        args.present_weight,
        args.pos_cells,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
