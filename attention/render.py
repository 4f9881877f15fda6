"""Maps to pixels: colormaps, nearest upsampling, overlays, masks, marks, grids, and PNG bytes.

Everything returns uint8 arrays (H, W, 3) ready for PNG; no matplotlib figure is made
(only its colormap tables are read, once per name).

    over = overlay(res.image, res.maps[0], alpha=0.6, cmap="inferno")  # (H, W, 3) uint8
    sheet = grid([overlay(res.image, m) for m in res.maps], labels=[f"head {h}" for h in ...])
"""

from __future__ import annotations

import io
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from attention.errors import InputError
from attention.validate import OPACITY

DEFAULT_CMAP = "inferno"  # the colormap when none is named (`attention.vit.engine.request.CMAP` reads it)
COLORMAPS = (DEFAULT_CMAP, "viridis", "magma", "plasma", "turbo", "jet", "gray", "hot")
# one colour per head (matplotlib's tab10, then tab20's light half): masks of many heads over one image
HEAD_COLORS = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
    (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207), (174, 199, 232), (255, 187, 120),
    (152, 223, 138), (255, 152, 150), (197, 176, 213), (196, 156, 148),
)  # fmt: skip


@lru_cache(maxsize=32)
def colormap(name: str = DEFAULT_CMAP) -> np.ndarray:
    """uint8 (256, 3) lookup table of a matplotlib colormap. Raises InputError for unknown names."""
    import matplotlib

    try:
        cmap = matplotlib.colormaps[name]
    except KeyError:
        raise InputError(
            f"Unknown colormap {name!r}; accepted: {', '.join(COLORMAPS)} or any matplotlib colormap name."
        ) from None
    return (cmap(np.linspace(0, 1, 256))[:, :3] * 255).round().astype(np.uint8)


def normalize(a: np.ndarray) -> np.ndarray:
    """float32 in [0, 1]: (a - min) / (max - min); all zeros when a is constant."""
    a = np.asarray(a, dtype=np.float32)
    lo, hi = float(a.min()), float(a.max())
    return (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)


def color_indices(a: np.ndarray, normalized: bool = False) -> np.ndarray:
    """(h, w) values -> uint8 (h, w): the row of the colormap each value gets (0..255); min-max
    normalised unless `normalized` (then clipped to [0, 1])."""
    v = np.clip(a, 0, 1) if normalized else normalize(a)
    return (v * 255).round().astype(np.uint8)


def colorize(a: np.ndarray, cmap: str = DEFAULT_CMAP, normalized: bool = False) -> np.ndarray:
    """(h, w) values -> uint8 (h, w, 3) colours; min-max normalised unless `normalized`."""
    return colormap(cmap)[color_indices(a, normalized)]


MIN_SIDE = 224  # px: a smaller picture (MNIST's 28, a digit clip) is shown enlarged by a whole factor


