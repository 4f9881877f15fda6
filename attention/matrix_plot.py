"""Small matrices and attention maps as RGB images, drawn with numpy (fast, no figures).

Masked entries (-inf) are hatched grey, so they can never be mistaken for a low value.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HATCH = np.array([200, 200, 200], dtype=np.uint8), np.array([120, 120, 120], dtype=np.uint8)


@lru_cache(maxsize=8)
def lut(name: str = "viridis") -> np.ndarray:
    """uint8 (256, 3): matplotlib's colormap `name` sampled at 256 levels."""
    import matplotlib

    return (matplotlib.colormaps[name](np.linspace(0.0, 1.0, 256))[:, :3] * 255).round().astype(np.uint8)


def colorize(a: np.ndarray, vmin: float | None = None, vmax: float | None = None, cmap: str = "viridis") -> np.ndarray:
    """float (r, c) -> uint8 (r, c, 3); the range is the finite values' min..max unless given; -inf is hatched later."""
    finite = np.isfinite(a)
    lo = float(np.min(a[finite])) if vmin is None and finite.any() else (vmin or 0.0)
    hi = float(np.max(a[finite])) if vmax is None and finite.any() else (vmax if vmax is not None else 1.0)
    t = (np.where(finite, a, lo) - lo) / (hi - lo) if hi > lo else np.full(a.shape, 0.5)
    return lut(cmap)[np.clip((t * 255).round(), 0, 255).astype(np.int64)]


def heatmap(a: np.ndarray, *, vmin: float | None = None, vmax: float | None = None, cmap: str = "viridis",
            target: int = 220, max_cell: int = 48) -> np.ndarray:
    """A matrix (r, c) as uint8 RGB, each entry a square cell (about `target` px on the long side).

    -inf cells are hatched grey; cells of 8 px or more get a thin white grid.
    """
    a = np.asarray(a, dtype=np.float64)
    cell = int(max(1, min(max_cell, target // max(a.shape))))
    rgb = np.repeat(np.repeat(colorize(a, vmin, vmax, cmap), cell, 0), cell, 1)
    if np.isneginf(a).any():
        yy, xx = np.mgrid[: rgb.shape[0], : rgb.shape[1]]
        stripes = ((xx + yy) // max(2, cell // 6)) % 2 == 0
        neg = np.repeat(np.repeat(np.isneginf(a), cell, 0), cell, 1)
        rgb[neg & stripes], rgb[neg & ~stripes] = HATCH
    if cell >= 8:
        rgb[::cell, :] = 255
        rgb[:, ::cell] = 255
    return rgb


def _font(size: int = 14) -> ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType
        return ImageFont.load_default()


def panels(images: list[np.ndarray], titles: list[str], pad: int = 10, title_height: int = 22) -> np.ndarray:
    """Images side by side on white, each with a title above: uint8 (H, W, 3)."""
    h = max(im.shape[0] for im in images) + title_height + pad
    w = sum(im.shape[1] for im in images) + pad * (len(images) + 1)
    canvas = Image.new("RGB", (w, h), "white")
    draw, x = ImageDraw.Draw(canvas), pad
    for im, title in zip(images, titles):
        draw.text((x, 3), title, fill=(30, 30, 30), font=_font())
        canvas.paste(Image.fromarray(im), (x, title_height))
        x += im.shape[1] + pad
    return np.asarray(canvas)


def heatmaps(stack: np.ndarray, title: str = "head", **kw) -> np.ndarray:
    """(heads, r, c) -> one image with a heatmap per head, titled 'head 1', 'head 2', ..."""
    return panels([heatmap(a, **kw) for a in stack], [f"{title} {i + 1}" for i in range(len(stack))])


def grid_lines(image: np.ndarray, patch: int, highlight: int | None = None) -> np.ndarray:
    """RGB image with the patch grid drawn in white and patch `highlight` (raster index) outlined in red."""
    out = image.copy()
    out[::patch, :] = 255
    out[:, ::patch] = 255
    if highlight is not None:
        cols = image.shape[1] // patch
        r, c = divmod(highlight, cols)
        y0, x0, y1, x1 = r * patch, c * patch, (r + 1) * patch - 1, (c + 1) * patch - 1
        for t in range(2):
            out[y0 + t, x0:x1 + 1] = out[y1 - t, x0:x1 + 1] = (230, 20, 20)
            out[y0:y1 + 1, x0 + t] = out[y0:y1 + 1, x1 - t] = (230, 20, 20)
    return out


def overlay(image: np.ndarray, amap: np.ndarray, alpha: float = 0.6, cmap: str = "inferno") -> np.ndarray:
    """Blend a (rows, cols) map, stretched to its min..max, over RGB `image` (rows*p, cols*p, 3)."""
    p = image.shape[0] // amap.shape[0]
    heat = np.repeat(np.repeat(colorize(amap, cmap=cmap), p, 0), p, 1).astype(np.float64)
    return (alpha * heat + (1 - alpha) * image.astype(np.float64)).round().astype(np.uint8)
