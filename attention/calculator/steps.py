"""Scaled dot-product and multi-head attention, step by step, in plain numpy.

    scores  = Q_h K_h^T                      (heads, n, m)
    scaled  = scale * scores                  scale defaults to 1/sqrt(d_head)
    masked  = scaled, -inf where the mask forbids a query-key pair
    weights = softmax(masked) over keys       rows sum to 1
    output  = concat_h(weights_h V_h)        (n, d_v)

Heads split the columns of Q, K (d) and V (d_v) evenly: head h uses columns
h*d/heads .. (h+1)*d/heads - 1, as torch.nn.MultiheadAttention does. Heads, scale, mask
(none, causal: query i sees keys 0..i like torch's is_causal, or an (n, m) 0/1 matrix where
1 means "may attend", torch's boolean attn_mask convention), dropout and seed come as one
`Settings` (attention.calculator.settings), checked when it was built.

Every array is float64. Bad input raises `InputError` naming the shapes and the rule;
inputs that do not fit together raise its subclass `FieldError` (attention.errors), whose
`fields` name the inputs involved as a form would ("Q", "W_k", "heads", "mask").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.calculator.arithmetic import FLOAT64_MAX, WIDE, core, wide_core
from attention.calculator.matrices import MAX_SIZE, check_matrix
from attention.calculator.settings import Settings
from attention.errors import FieldError


@dataclass(frozen=True)
class Steps:
    """Every intermediate of attention. h = heads, n queries, m keys, d_h / dv_h per head.

    q (h, n, d_h), k (h, m, d_h), v (h, m, dv_h): the per-head slices of Q, K, V.
    scores, scaled, masked, weights, dropped: (h, n, m); `masked` holds -inf where the
    mask forbids; `weights` rows sum to 1 (rows with no visible key are all 0, see
    `notes`); `dropped` is `weights` after dropout (the same array when dropout is 0).
    head_outputs (h, n, dv_h) = dropped @ v; output (n, d_v): heads concatenated.
    mask: bool (n, m), True = may attend, or None. notes: plain-language remarks.
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scale: float
    mask: np.ndarray | None
    scores: np.ndarray
    scaled: np.ndarray
    masked: np.ndarray
    weights: np.ndarray
    dropped: np.ndarray
    head_outputs: np.ndarray
    output: np.ndarray
    dropout: float
    seed: int
    notes: tuple[str, ...]

    @property
    def heads(self) -> int:
        return self.scores.shape[0]

    @property
    def empty_rows(self) -> np.ndarray:
        """Indices of queries whose every key is masked (their weights are defined as 0)."""
        return np.flatnonzero(~self.mask.any(axis=1)) if self.mask is not None else np.array([], dtype=int)


@dataclass(frozen=True)
class ProjectedSteps:
    """Self-attention computed from inputs X: Q = X W_q, K = X W_k, V = X W_v.

    x (n, d_model); w_q, w_k (d_model, d); w_v (d_model, d_v); w_o (d_v, d_out) or None.
    q, k (n, d), v (n, d_v): the projections; attention: the Steps on them;
    concat (n, d_v): the heads' outputs side by side; output (n, d_out) = concat @ w_o
    (concat itself when there is no w_o).
    """

    x: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray | None
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    attention: Steps
    output: np.ndarray

    @property
    def concat(self) -> np.ndarray:
        return self.attention.output


