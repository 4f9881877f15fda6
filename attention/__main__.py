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
from pathlib import Path

from attention.errors import AttentionError
from attention.vit.models.loader import default_model
from attention.vit.models.own_checkpoint import checkpoint_args, use_checkpoint
from attention.vit.text import cli as text_cli

RESOLUTION_HELP = "shorter side in px (DINOv3: the height), 'auto', 'native' or 'dino480'"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attention", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("maps", help="write attention maps of images (PNG overlays + .npz)")
    m.add_argument("images", nargs="+", type=Path, help="image files")
    m.add_argument(
        "--model", default=default_model(), help="alias (dino_vits16, mnist_vit, ...), timm name or hf-hub:org/repo"
    )
    m.add_argument("--layer", type=int, default=-1, help="layer (default: last)")
    m.add_argument("--resolution", default="auto", help=RESOLUTION_HELP)
    m.add_argument(
        "--query",
        default=None,
        help="a token (cls, dist, pool, reg0, ...) or ROW,COL of a patch (default: CLS, "
        "else the pooling head's, else the centre patch)",
    )
    m.add_argument(
        "--threshold", type=_threshold, default=0.6, help="share of each head's mass kept by masks (default 0.6)"
    )
    m.add_argument("--cmap", default="inferno", help="matplotlib colormap (default inferno)")
    m.add_argument("--out", type=Path, default=Path("attention_out"), help="output folder (default attention_out)")
    f = sub.add_parser("features", help="write feature views (PCA, similarity, norms) and the model view of images")
    f.add_argument("images", nargs="+", type=Path, help="image files")
    f.add_argument("--model", default=default_model(), help="alias, timm name or hf-hub:org/repo")
    f.add_argument("--layer", type=int, default=-1, help="layer whose output tokens (default: last, after the norm)")
    f.add_argument("--resolution", default="auto", help=RESOLUTION_HELP)
    f.add_argument(
        "--query", default=None, help="the similarity's query: a token (cls, reg0, ...) or ROW,COL (default: CLS)"
    )
    f.add_argument("--cmap", default="inferno", help="colormap (default inferno)")
    f.add_argument(
        "--pca-background", type=float, default=None, help="drop patches whose first PCA component is below this (0-1)"
    )
    f.add_argument(
        "--pca",
        default="minmax",
        help="PCA colours: 'minmax' (default) or 'dinov3' (DINOv3's notebook: fitted on the foreground, whitened)",
    )
    f.add_argument("--out", type=Path, default=Path("attention_out"), help="output folder (default attention_out)")
    r = sub.add_parser("relevance", help="why a classifier says a class: relevance maps beside CLS attention")
    r.add_argument("images", nargs="+", type=Path, help="image files")
    r.add_argument("--model", default="mnist_vit", help="a classifier: mnist_vit, deit_small, a timm classifier name")
    r.add_argument("--target", default=None, help="class index or name (default: the top class of each image)")
    r.add_argument("--resolution", default="auto", help="shorter side in px, 'auto' or 'native'")
    r.add_argument("--discard-ratio", type=float, default=0.9, help="grad-rollout's discard (default 0.9)")
    r.add_argument("--cmap", default="inferno", help="colormap (default inferno)")
    r.add_argument("--out", type=Path, default=Path("attention_out"), help="output folder (default attention_out)")
    e = _extract_parser(sub)
    v = _video_parser(sub)
    t = text_cli.add_parser(sub)
    for sp in (m, f, r, e, v, t):
        checkpoint_args(sp)  # --weights, --arch, --checkpoint-key, --family
    return p


def _video_parser(sub) -> argparse.ArgumentParser:
    from attention.vit.engine.video import BATCH, VIDEO_VIEWS

    v = sub.add_parser("video", help="write an attention video (H.264 MP4) of a video file")
    v.add_argument("input", type=Path, help="video file (MP4, WebM, MOV, MKV, AVI, GIF)")
    v.add_argument("--out", type=Path, default=Path("attention_video.mp4"), help="output .mp4")
    v.add_argument("--model", default=default_model(), help="alias, timm name or hf-hub:org/repo")
    v.add_argument("--resize", default="auto", help="shorter side in px, 'auto', 'native' or 'dino480' (default auto)")
    v.add_argument("--threshold", type=_threshold, default=0.6, help="share of each head's mass the masks keep")
    v.add_argument("--fps", type=float, default=None, help="output frames per second (default: the source's)")
    v.add_argument("--seconds", type=float, default=None, help="only the first SECONDS of the video")
    v.add_argument("--layer", type=int, default=-1, help="layer (default: last)")
    v.add_argument(
        "--query",
        default=None,
        help="a token (cls, dist, pool, reg0, ...) or ROW,COL of a patch (default: the model's own: CLS, "
        "else the pooling head's, else the centre patch)",
    )
    v.add_argument("--view", default="mean", choices=list(VIDEO_VIEWS), help="what is drawn (default mean)")
    v.add_argument("--head", type=int, default=0, help="the head of the 'head' and 'masks' views")
    v.add_argument("--alpha", type=_opacity, default=0.6, help="opacity of the map over the frame, 0 to 1")
    v.add_argument("--cmap", default="inferno", help="colormap (default inferno)")
    v.add_argument("--side-by-side", action="store_true", help="the frame on the left, the view on the right")
    v.add_argument("--npz", type=Path, default=None, help="also write every frame's raw maps to this .npz")
    v.add_argument("--batch-size", type=int, default=BATCH, help=f"frames per forward pass (default {BATCH})")
    v.add_argument("--max-frames", type=int, default=100_000, help="refuse videos making more frames than this")
    return v


