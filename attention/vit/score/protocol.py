"""The scoring protocols on arrays, numbers only: which pixels a map removes first, the perturbed inputs of a
curve, the area under it, the pointing game and the segmentation counts. No model here (`compute` runs them).

    order = unit_order(m)                                  # (gh*gw,) patches, most relevant first
    keep = keep_masks(order, removed_counts(STEPS, 49), (7, 7), 4)   # (S, 1, 28, 28): 1 kept, 0 removed
    auc(curve, STEPS)                                      # trapezoid over the removed fraction

Perturbation (Chefer, Gur & Wolf 2021, `baselines/ViT/pertubation_eval_from_hdf5.py`): at each fraction f of
`STEPS` (their 0.1 ... 0.9, and 0 for the whole image) the first int(f * n) units of the map's order are set to
the removal value (their code: 0 on the [0, 1] image, black, before normalising); positive: most relevant
first, negative: least relevant first (their `--neg`: the map negated). The unit: "patch" (whole patches of the
map's grid, ranked by the map) or "pixel" (the map upsampled bilinearly to the input, pixels ranked: their
saved maps are upsampled by 16 first).
Deletion / insertion (Petsiuk, Das & Saenko 2018, RISE `evaluation.py` `CausalMetric`): `step` pixels of the
map's order at a time, from the image to the removal value (deletion) or from a blurred copy to the image
(insertion); the score at each of the ceil(H * W / step) + 1 points; its area (`rise_auc`).
Segmentation (Chefer et al.'s `imagenet_seg_eval.py`): the map upsampled bilinearly, min-max scaled,
foreground where it is over its mean; per class (background, foreground) intersection and union, pixel
accuracy; a dataset's mIoU from the summed counts. Pointing game (Zhang et al., ECCV 2016; TorchRay's
`PointingGame`): the map's highest pixel (the first, raster order) closer than `tolerance` px to the mask
(strictly, as TorchRay: 1 is the peak pixel itself; EBP's benchmark uses 15).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from attention.errors import InputError

STEPS = tuple(i / 10 for i in range(10))  # Chefer et al.'s 0.1 ... 0.9, and 0 (the whole image)
UNITS = ("patch", "pixel")
VALUES = ("black", "mean")  # 0 on the [0, 1] image (Chefer et al.'s code); the dataset mean (0 once normalised)
BLUR = (11, 5.0)  # RISE's insertion substrate: its `gkern(11, 5)`


def upsampled(m: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """float64 (H, W): a map (gh, gw) upsampled bilinearly to `size` (torch's, align_corners=False, as
    Chefer et al.'s `F.interpolate(..., mode='bilinear')` and TorchRay's), in float32 as theirs, so that the
    upsampling's exact ties (its clamped border) stay ties; a map already (H, W) unchanged."""
    m = np.asarray(m, np.float64)
    if m.shape == tuple(size):
        return m
    t = torch.from_numpy(m).float()[None, None]
    return F.interpolate(t, size=tuple(size), mode="bilinear", align_corners=False)[0, 0].double().numpy()


def unit_order(m: np.ndarray) -> np.ndarray:
    """int64 (m.size,): m's entries ranked, highest first; ties in raster order (a stable sort)."""
    return np.argsort(-np.asarray(m, np.float64).ravel(), kind="stable")


def removed_counts(steps: tuple[float, ...], n: int) -> list[int]:
    """Units removed at each fraction: int(f * n), as Chefer et al.'s `int(base_size * step)`."""
    return [int(n * f) for f in steps]


def keep_masks(order: np.ndarray, counts: list[int], grid: tuple[int, int], factor: int) -> torch.Tensor:
    """float32 (S, 1, gh * factor, gw * factor): 0 on the first counts[s] units of `order` (over a (gh, gw)
    grid of units, each factor x factor px), 1 elsewhere."""
    keep = torch.ones(len(counts), grid[0] * grid[1])
    idx = torch.from_numpy(np.ascontiguousarray(order))
    for s, k in enumerate(counts):
        keep[s, idx[:k]] = 0.0
    keep = keep.reshape(-1, 1, *grid)
    if factor > 1:
        keep = keep.repeat_interleave(factor, 2).repeat_interleave(factor, 3)
    return keep


