"""How an image becomes tokens, Q, K and V: patches, positional encoding, random projections.

    image (H, W, 3) -> resize so the long side is WORK_SIZE -> crop to whole patches
    -> N = rows x cols patches of p x p x 3, flattened to D = 3 p^2 numbers each,
       pixels standardised (zero mean, unit variance over the image)
    -> tokens = patches + PE (N, D), the sinusoidal encoding of the patch index
    -> Q, K, V = tokens W_q, tokens W_k, tokens W_v with seeded random weights (D, heads x d_head)
    -> attention per head (heads, N, N) by `attend`

`patch_view` draws it: the patch grid with a chosen patch, that patch's attention on the
image per head, the N x N matrices per head, and a description of every shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from attention.calculator.plots import captioned, grid_lines, heatmaps
from attention.calculator.settings import Settings
from attention.calculator.steps import Steps, attend
from attention.errors import ImageError, InputError, check_int
from attention.images import ImageSource, load_image
from attention.render import mark_patch, overlay, upsample

WORK_SIZE = 224  # long side of the image after resizing, in pixels
PATCH_SIZES = (14, 16, 28, 32, 56)
D_HEAD = 16  # columns of Q, K and V per head
MAX_HEADS = 8
ZOOM = 2  # `patch_view` draws the image at twice the working size
CHOSEN = (0, 255, 255)  # the chosen patch's outline, on the grid and on every map (cyan)


def sinusoidal_encoding(n: int, d: int) -> np.ndarray:
    """The Transformer's positional encoding, (n, d):
    PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same)."""
    if n < 1 or d < 1:
        raise InputError(f"a positional encoding needs n >= 1 positions and d >= 1 dimensions, got n={n}, d={d}")
    pos = np.arange(n, dtype=np.float64)[:, None]
    two_i = np.arange(0, d, 2, dtype=np.float64)  # 2i for each sin/cos pair
    angles = pos / np.power(10000.0, two_i / d)
    pe = np.zeros((n, d))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d // 2])
    return pe


def fit(image: np.ndarray, patch: int, work_size: int = WORK_SIZE) -> np.ndarray:
    """Resize RGB (H, W, 3) so the long side is `work_size`, then crop to whole patches (partial ones dropped)."""
    h, w = image.shape[:2]
    f = work_size / max(h, w)
    size = (max(1, round(w * f)), max(1, round(h * f)))
    a = np.asarray(Image.fromarray(image).resize(size, Image.BICUBIC))
    rows, cols = a.shape[0] // patch, a.shape[1] // patch
    if rows == 0 or cols == 0:
        raise ImageError(
            f"the image is {h} x {w} pixels; resized to {a.shape[0]} x {a.shape[1]} it holds no "
            f"whole {patch} x {patch} patch: use a less elongated image or a smaller patch"
        )
    return a[: rows * patch, : cols * patch]


def patchify(image: np.ndarray, patch: int) -> np.ndarray:
    """(rows*p, cols*p, C) -> (rows*cols, p*p*C): patches in raster order, each flattened row by row."""
    h, w, c = image.shape
    r, q = h // patch, w // patch
    return image[: r * patch, : q * patch].reshape(r, patch, q, patch, c).transpose(0, 2, 1, 3, 4).reshape(r * q, -1)


@dataclass(frozen=True)
class PatchAttention:
    """The pipeline's arrays. N = rows x cols patches, D = 3 p^2, dk = heads x D_HEAD.

    image: uint8 (rows*p, cols*p, 3), the resized, cropped image; patches (N, D)
    standardised pixels; pos (N, D) positional encoding; tokens = patches + pos;
    q, k, v (N, dk); attention: the Steps (weights (heads, N, N)).
    """

    image: np.ndarray
    patch: int
    grid: tuple[int, int]
    patches: np.ndarray
    pos: np.ndarray
    tokens: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    attention: Steps

    def patch_map(self, index: int) -> np.ndarray:
        """(heads, rows, cols): how much patch `index` attends to every patch, per head."""
        n = self.tokens.shape[0]
        if not 0 <= index < n:
            raise InputError(f"patch index {index} is out of range: this image has patches 0..{n - 1}")
        return self.attention.weights[:, index, :].reshape(-1, *self.grid)


def patch_attention(image: ImageSource, patch: int = 16, heads: int = 2, seed: int = 0) -> PatchAttention:
    """Run the whole pipeline on an image: a path, bytes, PIL image or uint8 array (see `load_image`).

    The image is resized to WORK_SIZE on its long side; `seed` draws W_q, W_k, W_v.
    """
    if patch not in PATCH_SIZES:
        raise InputError(f"patch size {patch} is not offered; choose one of {', '.join(map(str, PATCH_SIZES))}")
    heads = check_int(heads, "heads", 1, MAX_HEADS)
    img = fit(np.asarray(load_image(image)), patch)
    raw = patchify(img.astype(np.float64) / 255.0, patch)
    patches = (raw - raw.mean()) / (raw.std() + 1e-8)
    n, d = patches.shape
    pos = sinusoidal_encoding(n, d)
    tokens = patches + pos
    rng = np.random.default_rng(seed)
    dk = int(heads) * D_HEAD
    w_q, w_k, w_v = (rng.normal(0.0, 1.0 / np.sqrt(d), (d, dk)) for _ in range(3))
    q, k, v = tokens @ w_q, tokens @ w_k, tokens @ w_v
    steps = attend(q, k, v, Settings(heads=heads), max_size=None)
    return PatchAttention(
        img, patch, (img.shape[0] // patch, img.shape[1] // patch), patches, pos, tokens, q, k, v, steps
    )


def patch_under(x: float, y: float, grid_shape: tuple[int, int], step: int) -> int:
    """Raster index of the patch under pixel (x, y) of an image whose patches are `step` px
    (clamped to the grid (rows, cols))."""
    rows, cols = grid_shape
    r, c = min(rows - 1, max(0, int(y) // step)), min(cols - 1, max(0, int(x) // step))
    return r * cols + c


@dataclass(frozen=True)
class PatchView:
    """What `patch_view` draws. N patches in a grid (rows, cols) of p px, drawn at ZOOM x.

    grid: uint8 (ZOOM*rows*p, ZOOM*cols*p, 3), the image with the patch grid and the chosen
    patch outlined in CHOSEN (cyan); maps: uint8 RGB, per head the chosen patch's attention laid
    over the image with the patch outlined in CHOSEN too (2 columns for 4 heads, else up to 3);
    matrices: uint8 RGB, the (N, N) weights per head as heatmaps; maps and matrices are captioned
    'head 1', ... legibly at a phone's width (`plots.captioned`); info: Markdown describing every
    shape; index: the chosen patch (raster order); count: N.
    """

    grid: np.ndarray
    maps: np.ndarray
    matrices: np.ndarray
    info: str
    index: int
    count: int


def patch_view(
    image: ImageSource | None,
    patch: int = 16,
    heads: int = 4,
    seed: int | None = 0,
    index: float | None = None,
    click: tuple[float, float] | None = None,
) -> PatchView:
    """Run `patch_attention` and draw it, for patch `index` (raster order; None: the centre
    patch) or, when given, the patch under `click` = (x, y) in `PatchView.grid`'s pixels.

    Numbers may come as whole floats from a form (3.0); anything else, an index off this image's
    grid included, raises InputError naming the accepted range. seed None = 0.
    """
    if image is None:
        raise InputError("no image: pick an example or upload one")
    heads = check_int(heads, "heads", 1, MAX_HEADS)
    seed = check_int(0 if seed is None else seed, "the weights seed", 0, 2**31 - 1)
    patch = check_int(patch, "the patch size", min(PATCH_SIZES), max(PATCH_SIZES))
    pa = patch_attention(image, patch, heads, seed)
    rows, cols = pa.grid
    n = rows * cols
    if click is not None:
        index = patch_under(*click, pa.grid, ZOOM * pa.patch)
    index = (rows // 2) * cols + cols // 2 if index is None else check_int(index, "the patch index", 0, n - 1)
    r, c = divmod(index, cols)
    big, p = upsample(pa.image, ZOOM), pa.patch * ZOOM
    chosen = mark_patch(grid_lines(big, p), (r, c), p, color=CHOSEN)
    maps = [mark_patch(overlay(big, m), (r, c), p, color=CHOSEN) for m in pa.patch_map(index)]
    ncols = 2 if len(maps) == 4 else min(len(maps), 3)
    maps = captioned(maps, [f"head {h}" for h in range(len(maps))], ncols=ncols)
    mats = heatmaps(pa.attention.weights, ncols=ncols, vmin=0.0, target=260)
    d, dk = pa.tokens.shape[1], pa.q.shape[1]
    info = (
        f"**{pa.image.shape[1]} x {pa.image.shape[0]} px** (long side {WORK_SIZE}, partial patches "
        f"dropped) → **{rows} x {cols} = {n} patches** of {pa.patch} x {pa.patch} x 3 → flattened to **{n} x {d}** "
        f"(pixels standardised) → **+ sinusoidal positions** (sin on even, cos on odd dimensions, 10000^(2i/{d})) → "
        f"Q, K, V = tokens W (random, seed {seed}): **{n} x {dk}** = {heads} heads x "
        f"{D_HEAD} → attention **{heads} x {n} x {n}**. Chosen patch: **#{index}** "
        f"(row {r}, column {c}), outlined in cyan; click the grid to choose another."
    )
    return PatchView(chosen, maps, mats, info, index, n)