def _extract_parser(sub) -> argparse.ArgumentParser:
    e = sub.add_parser("extract", help="attention of a whole dataset into Parquet shards (batched; torchrun splits it)")
    e.add_argument("source", help="folder or glob of images, hf:ORG/NAME (Hub dataset), imagefolder:DIR, saved dataset")
    e.add_argument("--model", default=default_model(), help="alias, timm name or hf-hub:org/repo")
    e.add_argument("--layer", type=int, default=-1, help="layer of the maps (default: last)")
    e.add_argument("--resolution", default="auto", help="shorter side in px, 'auto', 'native' or 'dino480'")
    e.add_argument(
        "--threshold", type=_threshold, default=0.6, help="share of each head's mass kept by masks (default 0.6)"
    )
    e.add_argument(
        "--query",
        default=None,
        help="whose attention: a token (cls, pool, reg0, ...) or ROW,COL (default: the model's own: CLS, else the "
        "pooling head's, else the centre patch; recorded in run.json and each row)",
    )
    e.add_argument(
        "--buckets", type=int, default=0, help="resize to the nearest of N aspect-ratio grids (fuller batches; 0: off)"
    )
    e.add_argument("--pca", action="store_true", help="also the patch features' first 3 principal components")
    e.add_argument("--batch-size", type=int, default=64, help="images per forward pass (default 64)")
    e.add_argument("--shard-size", type=int, default=1024, help="images per shard (default 1024)")
    e.add_argument(
        "--workers",
        type=int,
        default=None,
        help="DataLoader processes decoding images (default: from os.cpu_count(); on the CPU one per 8 cores, at "
        "most 8, none below 8 cores: decoding inline; on a GPU cores - 1, at most 8)",
    )
    e.add_argument("--split", default="train", help="split of a Hugging Face dataset (default train)")
    e.add_argument("--image-column", default=None, help="image column of a dataset (default: its first Image column)")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.add_argument("--out", type=Path, required=True, help="output folder (a run there is resumed)")
    return e


def _threshold(text: str) -> float:
    """--threshold, read by the one threshold validator (`validate.check_threshold`), refused by argparse."""
    from attention.validate import check_threshold

    try:
        return check_threshold(text)
    except AttentionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _opacity(text: str) -> float:
    """--alpha, read by the one opacity validator (`validate.check_opacity`)."""
    from attention.validate import check_opacity

    try:
        return check_opacity(text)
    except AttentionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _query(text: str | None):
    from attention.vit.engine.query import ACCEPTED, parse

    if text is None:
        return None
    try:
        return parse(text)
    except AttentionError:
        raise AttentionError(f"--query {text!r} is not accepted; use {ACCEPTED}.") from None


def write_maps_folder(res, out: Path, *, threshold: float, cmap: str) -> None:
    """The `maps` command's folder for one image (AttentionMaps `res`): img.png, head_XX.png, mean.png,
    mask_XX.png (the app's tiles at full size) and attention.npz (`res.arrays`, compressed)."""
    import numpy as np

    from attention.render import png_bytes
    from attention.vit.draw.views import tiles

    out.mkdir(parents=True, exist_ok=True)
    (out / "img.png").write_bytes(png_bytes(np.asarray(res.image)))
    for t in tiles(res, "heads", cmap=cmap) + tiles(res, "masks", threshold=threshold):
        (out / f"{t.name}.png").write_bytes(png_bytes(t.image))
    np.savez_compressed(out / "attention.npz", **res.arrays(threshold))


def maps(args) -> int:
    from attention.vit.engine.extract import attention_maps
    from attention.vit.models.loader import load_vit

    model = load_vit(args.model)
    query = _query(args.query)
    stems: dict[str, int] = {}

    def one(path: Path) -> str:
        res = attention_maps(model, path, layer=args.layer, query=query, resolution=args.resolution)
        n = stems[path.stem] = stems.get(path.stem, 0) + 1
        out = args.out / (path.stem if n == 1 else f"{path.stem}_{n}")
        write_maps_folder(res, out, threshold=args.threshold, cmap=args.cmap)
        return f"{res.maps.shape[0]} heads, grid {res.grid[0]}x{res.grid[1]} -> {out}/"

    return _each_image(args.images, args.out, one)


