"""`python -m attention text IMAGE... --prompts "a cat, a remote" --model siglip2_vitb16`: per image,
text_relevance.png (each prompt's map, then the segmentation, captioned), text_relevance.npz and
text_relevance.json (the prompts ranked with their scores), into OUT/<image name>/."""

from __future__ import annotations

import argparse
from pathlib import Path

from attention.vit.engine import request


def add_parser(sub) -> argparse.ArgumentParser:
    """The `text` subcommand's parser."""
    t = sub.add_parser("text", help="where an image matches text prompts (CLIP, SigLIP, digit_clip)")
    t.add_argument("images", nargs="+", type=Path, help="image files")
    t.add_argument(
        "--prompts",
        required=True,
        help=f"what to find, comma-separated: 'a cat, a remote' (1 to {request.FIND_PROMPTS})",
    )
    t.add_argument("--model", default="digit_clip", help="a model with a text tower (default digit_clip)")
    t.add_argument(
        "--rule",
        default=request.FIND_RULE,
        help=f"the rule: {request.FIND_RULE} (default), naclip, clearclip, maskclip, proxy, chefer, legrad or "
        "similarity",
    )
    t.add_argument(
        "--residual",
        default="",
        help="open-vocabulary rules: keep the last block's residual and MLP (true/false; default: the paper's choice)",
    )
    for flag, b in (("--std", request.FIND_STD), ("--gamma", request.FIND_GAMMA), ("--beta", request.FIND_BETA)):
        t.add_argument(flag, default=b.default, help=f"{b.meaning}: {b.accepted} (default {b.default:g})")
    t.add_argument(
        "--proxy",
        default=None,
        help="the proxy rule's vision model (default: mnist_vit for digit_clip, else dino_vitb16)",
    )
    t.add_argument("--resolution", default=request.RESOLUTION, help="shorter side in px, 'auto' or 'native'")
    t.add_argument("--cmap", default=request.CMAP.default, help=f"colormap (default {request.CMAP.default})")
    t.add_argument("--out", type=Path, default=Path("attention_out"), help="output folder (default attention_out)")
    return t


def run(args, each_image) -> int:
    """Text relevance of every image of `args`; `each_image(images, out, one)` runs `one` per image."""
    import json
    import shutil

    from attention.vit.models.loader import load_vit
    from attention.vit.text import check_options, check_prompts, check_rule, text_relevance
    from attention.vit.text.service import proxy_of
    from attention.vit.text.tower import text_model_of
    from attention.vit.text.views import write_answer

    rule = check_rule(args.rule)
    opts = check_options(args.residual, args.std, args.gamma, args.beta)
    model = load_vit(args.model)
    prompts = check_prompts(args.prompts, text_model_of(model))
    proxy = load_vit(args.proxy or proxy_of(args.model)) if rule == "proxy" else None

    def one(path: Path) -> str:
        tr = text_relevance(model, path, prompts, rules=rule, options=opts, proxy=proxy, resolution=args.resolution)
        pic, npz, info = write_answer(tr, model=args.model, rule=rule, cmap=args.cmap)
        out = args.out / path.stem
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pic, out / "text_relevance.png")
        shutil.copyfile(npz, out / "text_relevance.npz")
        (out / "text_relevance.json").write_text(json.dumps(info, indent=2) + "\n")
        best = ", ".join(f"{p!r} {tr.score_name.split(' ')[0]} {s:.3f}" for p, _, s in tr.ranking()[:3])
        return f"best match: {best} -> {out}/"

    return each_image(args.images, args.out, one)
