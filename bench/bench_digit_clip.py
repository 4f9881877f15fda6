"""The planted check of text relevance with the shipped digit_clip: two or three held-out MNIST digits in known
cells of a larger canvas (`attention.planted`: the split's held-out fifth, never trained on); per rule, does
each digit's prompt peak on that digit, and does the segmentation label each digit with its own prompt?

    python -m bench.bench_digit_clip                 # 200 canvases, every rule (~2-4 min on 1 thread)
    python -m bench.bench_digit_clip --cases 40 --cells 3 3

Canvases: 84 x 84 px (3 x 3 cells of 28 px), 2 or 3 digits of different classes in random cells, the rest
blank. Prompts: "a handwritten <name>" for each digit present. A prompt's peak is right when its map's highest
patch lies inside its digit's cell; a digit is labelled right when, among its ink patches (patches with any
of its ink: `Planted.masks`), its own prompt is the most common label of the segmentation ("none" counts as a
label: a digit left unlabelled is wrong). The proxy rule uses mnist_vit's patch similarity.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

RULE_ORDER = ("chefer", "legrad", "similarity", "maskclip", "sclip", "clearclip", "naclip", "proxy")


def check(tr, p, rule: str) -> tuple[list[bool], list[bool]]:
    """(peak right per prompt, digit labelled right per digit) of one TextRelevance on one Planted canvas."""
    s = tr.patch_size
    gh, gw = tr.grid
    maps, seg = tr.maps(rule), tr.segmentation(rule)
    peaks, labels = [], []
    for j, (top, left, bottom, right) in enumerate(p.boxes):
        r, c = np.unravel_index(int(maps[j].argmax()), tr.grid)
        peaks.append(bool(top <= r * s + s // 2 < bottom and left <= c * s + s // 2 < right))
        ink = p.masks[j].reshape(gh, s, gw, s).any((1, 3))
        got = seg[ink]
        values, counts = np.unique(got, return_counts=True)
        labels.append(bool(values[counts.argmax()] == j))
    return peaks, labels


def evaluate(model, proxy=None, n: int = 200, seed: int = 0, cells=(3, 3), rules=RULE_ORDER) -> dict:
    """Shares of right peaks (per prompt) and right labels (per digit), per rule of `rules`, over n planted
    canvases (the proxy rule with `proxy`, a vision model)."""
    from PIL import Image

    from attention.planted import planted_batch
    from attention.vit.text import text_relevance
    from attention.vit.text.digit_clip import caption

    tally = {r: {"peaks": [], "labels": []} for r in rules}
    t0 = time.perf_counter()
    for p in planted_batch(n, (2, 3), tuple(cells), seed):
        prompts = [caption(int(c)) for c in p.classes]
        tr = text_relevance(model, Image.fromarray(p.image), prompts, rules=rules, proxy=proxy, resolution="native")
        for rule in rules:
            peaks, labels = check(tr, p, rule)
            tally[rule]["peaks"] += peaks
            tally[rule]["labels"] += labels
    out = {r: {k: round(float(np.mean(v)), 4) for k, v in t.items()} for r, t in tally.items()}
    return {"rules": out, "cases": n, "cells": list(cells), "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cells", type=int, nargs=2, default=(3, 3))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch

    from attention.vit.models.loader import load_vit

    torch.set_num_threads(args.threads)
    res = evaluate(
        load_vit("digit_clip", device="cpu"), load_vit("mnist_vit", device="cpu"), args.cases, args.seed, args.cells
    )
    h, w = 28 * args.cells[0], 28 * args.cells[1]
    print(f"digit_clip planted check: {res['cases']} held-out canvases ({h}x{w} px, 2 or 3 digits), {res['seconds']} s")
    print("| rule | peak on its digit | digit labelled by its prompt |")
    print("|---|---|---|")
    for rule, r in res["rules"].items():
        print(f"| {rule} | {r['peaks']:.1%} | {r['labels']:.1%} |")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
