"""Images in: decode any source and mode, honour EXIF, guard size, resize and crop to patches.

img = load_image("photo.jpg")                       # RGB PIL image, EXIF-rotated
x, shown = to_tensor(img, patch_size=16, mean=..., std=..., resolution=480)
# x: float32 (1, C, H, W), H and W multiples of 16; `shown` is the RGB image x shows
x, shown = to_tensor(img, patch_size=16, mean=..., std=..., resolution=None, crop="top-left")
# DINO's own preprocessing of a 500x375 photo: no resize, the top-left 496x368 px, a 23x31 grid
x, shown = to_tensor(img, patch_size=16, mean=..., std=..., resolution=768, crop="resize")
# DINOv3's notebooks: 500x375 -> 1024x768 px (48 rows of patches, 64 columns), nothing cropped

Resolutions: an int (shorter side, px, aspect kept; the longer side int(r * long / short) as torchvision's
`Resize(r)` where the family resizes as DINO's script, else rounded), None / "native" (no resize), or
"dino480" (squashed to 480 x 480 px, bilinear: DINO's visualize_attention.py default,
`transforms.Resize((480, 480))` on a PIL image). The filter is the family's (`resize`, `RESIZES`):
"bilinear" as torchvision's Resize on a PIL image (DINO's visualize_attention.py `Resize(480)`, DINOv3's
notebooks), "bicubic" for timm models (their pretrained_cfg's interpolation).
Crops: "center" (timm's) or "top-left" (DINO's
`img[:, :h - h % p, :w - w % p]`), or "resize": no crop, the image resized to whole patches keeping
its aspect as DINOv3's notebooks do (`resize_transform` in facebookresearch/dinov3 notebooks/pca.ipynb:
`resolution` is then the height, image_size there; the width is floor(w * image_size / (h * p)) patches;
bilinear, torchvision's default on a PIL image).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from attention.config import SETTINGS
from attention.errors import ImageError, InputError

# Decompression-bomb guard: PIL only raises above 2 x 89,478,485 pixels; we refuse far earlier,
# from the header alone, before any pixel is decoded.
MAX_PIXELS = SETTINGS.max_pixels  # ATTENTION_MAX_PIXELS
# Cap on patch tokens per image (a 1024 px ViT-S/16 input is 4,096; DINO#213's frame was 14,400).
MAX_TOKENS = SETTINGS.max_tokens  # ATTENTION_MAX_TOKENS
MAX_RESOLUTION = 4096
DINO480 = "dino480"  # the named resolution: squashed to DINO_SQUARE x DINO_SQUARE px as DINO's script does
DINO_SQUARE = 480

ImageSource = str | os.PathLike | bytes | Image.Image | np.ndarray
Resolution = int | str | None
Crop = Literal["top-left", "center", "resize"]
CROPS = ("top-left", "center", "resize")
Resize = Literal["bicubic", "bilinear"]
RESIZES: dict[str, int] = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR}  # PIL antialiases when shrinking


def load_image(src: ImageSource, *, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """Decode `src` to an RGB PIL image.

    src: a path, encoded bytes, a PIL image (any mode: RGB, RGBA, L, P, CMYK, I;16, ...),
    or a uint8 array (H, W), (H, W, 1), (H, W, 3) or (H, W, 4). EXIF orientation is applied;
    transparency is composited on the background its content stands out from (black under
    light content, else white: `info["background"]` names it); 16-bit and float images are scaled to 8 bits.
    Raises ImageError for anything that is not a decodable image or is over `max_pixels`.
    """
    if isinstance(src, np.ndarray):
        img = _from_array(src)
    elif isinstance(src, Image.Image):
        img = src
    elif isinstance(src, (bytes, bytearray, str, os.PathLike)):
        img = _open(src, max_pixels)
    else:
        raise ImageError(
            f"Cannot read an image from a {type(src).__name__}; "
            "accepted: a file path, bytes, a PIL image or a uint8 array."
        )
    w, h = img.size
    if w * h > max_pixels:
        raise ImageError(f"Image is {w}x{h} = {w * h:,} pixels, over the limit of {max_pixels:,}; downscale it first.")
    try:
        img.load()
        if img.getexif().get(0x0112, 1) != 1:  # rotated or mirrored on display: copy only then
            img = ImageOps.exif_transpose(img)
    except (OSError, SyntaxError, ValueError) as e:  # truncated or corrupt data
        raise ImageError(
            f"Image data is truncated or corrupt ({e}); accepted: complete PNG, JPEG, WebP, GIF, BMP or TIFF files."
        ) from None
    return _to_rgb(img)


def _open(src, max_pixels: int) -> Image.Image:
    name = "the uploaded data" if isinstance(src, (bytes, bytearray)) else Path(src).name
    try:
        return Image.open(io.BytesIO(src) if isinstance(src, (bytes, bytearray)) else src)
    except FileNotFoundError:
        raise ImageError(f"No such image file: {src}") from None
    except Image.DecompressionBombError as e:
        raise ImageError(
            f"{name} is over the limit of {max_pixels:,} pixels, refused unread ({e}); downscale it first."
        ) from None
    except (UnidentifiedImageError, OSError, ValueError):
        raise ImageError(
            f"{name} is not an image PIL can read; accepted: PNG, JPEG, WebP, GIF, BMP or TIFF files."
        ) from None


def _from_array(a: np.ndarray) -> Image.Image:
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    elif np.issubdtype(a.dtype, np.floating) and a.size and np.nanmax(a) <= 1.0:
        a = np.nan_to_num(a * 255).clip(0, 255).astype(np.uint8)
    if a.dtype != np.uint8 or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)):
        raise ImageError(
            f"Array of shape {a.shape} and dtype {a.dtype} is not an image; "
            "accepted: uint8 (H, W), (H, W, 3) or (H, W, 4), or floats in [0, 1]."
        )
    return Image.fromarray(np.ascontiguousarray(a))


def _to_rgb(img: Image.Image) -> Image.Image:
    if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        a = np.asarray(img, dtype=np.float64)
        top = 65535.0 if img.mode.startswith("I;16") or a.max() > 255 else 255.0
        img = Image.fromarray((a / max(top, 1e-12) * 255).clip(0, 255).astype(np.uint8))
    if img.mode == "P":
        img = img.convert("RGBA")
    if img.mode in ("RGBA", "LA", "PA") or (img.mode in ("RGB", "L") and "transparency" in img.info):
        return _flattened(img.convert("RGBA"))
    return img if img.mode == "RGB" else img.convert("RGB")


def _flattened(img: Image.Image) -> Image.Image:
    """An RGBA image composited onto the background its content stands out from: black under light content (a
    white digit drawn on transparency), white otherwise; fully opaque images are only converted. The background
    chosen is kept in the result's `info["background"]` ("black" or "white"), for the words beside the maps."""
    if img.getchannel("A").getextrema()[0] == 255:
        return img.convert("RGB")
    w, h = img.size
    k = max(1, max(w, h) // 256)  # the content's brightness judged on every k-th pixel: cheap for any size
    a = np.asarray(img.resize((max(1, w // k), max(1, h // k)), Image.NEAREST), dtype=np.float32)
    alpha = a[..., 3]
    luma = a[..., :3] @ np.array([0.299, 0.587, 0.114], np.float32)  # PIL's "L"
    light = alpha.sum() > 0 and float((luma * alpha).sum() / alpha.sum()) > 127.5
    bg = Image.new("RGBA", img.size, (0, 0, 0, 255) if light else (255, 255, 255, 255))
    out = Image.alpha_composite(bg, img).convert("RGB")
    out.info["background"] = "black" if light else "white"
    return out


def target_size(
    size: tuple[int, int], patch_size: int, resolution: Resolution, crop: Crop = "center", resize: Resize = "bicubic"
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Resized size (W, H) and then cropped size (W', H'), multiples of `patch_size`.

    resolution: int, the shorter side in pixels (aspect kept; the longer side: resize "bilinear",
    int(r * long / short) as torchvision's `Resize(r)` in DINO's script; "bicubic", rounded, as timm models
    are fed here); None keeps the size; "dino480"
    (DINO480) is 480 x 480 whatever the aspect. (As returned by `check_resolution`.)
    crop "resize" (DINOv3's notebooks): the image is resized straight to whole patches, nothing
    cropped: an int resolution is the height (floor(resolution / p) patches) and the width is
    floor(w * resolution / (h * p)) patches (at least one); None: floor(h / p) x floor(w / p) patches.
    """
    w, h = size
    if crop == "resize" and resolution != DINO480:
        r = h if resolution is None else int(resolution)
        rw, rh = max(1, int(w * r / (h * patch_size))) * patch_size, max(1, int(r / patch_size)) * patch_size
        return (rw, rh), (rw, rh)
    if resolution is None:
        rw, rh = w, h
    elif resolution == DINO480:
        rw, rh = DINO_SQUARE, DINO_SQUARE
    else:
        r = int(resolution)  # torchvision's Resize(r): the shorter side r, the longer int(r * long / short)
        longer = (lambda v: max(1, int(v))) if resize == "bilinear" else (lambda v: max(1, round(v)))
        rw, rh = (r, longer(r * h / w)) if w <= h else (longer(r * w / h), r)
    return (rw, rh), (rw // patch_size * patch_size, rh // patch_size * patch_size)


def patch_tokens(
    size: tuple[int, int], patch: int, resolution: Resolution, crop: Crop = "center", resize: Resize = "bicubic"
) -> int:
    """Patch tokens of an image of `size` (W, H) at `resolution`, cropped or resized to the patch grid
    by `crop` with `resize` (see `target_size`; for crop "resize" an int resolution is the height)."""
    _, (cw, ch) = target_size(size, patch, resolution, crop, resize)
    return (cw // patch) * (ch // patch)


def largest_resolution_where(fits: Callable[[int], bool], patch: int) -> int | None:
    """The largest resolution r in [patch, MAX_RESOLUTION] with `fits(r)`, or None when not even
    `patch` fits. Binary search: `fits` must turn false once and stay false as r grows (a cost
    that grows with the resolution), as every limit on a pass does."""
    lo, hi = patch, MAX_RESOLUTION
    if not fits(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def largest_token_resolution(
    size: tuple[int, int], patch: int, max_tokens: int = MAX_TOKENS, crop: Crop = "center", resize: Resize = "bicubic"
) -> int | None:
    """The largest resolution at which an image of `size` makes at most `max_tokens` patches (`crop`
    as in `target_size`)."""
    return largest_resolution_where(lambda r: patch_tokens(size, patch, r, crop, resize) <= max_tokens, patch)


def check_resolution(resolution: Resolution, patch_size: int) -> int | str | None:
    """Validate a resolution argument: an int in [patch_size, 4096], None or "native" (-> None),
    or "dino480" (-> DINO480). ("auto" is the caller's to resolve: it depends on the model.)"""
    if resolution is None or (isinstance(resolution, str) and resolution.strip().lower() in ("native", "none", "")):
        return None
    if isinstance(resolution, str) and resolution.strip().lower() == DINO480:
        return DINO480
    try:
        r = int(resolution)
    except (TypeError, ValueError):
        raise InputError(
            f"Resolution {resolution!r} is not accepted; "
            f"use 'auto', 'native', '{DINO480}' or a number of pixels ({patch_size}-{MAX_RESOLUTION})."
        ) from None
    if not patch_size <= r <= MAX_RESOLUTION:
        raise InputError(
            f"Resolution {r} px is out of range; "
            f"accepted: {patch_size} (one patch) to {MAX_RESOLUTION} px, 'auto', 'native' or '{DINO480}'."
        )
    return r


def to_tensor(
    img: Image.Image,
    *,
    patch_size: int,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    resolution: int | str | None,
    crop: Crop = "center",
    max_tokens: int = MAX_TOKENS,
    resize: Resize = "bicubic",
):
    """Resize (shorter side to `resolution` with the filter `resize`, the family's: `RESIZES`;
    "dino480": 480 x 480, bilinear, as DINO's script; None: not at all), crop to multiples of the patch
    (`crop`: "center", or "top-left" as DINO; "resize": no crop, resized to whole patches as DINOv3's
    notebooks: see `target_size`), normalise with `mean`/`std` (1 or 3 channels).

    Returns (x, shown): x float32 tensor (1, C, H', W'); shown, the RGB PIL image of size
    (W', H') that x shows, so maps on the (H'/p, W'/p) grid align with it pixel for pixel.
    Raises ImageError when the image is smaller than one patch or over `max_tokens` patches,
    InputError for an unknown crop or resize.
    """
    import torch

    if crop not in CROPS:
        raise InputError(f"Crop {crop!r} is not accepted; accepted: {', '.join(map(repr, CROPS))}.")
    if resize not in RESIZES:
        raise InputError(f"Resize {resize!r} is not accepted; accepted: {', '.join(map(repr, RESIZES))}.")

    w, h = img.size
    if min(w, h) < patch_size:
        raise ImageError(
            f"Image is {w}x{h} px, smaller than one {patch_size}x{patch_size} patch; "
            f"accepted: at least {patch_size} px on each side."
        )
    (rw, rh), (cw, ch) = target_size((w, h), patch_size, resolution, crop, resize)
    tokens = (cw // patch_size) * (ch // patch_size)
    if tokens > max_tokens:
        best = largest_token_resolution((w, h), patch_size, max_tokens, crop, resize)
        raise ImageError(
            f"At this resolution the image makes {cw // patch_size}x{ch // patch_size} = {tokens:,} patches, "
            f"over the cap of {max_tokens:,}; the largest resolution accepted for this {w}x{h} image is "
            f"{best} px."
        )
    if (rw, rh) != (w, h):  # PIL filters antialias when shrinking, as torchvision's Resize on PIL images
        img = img.resize((rw, rh), RESIZES["bilinear" if resolution == DINO480 else resize])
    left, top = ((rw - cw) // 2, (rh - ch) // 2) if crop == "center" else (0, 0)
    shown = img.crop((left, top, left + cw, top + ch))
    src = shown.convert("L") if len(mean) == 1 else shown
    a = torch.from_numpy(np.array(src))  # uint8 (H', W'[, C]): the smallest copy to reorder
    a = (a[None] if a.ndim == 2 else a.permute(2, 0, 1)).contiguous().float()  # (C, H', W')
    m, s = (torch.tensor(v, dtype=torch.float32)[:, None, None] for v in (mean, std))
    return a.div_(255.0).sub_(m).div_(s)[None], shown  # in place: one float copy of the image at most
