"""Small matrices as heatmaps, and the patch grid, as RGB arrays (numpy, no figures).

Builds on `attention.render` (colormaps, upsampling, overlays, tiling). Masked entries
(-inf) are hatched grey, so they can never be mistaken for a low value. Tiles are captioned
(`captioned`) in a font scaled with the picture, so a caption stays LABEL_PX px tall when
the picture is shrunk to fit a phone (SHOWN_WIDTH px wide).
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from attention.render import colorize, font, grid, upsample

HATCH = np.array([200, 200, 200], dtype=np.uint8), np.array([120, 120, 120], dtype=np.uint8)
LABEL_PX = 14  # a caption's font size (CSS px) once the picture is shown SHOWN_WIDTH px wide
SHOWN_WIDTH = 320  # the narrowest a picture of tiles is shown: a phone's column


def heatmap(
    a: np.ndarray,
    *,
    vmin: float | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
    target: int = 220,
    max_cell: int = 48,
) -> np.ndarray:
    """A matrix (r, c) as uint8 RGB, each entry a square cell (about `target` px on the long side).

    Colours run from vmin to vmax (default: the finite entries' min and max); +inf cells (beyond
    float64) are the bright end, -inf cells are hatched grey; cells of 8 px or more get a thin white grid.
    """
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    lo = vmin if vmin is not None else (float(a[finite].min()) if finite.any() else 0.0)
    hi = vmax if vmax is not None else (float(a[finite].max()) if finite.any() else 1.0)
    t = (np.where(finite, a, lo) - lo) / (hi - lo) if hi > lo else np.full(a.shape, 0.5)
    t = np.where(np.isposinf(a), 1.0, t)  # beyond float64 (named in the notes): the bright end
    cell = int(max(1, min(max_cell, target // max(a.shape))))
    rgb = upsample(colorize(t, cmap, normalized=True), cell)
    if np.isneginf(a).any():
        yy, xx = np.mgrid[: rgb.shape[0], : rgb.shape[1]]
        stripes = ((xx + yy) // max(2, cell // 6)) % 2 == 0
        neg = upsample(np.isneginf(a), cell)
        rgb[neg & stripes], rgb[neg & ~stripes] = HATCH
    return grid_lines(rgb, cell) if cell >= 8 else rgb


def heatmaps(stack: np.ndarray, title: str = "head", ncols: int | None = None, **kw) -> np.ndarray:
    """(heads, r, c) -> one image: a heatmap per head in a row, captioned 'head 0', 'head 1', ... (from 0)"""
    return captioned([heatmap(a, **kw) for a in stack], [f"{title} {i}" for i in range(len(stack))], ncols=ncols, pad=8)


def caption_px(width: int) -> int:
    """Font size (px) of captions in a picture `width` px wide: LABEL_PX once it is shown SHOWN_WIDTH
    px wide (at least LABEL_PX)."""
    return max(LABEL_PX, math.ceil(LABEL_PX * width / SHOWN_WIDTH))


def captioned(tiles: list[np.ndarray], labels: list[str], *, ncols: int | None = None, pad: int = 4) -> np.ndarray:
    """Equal-sized uint8 tiles (h, w, 3) in rows of `ncols` (default: all in one row), each with its
    label below in black on white, `caption_px` of the whole picture's width. Returns uint8 (H, W, 3)."""
    h, w = tiles[0].shape[:2]
    ncols = ncols or len(tiles)
    size = caption_px(ncols * (w + pad) + pad)
    face, cap = font(size), round(size * 1.4)
    out = []
    for tile, text in zip(tiles, labels):
        strip = Image.new("RGB", (w, cap), "white")
        ImageDraw.Draw(strip).text((2, (cap - size) // 2), text, fill=(0, 0, 0), font=face)
        out.append(np.vstack([tile, np.asarray(strip)]))
    return grid(out, ncols=ncols, pad=pad)


def grid_lines(image: np.ndarray, patch: int) -> np.ndarray:
    """RGB image (H, W, 3) with the patch grid drawn in white, one line every `patch` pixels."""
    out = image.copy()
    out[::patch, :] = 255
    out[:, ::patch] = 255
    return out
