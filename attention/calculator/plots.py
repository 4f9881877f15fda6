"""Small matrices as heatmaps, and the patch grid, as RGB arrays (numpy, no figures).

Builds on `attention.render` (colormaps, upsampling, overlays, tiling). Masked entries
(-inf) are hatched grey, so they can never be mistaken for a low value.
"""

from __future__ import annotations

import numpy as np

from attention.render import colorize, grid, upsample

HATCH = np.array([200, 200, 200], dtype=np.uint8), np.array([120, 120, 120], dtype=np.uint8)


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

    Colours run from vmin to vmax (default: the finite entries' min and max); -inf cells
    are hatched grey; cells of 8 px or more get a thin white grid.
    """
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    lo = vmin if vmin is not None else (float(a[finite].min()) if finite.any() else 0.0)
    hi = vmax if vmax is not None else (float(a[finite].max()) if finite.any() else 1.0)
    t = (np.where(finite, a, lo) - lo) / (hi - lo) if hi > lo else np.full(a.shape, 0.5)
    cell = int(max(1, min(max_cell, target // max(a.shape))))
    rgb = upsample(colorize(t, cmap, normalized=True), cell)
    if np.isneginf(a).any():
        yy, xx = np.mgrid[: rgb.shape[0], : rgb.shape[1]]
        stripes = ((xx + yy) // max(2, cell // 6)) % 2 == 0
        neg = upsample(np.isneginf(a), cell)
        rgb[neg & stripes], rgb[neg & ~stripes] = HATCH
    return grid_lines(rgb, cell) if cell >= 8 else rgb


def heatmaps(stack: np.ndarray, title: str = "head", ncols: int | None = None, **kw) -> np.ndarray:
    """(heads, r, c) -> one image: a heatmap per head in a row, captioned 'head 1', 'head 2', ..."""
    return grid(
        [heatmap(a, **kw) for a in stack],
        ncols=ncols or len(stack),
        pad=8,
        labels=[f"{title} {i + 1}" for i in range(len(stack))],
    )


def grid_lines(image: np.ndarray, patch: int) -> np.ndarray:
    """RGB image (H, W, 3) with the patch grid drawn in white, one line every `patch` pixels."""
    out = image.copy()
    out[::patch, :] = 255
    out[:, ::patch] = 255
    return out
