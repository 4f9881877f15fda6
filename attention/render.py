"""Maps to pixels: colormaps, nearest upsampling, overlays, masks, marks and grids.

Everything returns uint8 arrays (H, W, 3) ready for PNG; no matplotlib figure is made
(only its colormap tables are read, once per name).

    over = overlay(res.image, res.maps[0], alpha=0.6, cmap="inferno")  # (H, W, 3) uint8
    sheet = grid([overlay(res.image, m) for m in res.maps], labels=[f"head {h}" for h in ...])
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from attention.errors import InputError

COLORMAPS = ("inferno", "viridis", "magma", "plasma", "turbo", "jet", "gray", "hot")


@lru_cache(maxsize=32)
def colormap(name: str = "inferno") -> np.ndarray:
    """uint8 (256, 3) lookup table of a matplotlib colormap. Raises InputError for unknown names."""
    import matplotlib

    try:
        cmap = matplotlib.colormaps[name]
    except KeyError:
        raise InputError(f"Unknown colormap {name!r}; accepted: {', '.join(COLORMAPS)} or any matplotlib colormap name.") from None
    return (cmap(np.linspace(0, 1, 256))[:, :3] * 255).round().astype(np.uint8)


def normalize(a: np.ndarray) -> np.ndarray:
    """float32 in [0, 1]: (a - min) / (max - min); all zeros when a is constant."""
    a = np.asarray(a, dtype=np.float32)
    lo, hi = float(a.min()), float(a.max())
    return (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)


def colorize(a: np.ndarray, cmap: str = "inferno", normalized: bool = False) -> np.ndarray:
    """(h, w) values -> uint8 (h, w, 3) colours; min-max normalised unless `normalized`."""
    v = np.clip(a, 0, 1) if normalized else normalize(a)
    return colormap(cmap)[(v * 255).round().astype(np.intp)]


def upsample(a: np.ndarray, factor: int) -> np.ndarray:
    """(gh, gw) -> (gh * factor, gw * factor), nearest: each patch value fills its patch."""
    return np.repeat(np.repeat(a, factor, 0), factor, 1)


def _rgb(image) -> np.ndarray:
    return np.asarray(image.convert("RGB") if isinstance(image, Image.Image) else image, dtype=np.uint8)


def overlay(image, amap: np.ndarray, *, alpha: float = 0.6, cmap: str = "inferno") -> np.ndarray:
    """Colour map `amap` (gh, gw) laid over `image` (PIL or uint8 (H, W, 3), H = gh*p, W = gw*p).

    alpha: opacity of the map, 0 (image only) to 1 (map only). Returns uint8 (H, W, 3).
    """
    if not 0 <= alpha <= 1:
        raise InputError(f"Opacity {alpha} is out of range; accepted: 0 to 1.")
    img = _rgb(image)
    p = img.shape[0] // amap.shape[0]
    if p * amap.shape[0] != img.shape[0] or p * amap.shape[1] != img.shape[1]:
        raise InputError(f"Map {amap.shape} does not tile image {img.shape[:2]}; the image must be the map's grid times the patch size.")
    col = upsample(colorize(amap, cmap), p).astype(np.float32)
    return (img.astype(np.float32) * (1 - alpha) + col * alpha).round().astype(np.uint8)


def mask_overlay(image, mask: np.ndarray, *, color=(255, 64, 64), alpha: float = 0.5) -> np.ndarray:
    """Tint the patches where `mask` (gh, gw) bool is True, darken the rest. uint8 (H, W, 3)."""
    img = _rgb(image).astype(np.float32)
    p = img.shape[0] // mask.shape[0]
    m = upsample(mask, p)[..., None]
    tinted = img * (1 - alpha) + np.asarray(color, np.float32) * alpha
    return np.where(m, tinted, img * 0.35).round().astype(np.uint8)


def mark_patch(image, patch: tuple[int, int], patch_size: int, color=(0, 255, 255)) -> np.ndarray:
    """Draw a rectangle around patch (row, col) of an image. uint8 (H, W, 3)."""
    pil = Image.fromarray(_rgb(image).copy())
    r, c = patch
    w = max(1, patch_size // 8)
    ImageDraw.Draw(pil).rectangle(
        [c * patch_size, r * patch_size, (c + 1) * patch_size - 1, (r + 1) * patch_size - 1], outline=color, width=w
    )
    return np.asarray(pil)


def grid(tiles: list[np.ndarray], *, ncols: int | None = None, pad: int = 4, labels: list[str] | None = None,
         bg: int = 255) -> np.ndarray:
    """Tile equal-sized uint8 (h, w, 3) images in rows of `ncols` with `pad` px between,
    each optionally captioned below. Returns uint8 (H, W, 3)."""
    if not tiles:
        raise InputError("Nothing to tile: the list of images is empty.")
    h, w = tiles[0].shape[:2]
    n = len(tiles)
    ncols = ncols or int(np.ceil(np.sqrt(n)))
    nrows = -(-n // ncols)
    cap = 14 if labels else 0
    out = np.full((nrows * (h + cap + pad) + pad, ncols * (w + pad) + pad, 3), bg, np.uint8)
    for i, t in enumerate(tiles):
        y, x = pad + (i // ncols) * (h + cap + pad), pad + (i % ncols) * (w + pad)
        out[y:y + h, x:x + w] = t
    if labels:
        pil = Image.fromarray(out)
        draw = ImageDraw.Draw(pil)
        for i, text in enumerate(labels):
            y, x = pad + (i // ncols) * (h + cap + pad) + h + 1, pad + (i % ncols) * (w + pad)
            draw.text((x + 2, y), text, fill=(0, 0, 0))
        out = np.asarray(pil)
    return out
