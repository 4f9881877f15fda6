"""`python -m attention.retrieval`: print the retrieval metrics, or retrain the two retrievers.

python -m attention.retrieval evaluate          # docs/retrieval.md's table, one name=value per line
python -m attention.retrieval train             # retrains both into retrained/ (seeded)
python -m attention.retrieval train --replace   # ... into weights/, replacing the shipped ones
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from attention.config import WEIGHTS_DIR
from attention.retrieval import lookup, models, train


def _print_metrics(metrics: dict[str, float]) -> None:
    for name, value in metrics.items():
        print(f"{name}={int(value) if name == 'queries' else f'{value:.4f}'}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m attention.retrieval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="print the retrieval metrics (docs/retrieval.md), one name=value per line")
    ev.add_argument("--n", type=int, default=lookup.DEFAULT_N, help="database size (default %(default)s)")
    ev.add_argument("--seed", type=int, default=lookup.DEFAULT_SEED, help="database seed (default %(default)s)")
    ev.add_argument("--queries", type=int, default=None, help="use only the first K held-out queries")
    ev.add_argument("--weights", type=Path, default=WEIGHTS_DIR, help="folder of the weights (default weights/)")
    tr = sub.add_parser("train", help="retrain the retrievers from scratch (seeded, a few CPU minutes)")
    tr.add_argument("--models", nargs="+", default=list(train.CONFIGS), choices=list(train.CONFIGS))
    tr.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the CPU is shared)")
    tr.add_argument("--out", type=Path, default=Path("retrained"), help="output folder (default retrained/)")
    tr.add_argument("--replace", action="store_true", help="write into weights/, replacing the shipped weights")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "evaluate":
        loaded = {name: models.load(name, args.weights)[0] for name in models.MODEL_NAMES}
        _print_metrics(lookup.evaluate(args.n, args.seed, args.queries, models=loaded))
        return 0
    out = WEIGHTS_DIR if args.replace else args.out
    torch.set_num_threads(args.threads)
    trained = {}
    for name in args.models:
        trained[name], config = train.train(name)
        path = models.save(trained[name], name, config, out)
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")
    loaded = {name: trained.get(name) or models.load(name)[0] for name in models.MODEL_NAMES}
    _print_metrics(lookup.evaluate(models=loaded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
