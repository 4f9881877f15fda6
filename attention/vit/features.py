"""Feature views of a ViT, from the same forward pass as the attention maps: PCA, similarity, norms.

The engine's hooks (`capture`: every block, and the final norm) copy the tokens the block outputs, so the pass
that records attention also records features: no second forward, O(layers x N x d) memory kept
as float16. The features of layer l are the tokens block l outputs; for the last layer, after the
model's final norm (what timm's `forward_features` returns, DINOv2's `x_norm_patchtokens`).

    with recording(model) as rec:            # around any forward of `model` in this thread
        attention_maps(model, image)
    tokens = rec.tokens                      # float16 (L, N, d) on CPU
    pca(tokens[-1, P:], grid)                # (gh, gw, 3) in [0, 1]
    similarity(tokens[-1], grid, (5, 7), P)  # (gh, gw) cosine, 1 at the query
    norms(tokens[-1, P:], grid)              # (gh, gw) L2 norms; high_norm(...) marks outliers
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from attention.errors import InputError
from attention.vit import capture
from attention.vit.capture import Recorder
from attention.vit.extract import Query

HIGH_NORM = 2.0  # a token is high-norm (an artifact token) when its norm is over this times the median


class Tokens(Recorder):
    """The tokens one forward pass's blocks output (the last one after the final norm), handed out by
    the engine's one hook mechanism (`capture.recording`)."""

    def __init__(self, n_layers: int):
        self.layers: list[torch.Tensor | None] = [None] * n_layers

    def on_block(self, layer: int, x: torch.Tensor) -> None:  # x: (B, N, d)
        # a float16 copy on the model's device: no GPU sync inside the forward (one transfer after it)
        self.layers[layer] = x.detach().to(torch.float16, copy=True)

    @property
    def batch(self) -> np.ndarray:
        """float16 (B, L, N, d): every sample's every layer's output tokens, prefix tokens first."""
        if any(t is None for t in self.layers):
            raise InputError("No forward pass ran while recording features.")
        return torch.stack(self.layers, 1).cpu().numpy()  # type: ignore[arg-type]

    @property
    def tokens(self) -> np.ndarray:
        """float16 (L, N, d): the first (or only) sample's output tokens, prefix tokens first."""
        return self.batch[0]


@contextmanager
def recording(model: torch.nn.Module) -> Iterator[Tokens]:
    """Record the features of every forward of `model` run in this context (thread, task)."""
    with capture.recording(model, Tokens(len(model.blocks))) as rec:
        yield rec


def _check(f: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    f = np.asarray(f, dtype=np.float32)
    if f.ndim != 2 or f.shape[0] != grid[0] * grid[1]:
        raise InputError(f"Features {f.shape} do not match the {grid[0]}x{grid[1]} patch grid.")
    return f


def _components(f: np.ndarray, k: int) -> np.ndarray:
    """The first `k` principal component scores of the rows of `f` (N, d) after centring: (N, k).
    From the d x d covariance's eigenvectors (float64): the same components as an SVD of the N x d
    matrix, about 10x faster at N = 1350, d = 384."""
    x = (f - f.mean(0)).astype(np.float64)
    _, vecs = np.linalg.eigh(x.T @ x)  # ascending eigenvalues
    return (x @ vecs[:, ::-1][:, :k]).astype(np.float32)


def _unit(c: np.ndarray) -> np.ndarray:
    lo, hi = c.min(0), c.max(0)
    return (c - lo) / np.where(hi > lo, hi - lo, 1)


def pca(f: np.ndarray, grid: tuple[int, int], *, background: float | None = None) -> np.ndarray:
    """RGB of the first three principal components of patch features `f` (N = gh*gw, d), centred,
    each min-max scaled to [0, 1]: float32 (gh, gw, 3). Signs: each component is made darker on the
    grid's border than inside it (the usual background), so colours are stable across layers.

    background: with a value in (0, 1), patches whose first component (scaled) is below it are
    background, set to 0, and the three components are computed again on the others alone, as the
    DINOv2 demos do.
    """
    f = _check(f, grid)
    gh, gw = grid
    if f.shape[0] < 3:
        raise InputError(f"PCA needs at least 3 patches; the grid is {gh}x{gw}.")
    border = np.ones(grid, bool)
    border[1:-1, 1:-1] = False
    border = border.reshape(-1)

    def oriented(c: np.ndarray) -> np.ndarray:
        flip = c[border].mean(0) > c.mean(0)
        return np.where(flip, -c, c)

    c = _unit(oriented(_components(f, 3)))
    if background is not None:
        if not 0 < background < 1:
            raise InputError(f"PCA background threshold {background} is out of range; accepted: 0 to 1, exclusive.")
        fg = c[:, 0] >= background
        c = np.zeros_like(c)
        if fg.sum() >= 3:
            c[fg] = _unit(_components(f[fg], 3))
    return c.reshape(gh, gw, 3).astype(np.float32)


def similarity(tokens: np.ndarray, grid: tuple[int, int], query: Query, num_prefix: int) -> np.ndarray:
    """Cosine similarity of the query token's feature to every patch's: float32 (gh, gw), 1 at the
    query's own cell. tokens: (P + gh*gw, d), prefix first; query "cls" or (row, col)."""
    t = np.asarray(tokens, dtype=np.float32)
    patches = _check(t[num_prefix:], grid)
    if query == "cls":
        q = t[0]
    else:
        r, c = query
        if not (0 <= r < grid[0] and 0 <= c < grid[1]):
            raise InputError(f"Query patch ({r}, {c}) is off the {grid[0]}x{grid[1]} grid.")
        q = patches[r * grid[1] + c]
    num = patches @ q
    den = np.linalg.norm(patches, axis=1) * np.linalg.norm(q)
    return (num / np.maximum(den, 1e-12)).reshape(grid).astype(np.float32)


def norms(f: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """The L2 norm of each patch token: float32 (gh, gw)."""
    return np.linalg.norm(_check(f, grid), axis=1).reshape(grid).astype(np.float32)


def high_norm(n: np.ndarray, factor: float = HIGH_NORM) -> np.ndarray:
    """bool, shape of `n`: the high-norm outliers, over `factor` times the median norm (the artifact
    tokens of DINOv2 without registers: Darcet et al., 2024)."""
    return n > factor * float(np.median(n))


def feature_maps(
    tokens: np.ndarray,
    grid: tuple[int, int],
    num_prefix: int,
    layer: int,
    query: Query,
    background: float | None = None,
):
    """pca (gh, gw, 3), similarity (gh, gw) and norms (gh, gw), float32, of one layer of recorded
    `tokens` (L, P + gh*gw, d); `background`: see `pca`. Raises InputError for a layer off the depth
    or a query off the grid."""
    L = tokens.shape[0]
    if not -L <= layer < L:
        raise InputError(f"Layer {layer} is out of range; accepted: 0 to {L - 1}, or -1 for the last.")
    t = np.asarray(tokens[layer], dtype=np.float32)
    return {
        "pca": pca(t[num_prefix:], grid, background=background),
        "similarity": similarity(t, grid, query, num_prefix),
        "norms": norms(t[num_prefix:], grid),
    }
