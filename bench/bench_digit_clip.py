"""The planted check of text relevance with the shipped digit_clip (issue 35): two or three held-out MNIST
digits pasted into known cells of a larger canvas; does each digit's caption peak on that digit, and does the
segmentation label each digit's ink with its caption?

    python -m bench.bench_digit_clip                 # 300 canvases, every rule (~1-2 min on 1 thread)
    python -m bench.bench_digit_clip --cases 60

Canvases: 56 x 84 px (2 x 3 cells of 28 px; digit_clip trained on 28 x 28 digits and 56 x 56 canvases only),
2 or 3 held-out digits (the split's held-out fifth, never trained on) of different classes in random cells,
the rest blank. Prompts: "a handwritten <name>" for each digit present. A prompt's peak is right when its
map's highest patch lies in its digit's cell; a digit's segment is right when most of its ink patches (patches
with any stroke: mean intensity over 40/255) are labelled with its prompt; a case is right when all its peaks
and segments are.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

CELL = 28
CELLS = (2, 3)


def canvases(n: int, seed: int = 0):
    """n (image uint8 (56, 84), cells (k,), labels (k,)) from held-out digits, k = 2 or 3 alternately."""
    from attention import mnist

    d = mnist.load_subset()
    _, ho = mnist.split(len(d.labels))
    rng = np.random.default_rng(seed)
    rows, cols = CELLS
    out = []
    for i in range(n):
        k = 2 + i % 2
        img = np.zeros((CELL * rows, CELL * cols), np.uint8)
        cells = rng.choice(rows * cols, k, replace=False)
        classes = rng.choice(10, k, replace=False)
        for c, cls in zip(cells, classes):
            pick = rng.choice(ho[d.labels[ho] == cls])
            r, q = divmod(int(c), cols)
            img[CELL * r : CELL * (r + 1), CELL * q : CELL * (q + 1)] = d.images[pick]
        out.append((img, cells, classes))
    return out


def check(tr, img: np.ndarray, cells, classes, rule: str) -> tuple[list[bool], list[bool]]:
    """(peak right per prompt, segment right per digit) of one TextRelevance on one canvas."""
    p = tr.patch_size
    cols = CELLS[1]
    maps, seg = tr.maps(rule), tr.segmentation(rule)
    ink = img.reshape(tr.grid[0], p, tr.grid[1], p).mean((1, 3)) > 40
    peaks, segs = [], []
    for j, c in enumerate(cells):
        r, q = divmod(int(c), cols)
        pr, pq = np.unravel_index(int(maps[j].argmax()), tr.grid)
        peaks.append((pr * p) // CELL == r and (pq * p) // CELL == q)
        area = np.zeros(tr.grid, bool)
        area[r * CELL // p : (r + 1) * CELL // p, q * CELL // p : (q + 1) * CELL // p] = True
        area &= ink
        segs.append(bool((seg[area] == j).mean() > 0.5))
    return peaks, segs


def evaluate(model, n: int = 300, seed: int = 0) -> dict[str, dict[str, float]]:
    """Shares of right peaks (per prompt), segments (per digit) and cases, per rule, over n canvases."""
    from PIL import Image

    from attention.vit.text import RULES, text_relevance
    from attention.vit.text.digit_clip import caption

    tally = {r: {"peaks": [], "segments": [], "cases": []} for r in RULES}
    for img, cells, classes in canvases(n, seed):
        tr = text_relevance(model, Image.fromarray(img), [caption(int(c)) for c in classes], resolution="native")
        for rule in RULES:
            peaks, segs = check(tr, img, cells, classes, rule)
            tally[rule]["peaks"] += peaks
            tally[rule]["segments"] += segs
            tally[rule]["cases"].append(all(peaks) and all(segs))
    out = {r: {k: round(float(np.mean(v)), 4) for k, v in t.items()} for r, t in tally.items()}
    out["cases"] = n
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import torch

    from attention.vit.models.loader import load_vit

    torch.set_num_threads(args.threads)
    res = evaluate(load_vit("digit_clip", device="cpu"), args.cases, args.seed)
    print(f"digit_clip planted check: {res['cases']} held-out canvases (56x84 px, 2 or 3 digits)")
    for rule in ("chefer", "legrad", "similarity"):
        r = res[rule]
        print(
            f"  {rule:<10} peak on its digit {r['peaks']:.1%}, segment right {r['segments']:.1%}, "
            f"whole case {r['cases']:.1%}"
        )
    print(json.dumps(res))


if __name__ == "__main__":
    main()