def enlargement(size: tuple[int, int], at_least: int = MIN_SIDE) -> int:
    """The whole factor that brings the shorter side of `size` (w, h) to `at_least` px or more (1 if it is)."""
    return max(1, -(-at_least // max(1, min(size))))


def enlarged(image, at_least: int = MIN_SIDE) -> np.ndarray:
    """`image` (PIL, or uint8 (H, W[, C])) as uint8 (H * k, W * k[, C]), k = `enlargement` (nearest: crisp pixels)."""
    a = np.asarray(image)
    k = enlargement((a.shape[1], a.shape[0]), at_least)
    return upsample(a, k) if k > 1 else a


def upsample(a: np.ndarray, factor: int) -> np.ndarray:
    """(gh, gw) or (gh, gw, C) -> (gh * factor, gw * factor[, C]), nearest: each value fills its patch.

    uint8 grey, RGB and RGBA go through PIL's resize(NEAREST): bit-identical to np.repeat and about
    2x faster (bench/bench_handwritten.py); other dtypes (bool masks, floats) use np.repeat."""
    a = np.asarray(a)
    if a.dtype == np.uint8 and (a.ndim == 2 or (a.ndim == 3 and a.shape[2] in (3, 4))) and factor > 1:
        h, w = a.shape[:2]
        return np.array(Image.fromarray(a).resize((w * factor, h * factor), Image.NEAREST))
    return np.repeat(np.repeat(a, factor, 0), factor, 1)


def _rgb(image) -> np.ndarray:
    return np.asarray(image.convert("RGB") if isinstance(image, Image.Image) else image, dtype=np.uint8)


def overlays(image, maps: np.ndarray, *, alpha: float = OPACITY.default, cmap: str = DEFAULT_CMAP) -> list[np.ndarray]:
    """Colour maps `maps` (K, gh, gw), each min-max scaled on its own, laid over `image` (PIL or
    uint8 (H, W, 3), H = gh*p, W = gw*p). alpha: opacity of the maps, 0 (image only) to 1 (maps
    only). Returns K uint8 (H, W, 3) arrays; the image is weighted once for all of them.
    """
    alpha = OPACITY.check(alpha)
    img = _rgb(image)
    (gh, gw), (H, W) = maps.shape[1:], img.shape[:2]
    p = H // gh
    if p * gh != H or p * gw != W:
        raise InputError(
            f"Map {maps.shape[1:]} does not tile image {img.shape[:2]}; "
            "the image must be the map's grid times the patch size."
        )
    # PIL's blend of a NEAREST-resized colour map: about 3x faster than the same sum in numpy float32,
    # within 1 grey level of it (rounding), bench/bench_handwritten.py
    base = Image.fromarray(img)
    out = []
    for m in maps:
        colour = Image.fromarray(colorize(m, cmap)).resize((W, H), Image.NEAREST)  # one colour per patch
        out.append(np.array(Image.blend(base, colour, alpha)))
    return out


def overlay(image, amap: np.ndarray, *, alpha: float = OPACITY.default, cmap: str = DEFAULT_CMAP) -> np.ndarray:
    """One map (gh, gw) over `image`: `overlays` of a single map. uint8 (H, W, 3)."""
    return overlays(image, amap[None], alpha=alpha, cmap=cmap)[0]


def _edges(m: np.ndarray, width: int) -> np.ndarray:
    """Pixels of bool mask `m` (H, W) within `width` px inside its boundary."""
    inner = m.copy()
    for _ in range(width):  # erode by one pixel per step (4-neighbourhood)
        e = inner.copy()
        e[1:] &= inner[:-1]
        e[:-1] &= inner[1:]
        e[:, 1:] &= inner[:, :-1]
        e[:, :-1] &= inner[:, 1:]
        inner = e
    return m & ~inner


def mask_overlay(image, mask: np.ndarray, *, color=(255, 64, 64), alpha: float = 0.5) -> np.ndarray:
    """Tint the patches where `mask` (gh, gw) bool is True and outline them, darken the rest.
    uint8 (H, W, 3)."""
    img = _rgb(image).astype(np.float32)
    p = img.shape[0] // mask.shape[0]
    m = upsample(np.asarray(mask, bool), p)
    tinted = img * (1 - alpha) + np.asarray(color, np.float32) * alpha
    out = np.where(m[..., None], tinted, img * 0.35)
    out[_edges(m, max(1, p // 8))] = color
    return out.round().astype(np.uint8)


def masks_figure(image, masks: np.ndarray, *, alpha: float = 0.35) -> np.ndarray:
    """Every head's mask over one image, as in DINO's Fig. 3: head h's patches (masks (K, gh, gw)
    bool) tinted and outlined in HEAD_COLORS[h]. uint8 (H, W, 3)."""
    img = _rgb(image)
    out = img.astype(np.float32)
    p = img.shape[0] // masks.shape[1]
    ms = [upsample(np.asarray(m, bool), p) for m in masks]
    for h, m in enumerate(ms):
        c = np.asarray(HEAD_COLORS[h % len(HEAD_COLORS)], np.float32)
        out[m] = out[m] * (1 - alpha) + c * alpha
    for h, m in enumerate(ms):
        out[_edges(m, max(1, p // 8))] = HEAD_COLORS[h % len(HEAD_COLORS)]
    return out.round().astype(np.uint8)


def mark_patch(image, patch: tuple[int, int], patch_size: int, color=(0, 255, 255)) -> np.ndarray:
    """Draw a rectangle around patch (row, col) of an image. uint8 (H, W, 3)."""
    pil = Image.fromarray(_rgb(image).copy())
    r, c = patch
    w = max(1, patch_size // 8)
    ImageDraw.Draw(pil).rectangle(
        [c * patch_size, r * patch_size, (c + 1) * patch_size - 1, (r + 1) * patch_size - 1], outline=color, width=w
    )
    return np.asarray(pil)


@lru_cache(maxsize=16)
def font(size: int | None = None) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's bundled font, loaded once per size: its sans at `size` px (FreeType), or its small
    bitmap font (size None, or Pillow < 10.1, which has no sizes)."""
    if size is None:
        return ImageFont.load_default()
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def grid(
    tiles: list[np.ndarray], *, ncols: int | None = None, pad: int = 4, labels: list[str] | None = None, bg: int = 255
) -> np.ndarray:
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
        out[y : y + h, x : x + w] = t
    if labels:
        pil = Image.fromarray(out)
        draw = ImageDraw.Draw(pil)
        for i, text in enumerate(labels):
            y, x = pad + (i // ncols) * (h + cap + pad) + h + 1, pad + (i % ncols) * (w + pad)
            draw.text((x + 2, y), text, fill=(0, 0, 0), font=font())
        out = np.asarray(pil)
    return out


def jpeg_bytes(img: np.ndarray, quality: int = 92) -> bytes:
    """A uint8 (H, W, 3) picture as JPEG without chroma subsampling (4:4:4, so patch edges keep
    their colour): for overlays on photos about 6.5x smaller than PNG, 10x faster to encode, within
    7 grey levels of every pixel (bench/bench_formats.py); enlarged pixel maps stay PNG."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(img)).save(buf, format="JPEG", quality=quality, subsampling=0)
    return buf.getvalue()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(img: np.ndarray, threads: int = 1) -> bytes:
    """Lossless PNG of uint8 (H, W) grey, (H, W, 3) RGB or (H, W, 4) RGBA, made for speed.

    Hand-written because it measures 1.9x faster than PIL's encoder at compress_level=1 for 5% more
    bytes on the app's overlays (bench/bench_handwritten.py, bench/bench_render.py).

    Every row gets PNG's "Up" filter (the difference to the row above, one numpy subtraction),
    then zlib level 1: about twice as fast as PIL's adaptive filters at level 1 for the same
    size on overlays and photos. zlib releases the GIL, so threads encode images in parallel;
    `threads` > 1 also splits one image's rows into that many deflate runs compressed at once
    (as pigz does: each run but the last ends on a byte-aligned sync flush, so they join into
    one valid stream).
    """
    a = np.ascontiguousarray(img)
    if a.dtype != np.uint8 or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)) or 0 in a.shape:
        raise InputError(
            f"Cannot encode an array of {a.dtype} {a.shape} as PNG; accepted: uint8 (H, W), (H, W, 3) or (H, W, 4)."
        )
    h, w = a.shape[:2]
    rows = a.reshape(h, -1)
    up = np.empty((h, rows.shape[1] + 1), np.uint8)
    up[:, 0] = 2  # filter type "Up"
    up[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=up[1:, 1:])  # uint8 arithmetic wraps, as PNG wants
    colour = {1: 0, 3: 2, 4: 6}[1 if a.ndim == 2 else a.shape[2]]  # PNG colour type: grey, RGB, RGBA
    ihdr = struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0)
    runs = np.array_split(up, max(1, min(threads, h)))

    def deflate(i: int) -> bytes:
        z = zlib.compressobj(1, zlib.DEFLATED, -15)  # raw deflate: the zlib header and checksum are added below
        return z.compress(runs[i].tobytes()) + z.flush(zlib.Z_FINISH if i == len(runs) - 1 else zlib.Z_SYNC_FLUSH)

    if len(runs) == 1:
        body = deflate(0)
    else:
        with ThreadPoolExecutor(len(runs)) as pool:
            body = b"".join(pool.map(deflate, range(len(runs))))
    idat = b"\x78\x01" + body + struct.pack(">I", zlib.adler32(up))
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")
