"""`python -m attention.vit.relevance evaluate`: the perturbation test on mnist_vit's held-out digits."""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention.vit.relevance", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="perturbation test of raw attention, rollout, grad-rollout, Chefer's rule")
    ev.add_argument("--limit", type=int, default=None, help="only the first N held-out digits (default: all 1,000)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the random order (default %(default)s)")
    ev.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the CPU is shared)")
    args = parser.parse_args(argv)
    import torch

    from attention.vit.models import load_vit
    from attention.vit.relevance.evaluate import evaluate, table

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
