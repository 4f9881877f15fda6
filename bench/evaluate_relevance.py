"""Faithfulness, measured: the perturbation test of Chefer et al. on mnist_vit's held-out digits.

For each digit, each method ranks the patches; patches are removed (set to the dataset's mean, 0 after
normalisation, as Chefer et al.'s perturbation code does) 0%, 10%, ..., 100% at a time, in the ranked
order ("positive": most relevant first) and in reverse ("negative": least relevant first), and the
model's probability of the explained class (its top class on the whole digit) is read at each step.
The area under that curve over the removed fraction: lower is more faithful for positive, higher for
negative. Methods: the last layer's CLS attention (mean of heads), rollout (Abnar & Zuidema, mean of
heads, no discard), grad-rollout (vit-explain, discard 0.9), Chefer et al.'s rule, and a random order.

    python -m bench.evaluate_relevance                    # the 1,000 held-out digits, ~1-2 min
    python -m bench.evaluate_relevance --limit 40         # the first 40
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from attention import mnist
from attention.vit.backbone import describe
from attention.vit.engine.extract import attention_maps
from attention.vit.engine.flow import rollout_map
from attention.vit.engine.preprocess import prepare
from attention.vit.relevance.compute import relevance

METHODS = ("attention", "rollout", "grad_rollout", "chefer", "random")
STEPS = np.linspace(0.0, 1.0, 11)  # removed fraction of the patches


def orders(rel, digit: np.ndarray, model: torch.nn.Module, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Each method's patch indices, most relevant first (int64 (gh*gw,) each)."""
    maps = {
        "attention": rel.attention_map,
        "rollout": rollout_map(attention_maps(model, digit, keep_qk=True)),
        "grad_rollout": rel.grad_rollout_map,
        "chefer": rel.chefer_map,
    }
    out = {k: np.argsort(-v.ravel(), kind="stable") for k, v in maps.items()}
    out["random"] = rng.permutation(rel.grid[0] * rel.grid[1])
    return out


def removal_batch(x: torch.Tensor, order: np.ndarray, grid: tuple[int, int], patch: int) -> torch.Tensor:
    """x (1, C, H, W) with the first round(f * n) patches of `order` set to 0, for each f of STEPS:
    (len(STEPS), C, H, W)."""
    n = grid[0] * grid[1]
    keep = torch.ones(len(STEPS), n)
    for i, f in enumerate(STEPS):
        keep[i, torch.from_numpy(order[: int(round(f * n))])] = 0.0
    mask = keep.reshape(-1, 1, *grid).repeat_interleave(patch, 2).repeat_interleave(patch, 3)
    return x * mask


def curves(model: torch.nn.Module, digit: np.ndarray, rng: np.random.Generator) -> tuple[dict, int]:
    """({method: (positive curve, negative curve)}, the explained class) of one digit (uint8 (28, 28));
    curves float64 (len(STEPS),): the class's probability at each removed fraction."""
    rel = relevance(model, digit)
    x, _, grid = prepare(model, digit, "auto", 16384, None)
    patch = describe(model).patch_size
    batches, names = [], []
    for name, order in orders(rel, digit, model, rng).items():
        batches += [removal_batch(x, order, grid, patch), removal_batch(x, order[::-1].copy(), grid, patch)]
        names.append(name)
    with torch.inference_mode():
        p = torch.softmax(model(torch.cat(batches)).float(), -1)[:, rel.target].double().numpy()
    p = p.reshape(len(names), 2, len(STEPS))
    return {n: (p[i, 0], p[i, 1]) for i, n in enumerate(names)}, rel.target


def evaluate(model: torch.nn.Module, limit: int | None = None, seed: int = 0) -> dict:
    """The perturbation test on the held-out digits (`mnist.split`): per method the mean area under
    the positive and the negative curves; with the number of digits and the model's accuracy on them."""
    d = mnist.load_subset()
    held = mnist.split(len(d.labels))[1][:limit]
    rng = np.random.default_rng(seed)
    auc = {m: [[], []] for m in METHODS}
    correct = 0
    for i in held:
        c, target = curves(model, d.images[i], rng)
        correct += int(target == d.labels[i])
        for m, (pos, neg) in c.items():
            auc[m][0].append(np.trapezoid(pos, STEPS))
            auc[m][1].append(np.trapezoid(neg, STEPS))
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
