"""The options of `python -m attention`: one parser with a subcommand each for maps, features, relevance,
extract, video, text and evaluate. Options shared by several subcommands are declared once (`OPTIONS`); each
subcommand gives them its own help."""

from __future__ import annotations

import argparse
from pathlib import Path

from attention.errors import AttentionError
from attention.validate import Bound
from attention.vit.engine import request
from attention.vit.models.own_checkpoint import checkpoint_args
from attention.vit.models.registry import default_model
from attention.vit.score import cli as score_cli
from attention.vit.text import cli as text_cli

RESOLUTION_HELP = "shorter side in px (DINOv3: the height), 'auto', 'native' or 'dino480'"
MODEL_HELP = "alias, timm name or hf-hub:org/repo"
TOKEN_QUERY = "a token (cls, dist, pool, reg0, ...) or ROW,COL of a patch"
THRESHOLD_HELP = f"{request.THRESHOLD.meaning}: {request.THRESHOLD.accepted} (default {request.THRESHOLD.default:g})"
CMAP_HELP = f"colormap (default {request.CMAP.default})"


def checked(bound: Bound):
    """An argparse type reading a number by `bound`'s check (`request`): its message when refused."""

    def read(text: str) -> float:
        try:
            return bound.check(text)
        except AttentionError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    read.__name__ = bound.name.lower().replace(" ", "_")
    return read


# what an option is, wherever it appears (its help is the subcommand's); defaults and bounds: `request`'s
OPTIONS: dict[str, dict] = {
    "--model": {},
    "--layer": {"type": int, "default": request.LAYER},
    "--resolution": {"default": request.RESOLUTION},
    "--query": {"default": None},
    "--threshold": {"type": checked(request.THRESHOLD), "default": request.THRESHOLD.default},
    "--cmap": {"default": request.CMAP.default},
    "--out": {"type": Path, "default": Path("attention_out")},
}


def _add(p: argparse.ArgumentParser, flag: str, help: str, **kw) -> None:
    """Option `flag` of `OPTIONS` on `p`, with `help` (and `kw` over the shared declaration)."""
    spec = {"default": default_model()} if flag == "--model" else {}
    p.add_argument(flag, **{**spec, **OPTIONS[flag], **kw}, help=help)


def _images(p: argparse.ArgumentParser) -> None:
    p.add_argument("images", nargs="+", type=Path, help="image files")


def build_parser(description: str) -> argparse.ArgumentParser:
    """The parser of every subcommand, each with the checkpoint options (--weights, --arch, ...)."""
    p = argparse.ArgumentParser(prog="python -m attention", description=description)
    sub = p.add_subparsers(dest="command", required=True)
    parsers = [_maps_parser(sub), _features_parser(sub), _relevance_parser(sub)]
    parsers += [_extract_parser(sub), _video_parser(sub), text_cli.add_parser(sub), score_cli.add_parser(sub)]
    for sp in parsers:
        checkpoint_args(sp)  # --weights, --arch, --checkpoint-key, --family
    return p


def _maps_parser(sub) -> argparse.ArgumentParser:
    m = sub.add_parser("maps", help="write attention maps of images (PNG overlays + .npz)")
    _images(m)
    _add(m, "--model", "alias (dino_vits16, mnist_vit, ...), timm name or hf-hub:org/repo")
    _add(m, "--layer", "layer (default: last)")
    _add(m, "--resolution", RESOLUTION_HELP)
    _add(m, "--query", f"{TOKEN_QUERY} (default: CLS, else the pooling head's, else the centre patch)")
    _add(m, "--threshold", THRESHOLD_HELP)
    _add(m, "--cmap", f"matplotlib {CMAP_HELP}")
    _add(m, "--out", "output folder (default attention_out)")
    return m


