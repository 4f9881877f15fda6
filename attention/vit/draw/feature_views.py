"""Feature views drawn: PCA as colours, similarity to the query and token norms over the image.

pics = feature_pictures(p, query=(5, 7), layer=-1)   # p: a MapsSource (a served pass)
[(t.caption, t.image.shape) for t in pics]           # three Tiles: pca, similarity, norms
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from attention.npzfile import save_npz
from attention.render import colorize, grid, mark_patch, overlay, png_bytes, upsample
from attention.vit.draw.drawing import QUERY_COLOR, reduced
from attention.vit.draw.outputs import OUTPUT_ROOT, SHEET_TILE, Tile, new_dir
from attention.vit.draw.source import MapsSource
from attention.vit.draw.views import display_scale
from attention.vit.engine.features import check_pca_style, high_norm
from attention.vit.engine.query import Query
from attention.vit.engine.query import label as query_label
from attention.vit.engine.request import CMAP, OPACITY

HIGH_NORM_COLOR = (255, 48, 48)  # red outline around high-norm tokens

# One line each: what the view shows (README, the tab's captions and the API's facts).
EXPLAIN = {
    "pca": "the first three principal components of the layer's patch features as red, green and blue: "
    "patches with similar features get similar colours (DINOv2's part segmentation look; with the DINOv3 "
    "style, fitted on the foreground, whitened, background black, as DINOv3's notebook)",
    "similarity": "cosine similarity of the query's feature to every patch's: which patches the layer "
    "represents alike (1 at the query)",
    "norms": "the length of each patch token, coloured from 0 to the largest; outlined in red, tokens over "
    "twice the median: the high-norm artifact tokens that registers remove",
}


PCA_CAPTION = {"minmax": "", "dinov3": " · DINOv3 style"}  # per features.PCA_STYLES


def feature_pictures(
    p: MapsSource,
    query: Query | None = None,
    layer: int = -1,
    *,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
    background: float | None = None,
    pca_style: str = "minmax",
) -> tuple[list[Tile], dict[str, np.ndarray]]:
    """The three feature views of `layer` as pictures (uint8 (H, W, 3), enlarged like the attention
    views) and their raw float32 arrays (pca (gh, gw, 3), similarity (gh, gw), norms (gh, gw); with
    pca_style "dinov3" also foreground (gh, gw) bool). background: PCA without the background
    (`features.pca`); pca_style: a key of `features.PCA_STYLES`. No new forward. Raises InputError off
    the depth or grid, or for an unknown style."""
    style = check_pca_style(pca_style)
    res = p.at(query, layer)
    maps = p.feature_maps(res.query, res.layer, background, style)
    s = display_scale(res)
    img = upsample(np.asarray(res.image.convert("RGB")), s) if s > 1 else np.asarray(res.image.convert("RGB"))
    patch = res.patch_size * s
    pca = upsample((maps["pca"] * 255).round().astype(np.uint8), patch)
    sim = overlay(img, maps["similarity"], alpha=alpha, cmap=cmap)
    if isinstance(res.query, tuple):
        sim = mark_patch(sim, res.query, patch, color=QUERY_COLOR)
    n = maps["norms"]  # coloured from 0 to the largest norm (not min-max: near-equal norms look alike)
    colour = upsample(colorize(n / max(float(n.max()), 1e-12), cmap, normalized=True), patch)
    nrm = (img * (1 - alpha) + colour * alpha).round().astype(np.uint8)
    outliers = np.argwhere(high_norm(maps["norms"]))
    for r, c in outliers:
        nrm = mark_patch(nrm, (int(r), int(c)), patch, color=HIGH_NORM_COLOR)
    who = query_label(res.query)
    tiles = [
        Tile(pca, f"PCA of layer {res.layer}'s patch features{PCA_CAPTION[style]}", "pca"),
        Tile(sim, f"similarity to {who}, layer {res.layer}", "similarity"),
        Tile(nrm, f"token norms, layer {res.layer} · {len(outliers)} high-norm", "norms"),
    ]
    return tiles, maps


def write_feature_outputs(
    p: MapsSource,
    query: Query | None = None,
    layer: int = -1,
    *,
    background: float | None = None,
    root: str | os.PathLike | None = None,
    pca_style: str = "minmax",
) -> tuple[str, str, dict]:
    """The /feature_maps answer: one PNG sheet of the three pictures, one .npz with exactly the
    arrays pca (gh, gw, 3), similarity (gh, gw), norms (gh, gw) (float32), image (H, W, 3) uint8 and
    grid (2,) (with pca_style "dinov3" also foreground (gh, gw) bool), and the facts as JSON-ready
    data. Returns (sheet path, npz path, facts)."""
    t0 = time.perf_counter()
    tiles, maps = feature_pictures(p, query, layer, background=background, pca_style=pca_style)
    res = p.at(query, layer)
    d = new_dir(Path(root) if root else OUTPUT_ROOT)
    sheet_path = d / "features.png"
    sheet_path.write_bytes(
        png_bytes(grid([reduced(t.image, SHEET_TILE) for t in tiles], ncols=3, labels=[t.caption for t in tiles]))
    )
    npz_path = save_features(d / "features.npz", p.model, res, maps)
    n = maps["norms"]
    facts = {
        "model": p.model,
        "device": p.device,
        "grid": list(res.grid),
        "layer": res.layer,
        "query": res.query if isinstance(res.query, str) else list(res.query),
        "high_norm_patches": [[int(r), int(c)] for r, c in np.argwhere(high_norm(n))],
        "norm_median": round(float(np.median(n)), 4),
        "norm_max": round(float(n.max()), 4),
        "pca_style": check_pca_style(pca_style),
        "captions": [t.caption for t in tiles],
        "explain": EXPLAIN,
        "forward_ms": round(res.seconds * 1000, 1),
        "render_ms": round((time.perf_counter() - t0) * 1000, 1),
    }
    return str(sheet_path), npz_path, facts


FEATURE_AXES = {
    "pca": "rows, cols, rgb",
    "similarity": "rows, cols",
    "norms": "rows, cols",
    "foreground": "rows, cols",
    "image": "height, width, rgb",
    "grid": "rows, cols",
}
FEATURE_UNITS = {
    "pca": "first three principal components scaled to 0..1",
    "similarity": "cosine similarity to the query's feature",
    "norms": "L2 norm of each patch token",
    "foreground": "True on the foreground (DINOv3 style)",
    "image": "uint8 RGB, the pixels the model saw",
}


def save_features(path: str | os.PathLike, model: str, res, maps: dict[str, np.ndarray]) -> str:
    """The features' .npz at `path` (`attention.npzfile` layout, kind "features"): `maps` (`feature_pictures`'
    arrays), image (H, W, 3) uint8 and grid (2,) of `res` (the pass's AttentionMaps at the layer and query)."""
    arrays = {**maps, "image": np.asarray(res.image.convert("RGB")), "grid": np.array(res.grid)}
    q = res.query if isinstance(res.query, str) else list(res.query)
    meta = {"kind": "features", "model": model, "layer": res.layer, "query": q, "grid": list(res.grid)}
    return save_npz(path, arrays, meta={**meta, "axes": FEATURE_AXES, "units": FEATURE_UNITS})