def perturbation_keep(
    m: np.ndarray, size: tuple[int, int], patch: int, steps: tuple[float, ...], unit: str, negative: bool
) -> torch.Tensor:
    """The keep masks (S, 1, H, W) of one perturbation curve of map m ((gh, gw) or (H, W))."""
    m = np.asarray(m, np.float64)
    if unit == "patch":
        grid, factor = (size[0] // patch, size[1] // patch), patch
        if m.shape == tuple(size):  # a pixel map ranks patches by its mean over each
            m = m.reshape(grid[0], patch, grid[1], patch).mean((1, 3))
    else:
        m, grid, factor = upsampled(m, size), size, 1
    order = unit_order(-m if negative else m)
    return keep_masks(order, removed_counts(steps, grid[0] * grid[1]), grid, factor)


def rise_keep(m: np.ndarray, size: tuple[int, int], step: int) -> torch.Tensor:
    """float32 (n + 1, 1, H, W), n = ceil(H * W / step): 0 on the first i * step pixels of the map's order
    (the map upsampled bilinearly to the input) at point i."""
    n_px = size[0] * size[1]
    n = (n_px + step - 1) // step
    order = unit_order(upsampled(m, size))
    return keep_masks(order, [min(i * step, n_px) for i in range(n + 1)], size, 1)


def removal_value(value: str, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """float32 (C, 1, 1): the removed pixels' value once normalised: "black" (0 before normalising) is
    -mean / std per channel; "mean" is 0."""
    if value not in VALUES:
        raise InputError(f"Removal value {value!r} is not accepted; accepted: {', '.join(VALUES)}.")
    m, s = torch.tensor(mean, dtype=torch.float32), torch.tensor(std, dtype=torch.float32)
    v = -m / s if value == "black" else torch.zeros_like(m)
    return v[:, None, None]


def rise_kernel(klen: int = BLUR[0], sigma: float = BLUR[1]) -> np.ndarray:
    """float64 (klen, klen): RISE's `gkern`, scipy's `gaussian_filter` (truncate 4, mode "reflect") of an impulse
    at the centre of a klen x klen grid, written out: the normalised 1-D Gaussian of radius int(4 sigma + 0.5)
    summed over the impulse's half-sample reflections (d c b a | a b c d | d c b a), its outer product."""
    x = np.arange(-int(4 * sigma + 0.5), int(4 * sigma + 0.5) + 1)
    phi = np.exp(-0.5 * x**2 / sigma**2)
    n = (np.arange(klen)[:, None] + x[None, :]) % (2 * klen)
    k1 = (phi / phi.sum() * (np.where(n < klen, n, 2 * klen - 1 - n) == klen // 2)).sum(1)
    return np.outer(k1, k1)


def blurred(x: torch.Tensor, klen: int = BLUR[0], sigma: float = BLUR[1]) -> torch.Tensor:
    """x (1, C, H, W) blurred per channel by RISE's kernel (`rise_kernel`), zero padding, as RISE's
    `conv2d(x, kern, padding=klen // 2)`."""
    k = torch.from_numpy(rise_kernel(klen, sigma)).float()[None, None].repeat(x.shape[1], 1, 1, 1)
    return F.conv2d(x.float(), k, padding=klen // 2, groups=x.shape[1])


def auc(curve: np.ndarray, steps: tuple[float, ...]) -> float:
    """The area under `curve` over the removed fractions `steps` (trapezoid)."""
    return float(np.trapezoid(np.asarray(curve, np.float64), np.asarray(steps, np.float64)))


def rise_auc(curve: np.ndarray) -> float:
    """RISE's area: (sum - first / 2 - last / 2) / (points - 1), the trapezoid over [0, 1]."""
    a = np.asarray(curve, np.float64)
    return float((a.sum() - a[0] / 2 - a[-1] / 2) / (len(a) - 1))


@dataclass(frozen=True)
class Segmentation:
    """One image's (or a dataset's summed) counts: pixels correct of labelled, per class (background,
    foreground) intersection and union."""

    correct: int
    labeled: int
    inter: tuple[int, int]
    union: tuple[int, int]

    def __add__(self, o: Segmentation) -> Segmentation:
        return Segmentation(
            self.correct + o.correct,
            self.labeled + o.labeled,
            (self.inter[0] + o.inter[0], self.inter[1] + o.inter[1]),
            (self.union[0] + o.union[0], self.union[1] + o.union[1]),
        )

    @property
    def pixel_accuracy(self) -> float:
        return self.correct / (np.spacing(1, dtype=np.float64) + self.labeled)

    @property
    def miou(self) -> float:
        """The mean over the two classes of intersection / union (Chefer et al.'s, np.spacing(1) added)."""
        i, u = np.array(self.inter, np.float64), np.array(self.union, np.float64)
        return float((i / (np.spacing(1, dtype=np.float64) + u)).mean())


def segmentation(m: np.ndarray, mask: np.ndarray) -> Segmentation:
    """Counts of map m ((gh, gw) or (H, W)) against mask bool (H, W): foreground where the upsampled,
    min-max scaled map is over its mean (a constant map: no foreground)."""
    r = upsampled(m, mask.shape)
    lo, hi = r.min(), r.max()
    fg = np.zeros(mask.shape, bool) if hi <= lo else ((r - lo) / (hi - lo)) > ((r - lo) / (hi - lo)).mean()
    t = np.asarray(mask, bool)
    inter = (int((~fg & ~t).sum()), int((fg & t).sum()))
    union = (int((~fg | ~t).sum()), int((fg | t).sum()))
    return Segmentation(int((fg == t).sum()), int(t.size), inter, union)


def pointing(m: np.ndarray, mask: np.ndarray, tolerance: float = 1.0) -> bool:
    """Whether the highest pixel of map m (upsampled to the mask's (H, W); the first in raster order) lies
    closer than `tolerance` px (Euclidean, strictly, as TorchRay's `PointingGame`: 1 is the peak pixel itself)
    to a pixel of `mask` (bool (H, W))."""
    r = upsampled(m, mask.shape)
    y, x = np.unravel_index(int(np.argmax(r)), r.shape)
    ys, xs = np.nonzero(mask)
    if len(ys) == 0:
        return False
    return bool(((ys - y) ** 2 + (xs - x) ** 2).min() < tolerance**2)


def point_mask(point: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    """bool (H, W): only the pixel (row, col) set; InputError outside the image."""
    y, x = int(point[0]), int(point[1])
    if not (0 <= y < size[0] and 0 <= x < size[1]):
        raise InputError(f"Point {point} is outside the {size[1]}x{size[0]} px input; accepted: (row, col) inside.")
    out = np.zeros(size, bool)
    out[y, x] = True
    return out