def _features_parser(sub) -> argparse.ArgumentParser:
    f = sub.add_parser("features", help="write feature views (PCA, similarity, norms) and the model view of images")
    _images(f)
    _add(f, "--model", MODEL_HELP)
    _add(f, "--layer", "layer whose output tokens (default: last, after the norm)")
    _add(f, "--resolution", RESOLUTION_HELP)
    _add(f, "--query", "the similarity's query: a token (cls, reg0, ...) or ROW,COL (default: CLS)")
    _add(f, "--cmap", CMAP_HELP)
    f.add_argument(
        "--pca-background", type=float, default=None, help="drop patches whose first PCA component is below this (0-1)"
    )
    f.add_argument(
        "--pca",
        default="minmax",
        help="PCA colours: 'minmax' (default) or 'dinov3' (DINOv3's notebook: fitted on the foreground, whitened)",
    )
    _add(f, "--out", "output folder (default attention_out)")
    return f


def _relevance_parser(sub) -> argparse.ArgumentParser:
    r = sub.add_parser("relevance", help="why a classifier says a class: relevance maps beside CLS attention")
    _images(r)
    _add(r, "--model", "a classifier: mnist_vit, deit_small, a timm classifier name", default="mnist_vit")
    r.add_argument("--target", default=None, help="class index or name (default: the top class of each image)")
    _add(r, "--resolution", "shorter side in px, 'auto' or 'native'")
    g = request.GRAD_DISCARD
    r.add_argument(
        "--discard-ratio", type=checked(g), default=g.default, help=f"grad-rollout's discard (default {g.default:g})"
    )
    _add(r, "--cmap", CMAP_HELP)
    _add(r, "--out", "output folder (default attention_out)")
    return r


def _video_parser(sub) -> argparse.ArgumentParser:
    from attention.vit.engine.video import BATCH, VIDEO_VIEWS

    v = sub.add_parser("video", help="write an attention video (H.264 MP4) of a video file")
    v.add_argument("input", type=Path, help="video file (MP4, WebM, MOV, MKV, AVI, GIF)")
    _add(v, "--out", "output .mp4", default=Path("attention_video.mp4"))
    _add(v, "--model", MODEL_HELP)
    v.add_argument("--resize", default=request.RESOLUTION, help=f"{RESOLUTION_HELP} (default {request.RESOLUTION})")
    _add(v, "--threshold", "share of each head's mass the masks keep")
    v.add_argument("--fps", type=float, default=None, help="output frames per second (default: the source's)")
    v.add_argument("--seconds", type=float, default=None, help="only the first SECONDS of the video")
    _add(v, "--layer", "layer (default: last)")
    _add(v, "--query", f"{TOKEN_QUERY} (default: the model's own: CLS, else the pooling head's, else the centre patch)")
    v.add_argument("--view", default="mean", choices=list(VIDEO_VIEWS), help="what is drawn (default mean)")
    v.add_argument("--head", type=int, default=request.HEAD, help="the head of the 'head' and 'masks' views")
    o = request.OPACITY
    v.add_argument(
        "--alpha", type=checked(o), default=o.default, help=f"opacity of the map over the frame, {o.accepted}"
    )
    _add(v, "--cmap", CMAP_HELP)
    v.add_argument("--side-by-side", action="store_true", help="the frame on the left, the view on the right")
    v.add_argument("--npz", type=Path, default=None, help="also write every frame's raw maps to this .npz")
    v.add_argument("--batch-size", type=int, default=BATCH, help=f"frames per forward pass (default {BATCH})")
    v.add_argument("--max-frames", type=int, default=100_000, help="refuse videos making more frames than this")
    return v


def _extract_parser(sub) -> argparse.ArgumentParser:
    e = sub.add_parser("extract", help="attention of a whole dataset into Parquet shards (batched; torchrun splits it)")
    e.add_argument("source", help="folder or glob of images, hf:ORG/NAME (Hub dataset), imagefolder:DIR, saved dataset")
    _add(e, "--model", MODEL_HELP)
    _add(e, "--layer", "layer of the maps (default: last)")
    _add(e, "--resolution", "shorter side in px, 'auto', 'native' or 'dino480'")
    _add(e, "--threshold", THRESHOLD_HELP)
    _add(
        e,
        "--query",
        "whose attention: a token (cls, pool, reg0, ...) or ROW,COL (default: the model's own: CLS, else the "
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
