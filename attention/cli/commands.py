"""What each subcommand of `python -m attention` does with its parsed options (`cli.parser`): write maps,
features, relevance, a dataset's shards or a video. Each returns the exit status."""

from __future__ import annotations

import sys
from pathlib import Path

from attention.errors import AttentionError
from attention.vit.score import cli as score_cli
from attention.vit.text import cli as text_cli


def query_arg(text: str | None):
    """--query read by the one query parser (`vit.query.parse`); None (the model's own) when not given."""
    from attention.vit.engine.query import ACCEPTED, parse

    if text is None:
        return None
    try:
        return parse(text)
    except AttentionError:
        raise AttentionError(f"--query {text!r} is not accepted; use {ACCEPTED}.") from None


def write_maps_folder(res, out: Path, *, model: str, threshold: float, cmap: str) -> None:
    """The `maps` command's folder for one image (AttentionMaps `res`): img.png, head_XX.png, mean.png,
    mask_XX.png (the app's tiles at full size) and attention.npz (`res.arrays`, compressed, with the common
    `meta` of `outputs.maps_meta`); `threshold` and `cmap` checked by the caller (`maps`, once at the edge)."""
    import numpy as np

    from attention.npzfile import save_npz
    from attention.render import png_bytes
    from attention.vit.draw.outputs import maps_meta
    from attention.vit.draw.views import drawn_tiles

    out.mkdir(parents=True, exist_ok=True)
    (out / "img.png").write_bytes(png_bytes(np.asarray(res.image)))
    for t in drawn_tiles(res, "heads", cmap=cmap) + drawn_tiles(res, "masks", threshold=threshold):
        (out / f"{t.name}.png").write_bytes(png_bytes(t.image))
    meta = maps_meta(res, model=model, view=None)
    save_npz(out / "attention.npz", res.arrays(threshold), meta=meta, compress=True)


def maps(args) -> int:
    from attention.render import colormap
    from attention.vit.engine.extract import attention_maps
    from attention.vit.models.loader import load_vit

    model = load_vit(args.model)
    query = query_arg(args.query)
    colormap(args.cmap)  # read once, here (--threshold by the parser), not per image: what draws trusts them
    stems: dict[str, int] = {}

    def one(path: Path) -> str:
        res = attention_maps(model, path, layer=args.layer, query=query, resolution=args.resolution)
        n = stems[path.stem] = stems.get(path.stem, 0) + 1
        out = args.out / (path.stem if n == 1 else f"{path.stem}_{n}")
        write_maps_folder(res, out, model=args.model, threshold=args.threshold, cmap=args.cmap)
        return f"{res.maps.shape[0]} heads, grid {res.grid[0]}x{res.grid[1]} -> {out}/"

    return each_image(args.images, args.out, one)


def each_image(images: list[Path], out: Path, one) -> int:
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

    from attention.render import png_bytes
    from attention.vit.draw.feature_views import feature_pictures, save_features
    from attention.vit.draw.modelview import model_view
    from attention.vit.engine.features import check_pca_style
    from attention.vit.serve.passes import get_pass

    query = query_arg(args.query)
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
        save_features(out / "features.npz", p.model, res, arrays)
        return f"layer {res.layer}, grid {res.grid[0]}x{res.grid[1]} -> {out}/"

    return each_image(args.images, args.out, one)


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

    return each_image(args.images, args.out, one)


def _pick(args, *names: str) -> dict:
    """The options `names` of `args`, as keyword arguments of the same names."""
    return {n: getattr(args, n) for n in names}


def _map_options(args, resolution: str) -> dict:
    """What the maps of `extract` and `video` are of: layer, query (parsed), resolution, threshold."""
    return {"layer": args.layer, "query": query_arg(args.query), "resolution": resolution, "threshold": args.threshold}


def extract(args) -> int:
    import torch

    from attention.dataset import extract as run
    from attention.dataset import open_source
    from attention.dataset.dist import dist_env
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
        **_map_options(args, args.resolution),
        **_pick(args, "buckets", "pca", "batch_size", "shard_size", "workers"),
        progress=not args.no_progress,
    )
    if rank == 0:
        print(summary.text())
    return 0


def video(args) -> int:
    from functools import partial

    from tqdm.auto import tqdm

    from attention.vit.engine.video import attention_video, write_video
    from attention.vit.models.loader import load_vit

    run = attention_video(
        load_vit(args.model),
        args.input,
        **_map_options(args, args.resize),
        fps=args.fps,
        seconds=args.seconds,
        batch_size=args.batch_size,
        max_frames=args.max_frames,
        bar=partial(tqdm, file=sys.stderr),  # the engine's bar, one tick per frame
    )
    options = _pick(args, "view", "head", "alpha", "cmap", "side_by_side", "npz")
    facts = write_video(run, args.out, **options, model_name=args.model)
    o = facts["output"]
    extra = f" and {args.npz}" if args.npz else ""
    print(f"{args.input}: {o['frames']} frames, {o['width']}x{o['height']} px at {o['fps']:g} fps -> {args.out}{extra}")
    return 0


COMMANDS = {
    "maps": maps,
    "features": features,
    "relevance": relevance,
    "extract": extract,
    "video": video,
    "text": lambda args: text_cli.run(args, each_image),
    "evaluate": score_cli.run,
}
