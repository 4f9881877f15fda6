"""Command line: `python -m attention maps|features|relevance IMAGE... [options]`, `python -m attention extract
SOURCE`, `python -m attention video IN [options]`, `python -m attention text IMAGE... --prompts "a cat, a dog"`.

maps: writes, per image, each head's map, the mean and the threshold masks as PNG overlays and
the raw arrays as .npz (as DINO's visualize_attention.py does), into OUT/<image name>/.
relevance: why a classifier says a class: relevance.png (Chefer et al.'s map, grad-rollout and the CLS
attention of the same pass, captioned), relevance.npz and relevance.json (the top classes), per image.
features: the feature views (pca.png, similarity.png, norms.png, features.npz) and the model view
(model_view.png: every layer x head of the query), from the same one forward pass.
extract: a whole dataset (folder, glob, Hugging Face dataset) in batches, into Parquet shards;
runs under `torchrun --nproc_per_node N` too (attention.dataset).
video: an H.264 MP4 of the attention of every frame of a video (DINO's video_generation.py, batched:
`--resize`, `--threshold`, `--fps` as there), optionally the frame beside it and an .npz of the maps.
A bad file gets one clear line; the other images are still processed.
Your own checkpoint: `--weights ckpt.pth --arch vit_small_patch16_224` (DINO's `teacher`/`student` keys and
`module.`/`backbone.` prefixes understood; `--checkpoint-key`, `--family dino` for DINO's preprocessing).
"""

from __future__ import annotations

import argparse
import sys

from attention.cli.commands import COMMANDS
from attention.cli.parser import build_parser
from attention.errors import AttentionError
from attention.vit.checkpoint import use_checkpoint


def _parser() -> argparse.ArgumentParser:
    return build_parser(__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:  # what stops a whole command (a model, a checkpoint, a source, an option): one line, exit status 2
        args.model = use_checkpoint(args.weights, args.arch, args.checkpoint_key, args.family) or args.model
        return COMMANDS[args.command](args)
    except AttentionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
