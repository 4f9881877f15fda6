"""`python -m attention evaluate DATA --model mnist_vit --maps attention,rollout,chefer,random --out OUT`: every
item of DATA scored (perturbation AUCs, deletion, insertion; pointing game and mIoU where masks are given), one
table of means with 95% intervals printed and written (OUT/table.md, OUT/table.json); a run in OUT resumes;
under `torchrun --nproc_per_node N` the shards are split between the processes."""

from __future__ import annotations

import argparse
from pathlib import Path

from attention.vit.engine import request


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(s) for s in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted comma-separated fractions, e.g. 0,0.1,0.2") from None


def add_parser(sub) -> argparse.ArgumentParser:
    """The `evaluate` subcommand's parser."""
    from attention.vit.score.compute import PROTOCOLS
    from attention.vit.score.protocol import STEPS, UNITS, VALUES

    e = sub.add_parser("evaluate", help="which map to trust: faithfulness and localisation scores over a dataset")
    e.add_argument(
        "data",
        help="folder or glob of images, hf:ORG/NAME, imagefolder:DIR, a saved dataset, an `extract` output folder, "
        "or planted:N (N held-out digit canvases with their masks)",
    )
    e.add_argument("--model", default="mnist_vit", help="a classifier, or a CLIP-like model with --prompts")
    e.add_argument("--maps", default="attention,rollout,chefer,random", help="comma-separated map names")
    e.add_argument("--prompts", default=None, help="CLIP: the answers scored over, comma-separated (2 to 8)")
    e.add_argument("--resolution", default=request.RESOLUTION, help="shorter side in px, 'auto' or 'native'")
    e.add_argument("--steps", type=_floats, default=STEPS, help="removed fractions (default Chefer's 0,0.1,...,0.9)")
    e.add_argument("--value", choices=VALUES, default="black", help="removal value (default black: Chefer's)")
    e.add_argument("--unit", choices=UNITS, default="patch", help="what is removed whole (default patch)")
    e.add_argument("--protocols", default=",".join(PROTOCOLS), help="perturbation[,deletion,insertion]")
    e.add_argument(
        "--tolerance",
        type=float,
        default=1.0,
        help="pointing game: a hit is closer than this, px (default 1: the peak)",
    )
    e.add_argument("--masks", default=None, help="a folder of masks for a folder of images (same names, .png)")
    e.add_argument("--split", default="train", help="split of a Hugging Face dataset (default train)")
    e.add_argument("--image-column", default=None, help="image column of a dataset (default: its first Image one)")
    e.add_argument("--mask-column", default=None, help="a dataset's mask column")
    e.add_argument("--label-column", default=None, help="a dataset's label column (the class explained)")
    e.add_argument("--cells", default="1,1", help="planted: rows,cols of 28 px cells (default 1,1)")
    e.add_argument("--digits", type=int, default=1, help="planted: digits per canvas (default 1)")
    e.add_argument("--limit", type=int, default=None, help="only the first N items")
    e.add_argument("--shard-size", type=int, default=100, help="items per shard (default 100)")
    e.add_argument("--seed", type=int, default=0, help="seed of the random map (default 0)")
    e.add_argument("--threads", type=int, default=None, help="torch threads on the CPU (default: torch's)")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.add_argument("--out", type=Path, required=True, help="output folder (a run there is resumed)")
    return e


def run(args) -> int:
    """Evaluate, print the table on rank 0."""
    import torch

    from attention.dataset.dist import dist_env
    from attention.errors import InputError
    from attention.vit.models.loader import load_vit
    from attention.vit.score.data import Items, open_items
    from attention.vit.score.run import evaluate
    from attention.vit.text.tower import has_text_tower

    if args.threads:
        torch.set_num_threads(args.threads)
    rank, _, local = dist_env()
    device = f"cuda:{local}" if torch.cuda.is_available() else "cpu"
    model = load_vit(args.model, device=device)
    try:
        cells = tuple(int(c) for c in args.cells.split(","))
    except ValueError:
        raise InputError(f"--cells {args.cells!r}: accepted rows,cols such as 2,2.") from None
    clip = has_text_tower(model)
    items = open_items(
        args.data, split=args.split, image_column=args.image_column, mask_column=args.mask_column,
        label_column=args.label_column, masks=args.masks, cells=cells, digits=args.digits,
        captions=clip and not args.prompts,
    )  # fmt: skip
    if args.limit is not None:
        n = max(0, min(args.limit, len(items)))
        items = Items(n, items.__getitem__, {**items.spec, "limit": n})
    table = evaluate(
        items,
        model,
        args.out,
        model_name=args.model,
        maps=tuple(m.strip() for m in args.maps.split(",")),
        prompts=[p.strip() for p in args.prompts.split(",")] if args.prompts else None,
        resolution=args.resolution,
        steps=args.steps,
        value=args.value,
        unit=args.unit,
        protocols=tuple(p.strip() for p in args.protocols.split(",")),
        tolerance=args.tolerance,
        shard_size=args.shard_size,
        seed=args.seed,
        progress=not args.no_progress,
    )
    if rank == 0:
        procs = f"{table.world} process{'es' if table.world > 1 else ''}"
        print(f"{args.model} on {args.data}: {table.items:,} items scored, {len(table.failed)} failed")
        print(f"this run: {table.done_now:,} items in {table.seconds:.1f} s on {procs} -> {args.out}/table.md")
        print(table.markdown())
        for f in table.failed[:10]:
            print(f"  failed {f['name']}: {f['error']}")
    return 0
