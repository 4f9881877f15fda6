"""Faithfulness, measured: the perturbation test of Chefer et al. on mnist_vit's held-out digits, by the
package's scoring (`attention.vit.score.score_maps`; the protocol and its settings: docs/faithfulness.md).

For each digit, each method's map ranks the patches; whole patches are removed (set to black, 0 before
normalising, as Chefer et al.'s perturbation code does) at the removed fractions 0, 0.1, ..., 0.9, in the
ranked order ("positive": most relevant first) and in reverse ("negative": least relevant first), and the
model's probability of the explained class (its top class on the whole digit) is read at each step; the area
under that curve over the removed fraction: lower is more faithful for positive, higher for negative.
Methods: the last layer's CLS attention (mean of heads), rollout (mean of heads, no discard), grad-rollout
(vit-explain, discard 0.9), Chefer et al.'s rule, and a random order.

    python -m bench.evaluate_relevance                    # the 1,000 held-out digits
    python -m bench.evaluate_relevance --limit 40         # the first 40
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from attention import mnist
from attention.vit.score import score_maps, scorer

METHODS = ("attention", "rollout", "grad_rollout", "chefer", "random")


def evaluate(model: torch.nn.Module, limit: int | None = None, seed: int = 0) -> dict:
    """The perturbation test on the held-out digits (`mnist.split`): per method the mean area under
    the positive and the negative curves; with the number of digits and the model's accuracy on them."""
    d = mnist.load_subset()
    held = mnist.split(len(d.labels))[1][:limit]
    sc = scorer(model)
    auc = {m: ([], []) for m in METHODS}
    correct = 0
    for i in held:
        r = score_maps(sc, d.images[i], list(METHODS), protocols=["perturbation"], seed=seed + int(i))
        correct += int(r.target == d.labels[i])
        for m, s in r.maps.items():
            auc[m][0].append(s.auc_positive)
            auc[m][1].append(s.auc_negative)
    return {
        "digits": len(held),
        "accuracy": correct / len(held),
        "auc": {m: (float(np.mean(pos)), float(np.mean(neg))) for m, (pos, neg) in auc.items()},
    }


def table(result: dict) -> str:
    """The result as a markdown table, best positive first."""
    rows = sorted(result["auc"].items(), key=lambda kv: kv[1][0])
    lines = [
        "| method | positive AUC (lower is better) | negative AUC (higher is better) | negative - positive |",
        "|---|---|---|---|",
    ]
    lines += [f"| {m} | {p:.4f} | {n:.4f} | {n - p:.4f} |" for m, (p, n) in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evaluate_relevance", description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N held-out digits (default: all 1,000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random order (default %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the CPU is shared)")
    args = parser.parse_args(argv)
    from attention.vit.models.loader import load_vit

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    result = evaluate(load_vit("mnist_vit", device="cpu"), limit=args.limit, seed=args.seed)
    print(
        f"mnist_vit, {result['digits']} held-out digits (top class = label on {result['accuracy']:.1%}), "
        f"{len(result['auc'])} methods, {time.perf_counter() - t0:.0f} s"
    )
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
