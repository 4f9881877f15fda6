"""Feature views of a ViT, from the same forward pass as the attention maps: PCA, similarity, norms.

The engine's hooks (`capture`: every block, and the final norm) copy the tokens the block outputs, so the pass
that records attention also records features: no second forward, O(layers x N x d) memory kept
as float16. The features of layer l are the tokens block l outputs; for the last layer, after the
model's final norm (what timm's `forward_features` returns, DINOv2's `x_norm_patchtokens`).

    with recording(model) as rec:            # around any forward of `model` in this thread
        attention_maps(model, image)
    tokens = rec.tokens                      # float16 (L, N, d) on CPU
    pca(tokens[-1, P:], grid)                # (gh, gw, 3) in [0, 1]
    pca_foreground(tokens[-1, P:], grid)     # DINOv3's notebook: (gh, gw, 3) and the foreground (gh, gw)
    similarity(tokens[-1], grid, (5, 7), P)  # (gh, gw) cosine, 1 at the query
    norms(tokens[-1, P:], grid)              # (gh, gw) L2 norms; high_norm(...) marks outliers
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from attention.errors import InputError
from attention.validate import layer_index
from attention.vit.backbone import describe
from attention.vit.engine import capture
from attention.vit.engine.capture import Recorder
from attention.vit.engine.query import Query

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
    with capture.recording(model, Tokens(describe(model).depth)) as rec:
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


def _oriented(c: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """Component scores c (gh*gw, k), each one's sign flipped where needed so that the grid's border
    (usually background) lies on its low side: colours and foregrounds stable across layers."""
    border = np.ones(grid, bool)
    border[1:-1, 1:-1] = False
    border = border.reshape(-1)
    return np.where(c[border].mean(0) > c.mean(0), -c, c)


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
    c = _unit(_oriented(_components(f, 3), grid))
    if background is not None:
        if not 0 < background < 1:
            raise InputError(f"PCA background threshold {background} is out of range; accepted: 0 to 1, exclusive.")
        fg = c[:, 0] >= background
        c = np.zeros_like(c)
        if fg.sum() >= 3:
            c[fg] = _unit(_components(f[fg], 3))
    return c.reshape(gh, gw, 3).astype(np.float32)


PCA_STYLES = {  # what each PCA colouring is (the CLI's --pca, /feature_maps's pca)
    "minmax": "the first three components of every patch, each min-max scaled (DINOv2's demos)",
    "dinov3": "DINOv3's notebook (pca.ipynb): whitened PCA fitted on the foreground, sigmoid(2x), background black",
}


def check_pca_style(style: str) -> str:
    """`style` when it is a key of PCA_STYLES (any case, trimmed), else InputError listing them."""
    s = (style or "").strip().lower()
    if s not in PCA_STYLES:
        raise InputError(f"PCA style {style!r} is not known; accepted: {', '.join(PCA_STYLES)}.")
    return s


def median3(m: np.ndarray) -> np.ndarray:
    """3 x 3 median filter with zero padding (scipy.signal.medfilt2d's, which DINOv3's notebook applies to
    its foreground scores): float32, the shape of `m` (gh, gw)."""
    gh, gw = m.shape
    p = np.pad(np.asarray(m, np.float32), 1)
    return np.median(np.stack([p[i : i + gh, j : j + gw] for i in range(3) for j in range(3)]), 0)


def foreground(f: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """The foreground patches, bool (gh, gw): our stand-in for the classifier DINOv3's notebook trains
    (a logistic regression on ViT-L features of 9 labelled images, foreground_segmentation.ipynb, that
    ships with no model here). A patch's score is 1 where the first principal component of all patches
    (signed so the grid's border lies on its low side, as `pca` does) is above its mean, else 0; then, as
    the notebook does with its classifier's probabilities, a 3 x 3 median filter and > 0.5."""
    c = _oriented(_components(_check(f, grid), 1), grid)[:, 0]
    return median3((c > 0).astype(np.float32).reshape(grid)) > 0.5


def pca_foreground(f: np.ndarray, grid: tuple[int, int], fg: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """DINOv3's PCA view (notebooks/pca.ipynb): `PCA(n_components=3, whiten=True)` fitted on the foreground
    patches' features, applied to every patch, sigmoid(2x), background set to 0. Returns (rgb float32
    (gh, gw, 3) in [0, 1), fg bool (gh, gw)).

    f: patch features (gh*gw, d) (the notebook's: the last layer after the final norm). fg: bool (gh, gw),
    default `foreground(f, grid)`; with fewer than 4 foreground patches the PCA is fitted on every patch and
    nothing is masked. As scikit-learn computes it: centred on the foreground's mean, each component divided
    by the square root of its variance (ddof 1), signs with each component's largest loading positive."""
    f = _check(f, grid)
    gh, gw = grid
    fg = foreground(f, grid) if fg is None else np.asarray(fg, bool)
    if fg.shape != (gh, gw):
        raise InputError(f"Foreground mask {fg.shape} does not match the {gh}x{gw} patch grid.")
    if fg.sum() < 4:
        fg = np.ones((gh, gw), bool)
    x = f[fg.reshape(-1)].astype(np.float64)
    mean = x.mean(0)
    vals, vecs = np.linalg.eigh((x - mean).T @ (x - mean) / (len(x) - 1))  # ascending
    vals, vecs = vals[::-1][:3], vecs[:, ::-1][:, :3]  # (3,), (d, 3): the top three
    rows = np.abs(vecs).argmax(0)
    vecs = vecs * np.sign(vecs[rows, np.arange(vecs.shape[1])])  # largest loading positive
    proj = (f - mean) @ vecs / np.sqrt(np.maximum(vals, 1e-12))  # (N, 3) whitened
    rgb = 1 / (1 + np.exp(-2 * proj))
    rgb[~fg.reshape(-1)] = 0
    return rgb.reshape(gh, gw, -1).astype(np.float32), fg


def similarity(tokens: np.ndarray, grid: tuple[int, int], query: Query | int, num_prefix: int) -> np.ndarray:
    """Cosine similarity of the query token's feature to every patch's: float32 (gh, gw), 1 at the
    query's own cell. tokens: (P + gh*gw, d), prefix first; query: a token index in the sequence,
    "cls" (token 0) or (row, col)."""
    t = np.asarray(tokens, dtype=np.float32)
    patches = _check(t[num_prefix:], grid)
    if isinstance(query, (int, np.integer)):
        if not 0 <= query < t.shape[0]:
            raise InputError(f"Token {query} is out of range; accepted: 0 to {t.shape[0] - 1}.")
        q = t[query]
    elif query == "cls":
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
    query: Query | int,
    background: float | None = None,
    pca_style: str = "minmax",
):
    """pca (gh, gw, 3), similarity (gh, gw) and norms (gh, gw), float32, of one layer of recorded
    `tokens` (L, P + gh*gw, d); `background`: see `pca`; pca_style "dinov3": the pca is
    `pca_foreground`'s, and "foreground" (gh, gw) bool is added. Raises InputError for a layer off
    the depth, a query off the grid or an unknown style."""
    style = check_pca_style(pca_style)
    t = np.asarray(tokens[layer_index(layer, tokens.shape[0])], dtype=np.float32)
    if style == "dinov3":
        colours, fg = pca_foreground(t[num_prefix:], grid)
    else:
        colours, fg = pca(t[num_prefix:], grid, background=background), None
    out = {"pca": colours, "similarity": similarity(t, grid, query, num_prefix), "norms": norms(t[num_prefix:], grid)}
    return out if fg is None else {**out, "foreground": fg}