def _each_image(images: list[Path], out: Path, one) -> int:
    """`one(path)` for each image, printing the line it returns; a bad file (AttentionError) gets one
    line and the others are still done. Returns the exit status: 0, or 1 when any file was skipped."""
    from tqdm.auto import tqdm

    failed = 0
    for path in tqdm(images, desc="images", unit="img", disable=len(images) < 2):
        try:
            tqdm.write(f"{path}: {one(path)}")
        except AttentionError as e:
            failed += 1
            tqdm.write(f"{path}: skipped: {e}", file=sys.stderr)
    print(f"{len(images) - failed} of {len(images)} images written to {out}/")
    return 1 if failed else 0


def features(args) -> int:
    import numpy as np

    from attention.render import png_bytes
    from attention.vit.draw.feature_views import feature_pictures
    from attention.vit.draw.modelview import model_view
    from attention.vit.engine.features import check_pca_style
    from attention.vit.serve.passes import get_pass

    query = _query(args.query)
    check_pca_style(args.pca)

    def one(path: Path) -> str:
        p = get_pass(path, args.model, args.resolution)
        tiles, arrays = feature_pictures(
            p, query, args.layer, cmap=args.cmap, background=args.pca_background, pca_style=args.pca
        )
        out = args.out / path.stem
        out.mkdir(parents=True, exist_ok=True)
        for t in tiles:
            (out / f"{t.name}.png").write_bytes(png_bytes(t.image))
        (out / "model_view.png").write_bytes(png_bytes(model_view(p, query, cmap=args.cmap)))
        res = p.at(query, args.layer)
        np.savez(out / "features.npz", **arrays, image=np.asarray(res.image), grid=np.array(res.grid))
        return f"layer {res.layer}, grid {res.grid[0]}x{res.grid[1]} -> {out}/"

    return _each_image(args.images, args.out, one)


def relevance(args) -> int:
    import json
    import shutil

    from attention.vit.models.loader import load_vit
    from attention.vit.relevance import check_classifier, relevance
    from attention.vit.relevance.views import write_answer

    model = load_vit(args.model)
    check_classifier(model)

    def one(path: Path) -> str:
        rel = relevance(model, path, args.target, resolution=args.resolution, discard_ratio=args.discard_ratio)
        pic, npz, info = write_answer(rel, model=args.model, cmap=args.cmap)
        out = args.out / path.stem
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pic, out / "relevance.png")
        shutil.copyfile(npz, out / "relevance.npz")
        (out / "relevance.json").write_text(json.dumps(info, indent=2) + "\n")
        top = ", ".join(f"{n.split(',')[0]} {p:.1%}" for _, n, p in rel.top(3))
        return f"why {info['target']['name']!r}? top: {top} -> {out}/"

    return _each_image(args.images, args.out, one)


def extract(args) -> int:
    import torch

    from attention.dataset import extract as run
    from attention.dataset import open_source
    from attention.dataset.run import dist_env
    from attention.vit.models.loader import load_vit

    rank, _, local = dist_env()
    source = open_source(args.source, split=args.split, image_column=args.image_column)
    device = f"cuda:{local}" if torch.cuda.is_available() else "cpu"
    model = load_vit(args.model, device=device)
    summary = run(
        source,
        model,
        args.out,
        model_name=args.model,
        layer=args.layer,
        query=_query(args.query),
        resolution=args.resolution,
        threshold=args.threshold,
        buckets=args.buckets,
        pca=args.pca,
        batch_size=args.batch_size,
        shard_size=args.shard_size,
        workers=args.workers,
        progress=not args.no_progress,
    )
    if rank == 0:
        print(summary.text())
    return 0


def video(args) -> int:
    from tqdm.auto import tqdm

    from attention.vit.engine.video import attention_video, write_video
    from attention.vit.models.loader import load_vit

    bars = []  # made at the first batch, so an error up front prints no bar

    def report(frac: float, desc: str) -> None:
        if not bars:
            bars.append(tqdm(total=1.0, bar_format="{bar:30}| {desc}", file=sys.stderr))
        bars[0].n = frac
        bars[0].set_description_str(desc)

    try:
        run = attention_video(
            load_vit(args.model),
            args.input,
            layer=args.layer,
            query=_query(args.query),
            resolution=args.resize,
            threshold=args.threshold,
            fps=args.fps,
            seconds=args.seconds,
            batch_size=args.batch_size,
            max_frames=args.max_frames,
            progress=report,
        )
        facts = write_video(
            run,
            args.out,
            view=args.view,
            head=args.head,
            alpha=args.alpha,
            cmap=args.cmap,
            side_by_side=args.side_by_side,
            npz=args.npz,
        )
    finally:
        for b in bars:
            b.close()
    o = facts["output"]
    extra = f" and {args.npz}" if args.npz else ""
    print(f"{args.input}: {o['frames']} frames, {o['width']}x{o['height']} px at {o['fps']:g} fps -> {args.out}{extra}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"maps": maps, "features": features, "relevance": relevance, "extract": extract, "video": video}
    commands["text"] = lambda a: text_cli.run(a, _each_image)
    try:  # what stops a whole command (a model, a checkpoint, a source, an option): one line, exit status 2
        args.model = use_checkpoint(args.weights, args.arch, args.checkpoint_key, args.family) or args.model
        return commands[args.command](args)
    except AttentionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
