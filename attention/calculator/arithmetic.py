"""The arithmetic of attention in a given float type, and in extended precision where float64 overflows.

    core(q, k, v, scale, keep, dropout, seed, np.float64)   # scores .. head_outputs, as a dict
    wide_core(q, k, v, scale, keep, dropout, seed)         # the same in 80-bit floats + notes

Inputs are finite float64 (the calculator refuses others), yet a product of two entries near 1e200 is
beyond float64 (1.8e308): float64 then turns a score into inf and softmax into 0 or NaN. Softmax needs
only each row's differences to its largest score, so `wide_core` computes every step in x86's 80-bit
long double (`WIDE`, largest 1.2e4932: every score of finite float64 inputs fits) and hands back
float64 with the steps, entries and sizes that do not fit named in notes.
"""

from __future__ import annotations

import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    """Stable softmax over the last axis; -inf entries get weight 0; rows that are all -inf get all 0."""
    finite = np.isfinite(x)
    row_max = np.max(np.where(finite, x, -np.inf), axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(finite, np.exp(np.where(finite, x, 0.0) - row_max), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


FLOAT64_MAX = float(np.finfo(np.float64).max)
# x86's 80-bit long double reaches 1.2e4932: every score of finite float64 inputs (at most 64 x
# (1.8e308)^2 x a finite scale) fits, and softmax on it (after subtracting the row's largest) is exact.
WIDE = np.longdouble if np.finfo(np.longdouble).maxexp >= 16384 else None


def core(q, k, v, scale: float, keep, dropout: float, seed: int, dtype) -> dict[str, np.ndarray]:
    """The arithmetic of attention on per-head q (h, n, d_h), k (h, m, d_h), v (h, m, dv_h) in `dtype`:
    scores, scaled, masked, weights, dropped (h, n, m) and head_outputs (h, n, dv_h)."""
    q, k, v = (a.astype(dtype) for a in (q, k, v))
    scores = q @ k.transpose(0, 2, 1)
    scaled = dtype(scale) * scores
    masked = np.where(keep, scaled, -np.inf).astype(dtype) if keep is not None else scaled.copy()
    weights = softmax(masked)
    dropped = weights
    if dropout > 0:
        kept = np.random.default_rng(seed).random(weights.shape) >= dropout
        dropped = weights * kept / dtype(1.0 - dropout)
    head_outputs = dropped @ v
    return dict(
        scores=scores, scaled=scaled, masked=masked, weights=weights, dropped=dropped, head_outputs=head_outputs
    )


def _entries(where: np.ndarray, values: np.ndarray, cols: str, limit: int = 4) -> str:
    """'query 0, key 0 (about 7.1e399), ...' for the True entries of `where` (h, n, c); from 0, the
    head named when there are several."""
    idx = np.argwhere(where)
    parts = []
    for h, i, j in idx[:limit]:
        head = f"head {h}, " if where.shape[0] > 1 else ""
        size = np.format_float_scientific(values[h, i, j], precision=1, unique=False)
        parts.append(f"{head}query {i}, {cols} {j} (about {size})")
    more = f" and {len(idx) - limit} more" if len(idx) > limit else ""
    return "; ".join(parts) + more


def wide_core(q, k, v, scale: float, keep, dropout: float, seed: int) -> tuple[dict[str, np.ndarray], list[str]]:
    """`core` when a float64 step overflows: computed in extended precision (`WIDE`) and returned
    as float64 (entries beyond float64's range as +-inf), with notes naming the step, the entries and
    why. Without an extended type, the rows that overflow are NaN and the notes say so."""
    top = f"{FLOAT64_MAX:.3g}"
    if WIDE is None:
        with np.errstate(over="ignore", invalid="ignore"):
            parts = core(q, k, v, scale, keep, dropout, seed, np.float64)
        bad = ~np.isfinite(parts["scaled"]) & (True if keep is None else keep) | ~np.isfinite(parts["scores"])
        rows = bad.any(-1)
        for s in ("weights", "dropped"):
            parts[s] = np.where(rows[..., None], np.nan, parts[s])
        parts["head_outputs"] = np.where(rows[..., None], np.nan, parts["head_outputs"])
        where = ", ".join(str(i) for i in np.flatnonzero(rows.any(0)))
        return parts, [
            f"Scores overflow: some exceed float64's largest number ({top}) in query row {where}, and this "
            "machine has no wider float type, so those rows' weights and outputs are not computed (shown as "
            "NaN). Scale Q or K down (softmax(s Q K^T) needs only the scores' differences within a row)."
        ]
    parts = core(q, k, v, scale, keep, dropout, seed, WIDE)
    notes = []
    with np.errstate(over="ignore"):
        out = {s: a.astype(np.float64) for s, a in parts.items()}
    visible = np.broadcast_to(True if keep is None else keep, out["scores"].shape)
    for name, step, cols in (("scores Q K^T", "scores", "key"), ("scaled scores", "scaled", "key")):
        big = ~np.isfinite(out[step]) & visible
        if big.any():
            notes.append(
                f"The {name} exceed float64's largest number ({top}) at {_entries(big, parts[step], cols)}, "
                "so they show as inf. Softmax needs only each row's differences to its largest score, so the "
                "weights and outputs were computed in 80-bit extended precision (largest 1.2e4932): they are "
                "exact, not the 0 or NaN that float64 arithmetic gives there."
            )
            break
    big = ~np.isfinite(out["head_outputs"])
    if big.any():
        notes.append(
            f"The output exceeds float64's largest number ({top}) at {_entries(big, parts['head_outputs'], 'column')} "
            "(a weighted sum of large values), so it shows as inf there; the size of each is given above."
        )
    return out, notes