def split_heads(a: np.ndarray, heads: int) -> np.ndarray:
    """(rows, heads * c) -> (heads, rows, c): head h takes columns h*c .. (h+1)*c - 1."""
    rows, cols = a.shape
    return a.reshape(rows, heads, cols // heads).transpose(1, 0, 2)


def merge_heads(a: np.ndarray) -> np.ndarray:
    """(heads, rows, c) -> (rows, heads * c): the inverse of split_heads."""
    h, rows, c = a.shape
    return a.transpose(1, 0, 2).reshape(rows, h * c)


def _shape(a: np.ndarray) -> str:
    return f"{a.shape[0]} x {a.shape[1]}"


def _notes(steps: dict, mask: np.ndarray | None, causal: bool) -> list[str]:
    notes = []
    if mask is not None and (~mask.any(axis=1)).any():
        rows = ", ".join(str(i) for i in np.flatnonzero(~mask.any(axis=1)))
        notes.append(
            f"Query row {rows} can see no key (every entry masked). The softmax of a row of "
            "-inf is 0/0, undefined; here its weights are 0 and its output is 0, as in "
            "torch.nn.functional.scaled_dot_product_attention."
        )
    masked = steps["masked"]
    visible = np.isfinite(masked)
    if visible.any(-1).all():
        lo = np.min(np.where(visible, masked, np.inf), -1)
        hi = np.max(np.where(visible, masked, -np.inf), -1)
        if np.allclose(hi - lo, 0.0, atol=1e-12):
            s = (
                "Every row's scores are equal, so softmax spreads the weight evenly over the keys a query "
                "can see: each output row is the plain average of the visible values"
            )
            notes.append(s + (" (with the causal mask: the running mean of V, a 'bag of words')." if causal else "."))
    return notes


def attend(
    Q: np.ndarray,
    K: np.ndarray,
    V: np.ndarray,
    settings: Settings = Settings(),
    *,
    max_size: int | None = MAX_SIZE,
) -> Steps:
    """Scaled dot-product attention of Q (n, d) on K (m, d) and V (m, d_v), every step kept.

    `settings` (checked when built): heads must divide d and d_v; the scale is 1/sqrt(d / heads),
    1 or custom; the mask none, causal or a custom (n, m) 0/1 matrix; dropout in [0, 1) drops
    weights with a generator seeded by `settings.seed` and rescales the rest by 1/(1 - dropout),
    as torch does. Matrices are bounded by `max_size` rows and columns (None: unbounded).
    """
    Q, K, V = (check_matrix(a, nm, max_size=max_size) for a, nm in ((Q, "Q"), (K, "K"), (V, "V")))
    (n, d), (m, dk), (mv, dv) = Q.shape, K.shape, V.shape
    if d != dk:
        raise FieldError(
            f"Q is {_shape(Q)} and K is {_shape(K)}: Q and K need the same number of columns "
            f"(d), because the scores are Q K^T",
            ("Q", "K"),
        )
    if m != mv:
        raise FieldError(
            f"K is {_shape(K)} and V is {_shape(V)}: K and V need the same number of rows (one value row per key)",
            ("K", "V"),
        )
    heads, dropout, seed = settings.heads, settings.dropout, settings.seed
    if d % heads or dv % heads:
        raise FieldError(
            f"{heads} heads must split d = {d} (columns of Q and K) and d_v = {dv} (columns of V) "
            f"evenly; choose a number of heads that divides both",
            ("heads",),
        )
    scale = settings.scale_for(d // heads)
    keep = settings.mask_for(n, m)

    q, k, v = split_heads(Q, heads), split_heads(K, heads), split_heads(V, heads)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is looked for below, and named
        parts = core(q, k, v, float(scale), keep, dropout, seed, np.float64)
    seen = np.broadcast_to(True if keep is None else keep, parts["scores"].shape)  # entries a query may see
    wide = not all(np.isfinite(parts[s][seen]).all() for s in ("scores", "scaled"))
    wide = wide or not np.isfinite(parts["head_outputs"]).all()
    overflow_notes: list[str] = []
    if wide:  # a step left float64's range: redo it where the range is wide enough, and say so
        parts, overflow_notes = wide_core(q, k, v, float(scale), keep, dropout, seed)
    scores, scaled, masked, weights, dropped, head_outputs = (
        parts[s] for s in ("scores", "scaled", "masked", "weights", "dropped", "head_outputs")
    )
    steps = dict(scores=scores, scaled=scaled, masked=masked, weights=weights)
    notes = overflow_notes + _notes(steps, keep, settings.mask_mode == "causal")
    if dropout > 0:
        notes.append(
            f"Dropout p = {dropout:g} (seed {seed}) zeroed {int((dropped == 0).sum() - (weights == 0).sum())} "
            f"weights and multiplied the rest by 1/(1 - p) = {1 / (1 - dropout):.4g}; rows of the "
            "dropped weights no longer sum to 1 (only during training)."
        )
    return Steps(
        q=q,
        k=k,
        v=v,
        scale=float(scale),
        mask=keep,
        dropped=dropped,
        head_outputs=head_outputs,
        output=merge_heads(head_outputs),
        dropout=dropout,
        seed=seed,
        notes=tuple(notes),
        **steps,
    )


def attend_from_x(
    X: np.ndarray,
    W_q: np.ndarray,
    W_k: np.ndarray,
    W_v: np.ndarray,
    W_o: np.ndarray | None = None,
    settings: Settings = Settings(),
    *,
    max_size: int | None = MAX_SIZE,
) -> ProjectedSteps:
    """Self-attention of X (n, d_model): Q = X W_q, K = X W_k, V = X W_v, then `attend` with `settings`.

    W_q, W_k: (d_model, d); W_v: (d_model, d_v); W_o: (d_v, d_out) or None. The heads'
    outputs are concatenated to (n, d_v) before W_o, as in multi-head attention.
    """
    X = check_matrix(X, "X", max_size=max_size)
    ws = {nm: check_matrix(w, nm, max_size=max_size) for nm, w in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v))}
    for nm, w in ws.items():
        if w.shape[0] != X.shape[1]:
            raise FieldError(
                f"X is {_shape(X)} and {nm} is {_shape(w)}: {nm} needs as many rows as X has "
                f"columns (d_model = {X.shape[1]}), because {nm[-1].upper()} = X {nm}",
                ("X", nm),
            )
    if ws["W_q"].shape[1] != ws["W_k"].shape[1]:
        raise FieldError(
            f"W_q is {_shape(ws['W_q'])} and W_k is {_shape(ws['W_k'])}: they need the same number "
            "of columns (d), so that Q and K can be compared in Q K^T",
            ("W_q", "W_k"),
        )
    with np.errstate(over="ignore", invalid="ignore"):
        q, k, v = X @ ws["W_q"], X @ ws["W_k"], X @ ws["W_v"]
    for nm, a in (("W_q", q), ("W_k", k), ("W_v", v)):
        if not np.isfinite(a).all():
            i, j = np.argwhere(~np.isfinite(a))[0]
            exact = X[i].astype(WIDE or np.float64) @ ws[nm][:, j]
            exact = np.format_float_scientific(exact, precision=1, unique=False)
            raise FieldError(
                f"{nm[-1].upper()} = X {nm} exceeds float64's largest number ({FLOAT64_MAX:.3g}) at row {i}, "
                f"column {j} (about {exact}); scale X or {nm} down",
                ("X", nm),
            )
    steps = attend(q, k, v, settings, max_size=None)
    output = steps.output
    if W_o is not None:
        W_o = check_matrix(W_o, "W_o", max_size=max_size)
        if W_o.shape[0] != v.shape[1]:
            raise FieldError(
                f"W_o is {_shape(W_o)} but the concatenated heads are {_shape(output)}: W_o needs "
                f"as many rows as W_v has columns (d_v = {v.shape[1]}), because output = concat W_o",
                ("W_o",),
            )
        output = output @ W_o
    return ProjectedSteps(
        x=X,
        q=q,
        k=k,
        v=v,
        attention=steps,
        output=output,
        w_o=W_o,
        **{"w_q": ws["W_q"], "w_k": ws["W_k"], "w_v": ws["W_v"]},
    )
