"""Planted digit canvases: MNIST digits pasted into known cells of a larger canvas, so that every answer is
known (which digit is where, which pixels are its ink). The planted checks of text relevance and of map scores
read them; `weights/train_digit_clip.py` draws its training canvases with the same `layout` and `compose`.

    p = planted(n_digits=3, cells=(3, 3), seed=0)     # held-out digits (attention.mnist.split), never trained on
    p.image (84, 84) uint8, p.masks (3, 84, 84) bool, p.boxes (3, 4), p.classes (3,)
    batch = planted_batch(100, n_digits=(2, 3))       # 100 canvases, 2 and 3 digits alternately

Numbers only: numpy and the shipped digits (`attention.mnist.load_subset`); no torch, no gradio.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from attention import mnist
from attention.errors import InputError

CELL = 28  # px: an MNIST digit's side, one cell of the canvas
INK = 64  # a pixel is a digit's ink when its value (0-255) exceeds this


@dataclass(frozen=True)
class Planted:
    """One canvas of K digits of distinct classes in distinct cells, white ink on black.

    image: uint8 (H, W), H = 28 * rows, W = 28 * cols; masks: bool (K, H, W), each digit's own ink (its
    pixels over INK); boxes: int64 (K, 4), (top, left, bottom, right) of the 28 x 28 square the digit was
    pasted into (its cell when shift = 0; bottom and right exclusive); classes: int64 (K,), distinct;
    cells: int64 (K,), the cell each digit was drawn for, row-major (r * cols + c).
    """

    image: np.ndarray
    masks: np.ndarray
    boxes: np.ndarray
    classes: np.ndarray
    cells: np.ndarray

    def __len__(self) -> int:
        return len(self.classes)


def layout(
    rng: np.random.Generator, cells: tuple[int, int], n_digits: int, shift: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where K = n_digits digits go: (cells (K,) distinct, classes (K,) distinct, corners (K, 2) (top, left)).

    Each digit's corner is its cell's, moved by up to `shift` px each way and kept inside the canvas.
    """
    rows, cols = cells
    where = rng.permutation(rows * cols)[:n_digits]
    classes = rng.permutation(10)[:n_digits]
    corners = np.stack([where // cols, where % cols], 1) * CELL
    if shift:
        corners = corners + rng.integers(-shift, shift + 1, (n_digits, 2))
    corners = np.clip(corners, 0, [CELL * (rows - 1), CELL * (cols - 1)])
    return where.astype(np.int64), classes.astype(np.int64), corners.astype(np.int64)


def compose(digits: np.ndarray, corners: np.ndarray, cells: tuple[int, int], background: float = 0) -> np.ndarray:
    """A canvas (28 * rows, 28 * cols) of digits' dtype holding digits (K, 28, 28) at corners (K, 2)
    (top, left); where two overlap the brighter pixel stays. background: the blank canvas's value (ink is
    brighter than it)."""
    rows, cols = cells
    out = np.full((CELL * rows, CELL * cols), background, dtype=digits.dtype)
    for digit, (top, left) in zip(digits, corners):
        view = out[top : top + CELL, left : left + CELL]
        np.maximum(view, digit, out=view)
    return out


@lru_cache(maxsize=2)
def _pools(heldout: bool) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The shipped digits (n, 28, 28) and, per class, the indices of the split's held-out (or train) part."""
    d = mnist.load_subset()
    train, held = mnist.split(len(d.labels))
    part = held if heldout else train
    return d.images, tuple(part[d.labels[part] == c] for c in range(10))


def _check(n_digits: int, cells: tuple[int, int], shift: int) -> None:
    rows, cols = cells
    if rows < 1 or cols < 1 or rows * cols > 64:
        raise InputError(f"cells = {cells} is not accepted; accepted: 1 to 64 cells, each side at least 1.")
    if not 1 <= n_digits <= min(10, rows * cols):
        raise InputError(f"n_digits = {n_digits} is not accepted; accepted: 1 to {min(10, rows * cols)}.")
    if not 0 <= shift <= CELL // 2:
        raise InputError(f"shift = {shift} is not accepted; accepted: 0 to {CELL // 2} px.")


def _one(rng: np.random.Generator, n_digits: int, cells: tuple[int, int], heldout: bool, shift: int) -> Planted:
    images, pools = _pools(heldout)
    where, classes, corners = layout(rng, cells, n_digits, shift)
    digits = np.stack([images[rng.choice(pools[c])] for c in classes])
    image = compose(digits, corners, cells)
    masks = np.zeros((n_digits, *image.shape), bool)
    for k, (top, left) in enumerate(corners):
        masks[k, top : top + CELL, left : left + CELL] = digits[k] > INK
    boxes = np.concatenate([corners, corners + CELL], 1)
    return Planted(image, masks, boxes, classes, where)


def planted(
    n_digits: int = 3, cells: tuple[int, int] = (3, 3), seed: int = 0, heldout: bool = True, shift: int = 0
) -> Planted:
    """One seeded canvas of `n_digits` MNIST digits of distinct classes in distinct cells of a rows x cols
    grid of 28 px cells (the rest blank). heldout: draw from the split's held-out fifth (never trained on),
    else from its train part. shift: px each digit may move off its cell's corner (0: exactly in its cell).
    The same arguments always give the same canvas. InputError for a bad count, grid or shift."""
    _check(n_digits, cells, shift)
    return _one(np.random.default_rng(seed), n_digits, tuple(cells), heldout, shift)


def planted_batch(
    n: int,
    n_digits: int | tuple[int, ...] = (2, 3),
    cells: tuple[int, int] = (3, 3),
    seed: int = 0,
    heldout: bool = True,
    shift: int = 0,
) -> list[Planted]:
    """n seeded canvases as `planted` makes them, from one random stream; n_digits: one count, or counts
    taken in turn (2, 3, 2, 3, ...). The same arguments always give the same list."""
    counts = (n_digits,) if isinstance(n_digits, int) else tuple(n_digits)
    for k in counts:
        _check(k, cells, shift)
    rng = np.random.default_rng(seed)
    return [_one(rng, counts[i % len(counts)], tuple(cells), heldout, shift) for i in range(n)]
