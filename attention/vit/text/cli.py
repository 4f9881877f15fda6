"""`python -m attention text IMAGE... --prompts "a cat, a remote" --model siglip2_vitb16`: per image,
text_relevance.png (each prompt's map, then the segmentation, captioned), text_relevance.npz and
text_relevance.json (the prompts ranked with their scores), into OUT/<image name>/."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub) -> argparse.ArgumentParser:
    """The `text` subcommand's parser."""
    t = sub.add_parser("text", help="where an image matches text prompts (CLIP, SigLIP, digit_clip)")
    t.add_argument("images", nargs="+", type=Path, help="image files")
    t.add_argument("--prompts", required=True, help="what to find, comma-separated: 'a cat, a remote' (1 to 8)")
    t.add_argument("--model", default="digit_clip", help="a model with a text tower (default digit_clip)")
    t.add_argument("--rule", default="chefer", help="the segmentation's rule: chefer, legrad or similarity")
    t.add_argument("--resolution", default="auto", help="shorter side in px, 'auto' or 'native'")
    t.add_argument("--cmap", default="inferno", help="colormap (default inferno)")
    t.add_argument("--out", type=Path, default=Path("attention_out"), help="output folder (default attention_out)")
    return t


def run(args, each_image) -> int:
    """Text relevance of every image of `args`; `each_image(images, out, one)` runs `one` per image."""
    import json
    import shutil

    from attention.errors import InputError
    from attention.vit.models.loader import load_vit
    from attention.vit.text import RULES, check_prompts, text_relevance
    from attention.vit.text.tower import text_model_of
    from attention.vit.text.views import write_answer

    if args.rule not in RULES:
        raise InputError(f"Rule {args.rule!r} is not accepted; accepted: {', '.join(RULES)}.")
    model = load_vit(args.model)
    prompts = check_prompts(args.prompts, text_model_of(model))

    def one(path: Path) -> str:
        tr = text_relevance(model, path, prompts, resolution=args.resolution)
        pic, npz, info = write_answer(tr, model=args.model, rule=args.rule, cmap=args.cmap)
        out = args.out / path.stem
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pic, out / "text_relevance.png")
        shutil.copyfile(npz, out / "text_relevance.npz")
        (out / "text_relevance.json").write_text(json.dumps(info, indent=2) + "\n")
        best = ", ".join(f"{p!r} {s:.1%}" for p, _, s in tr.ranking()[:3])
        return f"best match: {best} -> {out}/"

    return each_image(args.images, args.out, one)
