"""Check the numpy calculator against PyTorch, in float64.

`check_sdpa` compares `attend` with torch.nn.functional.scaled_dot_product_attention;
`check_mha` compares `attend_from_x` with torch.nn.MultiheadAttention given the same
weights (no biases). Dropout is random in both, with different generators, so the
checks compare the attention before dropout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.calculator.steps import ProjectedSteps, Steps, merge_heads

TOLERANCE = 1e-6


@dataclass(frozen=True)
class Check:
    """The result of one comparison: `max_abs_diff` is None when the check does not apply."""

    reference: str
    max_abs_diff: float | None
    message: str

    @property
    def ok(self) -> bool | None:
        return None if self.max_abs_diff is None else self.max_abs_diff <= TOLERANCE


def _undropped(steps: Steps) -> np.ndarray:
    """Output (n, d_v) without dropout: weights @ V per head, heads concatenated."""
    return merge_heads(steps.weights @ steps.v)


def _verdict(reference: str, diff: float, extra: str = "") -> Check:
    sign = "✔ equal to" if diff <= TOLERANCE else "✘ differs from"
    return Check(reference, diff, f"{sign} {reference} within {TOLERANCE:g} (max |difference| = {diff:.1e}){extra}")


def sdpa_output(steps: Steps) -> np.ndarray:
    """torch.nn.functional.scaled_dot_product_attention on the same per-head Q, K, V, scale and mask: (n, d_v)."""
    import torch
    import torch.nn.functional as F

    q, k, v = (torch.from_numpy(np.ascontiguousarray(a))[None] for a in (steps.q, steps.k, steps.v))
    mask = None if steps.mask is None else torch.from_numpy(steps.mask)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=steps.scale)
    return merge_heads(out[0].numpy())


def _compare(reference: str, theirs: np.ndarray, ours: np.ndarray, rows: np.ndarray, extra: str) -> Check:
    """Compare output rows `rows` of `theirs` and `ours` (n, d): rows where either is not finite are
    skipped and named (torch's float64 kernel gives NaN where scores exceed 1.8e308; the calculator
    computes those rows in extended precision, see `steps.attend`), never a NaN difference."""
    finite = np.isfinite(theirs).all(1) & np.isfinite(ours).all(1)
    skipped = [r for r in rows if not finite[r]]
    rows = np.array([r for r in rows if finite[r]], dtype=int)
    if skipped:
        names = ", ".join(str(r) for r in skipped)
        extra += (
            f"; row {names} skipped: there torch's float64 arithmetic overflows (scores or outputs beyond "
            "1.8e308) and gives NaN or inf, see the notes"
        )
    if len(rows) == 0:
        return Check(reference, None, f"{reference} check does not apply{extra.replace('; row', ': row', 1)}")
    return _verdict(reference, float(np.max(np.abs(theirs[rows] - ours[rows]))), extra)


def check_sdpa(steps: Steps) -> Check:
    """Compare the calculator's output with torch's scaled_dot_product_attention."""
    ours = _undropped(steps)
    extra = " (compared before dropout, which is random)" if steps.dropout > 0 else ""
    ref = "torch.nn.functional.scaled_dot_product_attention"
    return _compare(ref, sdpa_output(steps), ours, np.arange(len(ours)), extra)


def mha_output(p: ProjectedSteps) -> np.ndarray:
    """torch.nn.MultiheadAttention (no biases) with W_q, W_k, W_v, W_o loaded: (n, d_model).

    Needs every weight d_model x d_model and the default scale (see `check_mha`).
    Rows whose every key is masked come out NaN from torch.
    """
    import torch

    e, heads = p.x.shape[1], p.attention.heads
    mha = torch.nn.MultiheadAttention(e, heads, bias=False, batch_first=True, dtype=torch.float64)
    w_o = p.w_o if p.w_o is not None else np.eye(e)
    with torch.no_grad():  # torch computes x @ W.T, the calculator x @ W
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([p.w_q.T, p.w_k.T, p.w_v.T])))
        mha.out_proj.weight.copy_(torch.from_numpy(np.ascontiguousarray(w_o.T)))
        mask = None
        if p.attention.mask is not None:  # an additive float mask: 0 where allowed, -inf where not
            mask = torch.from_numpy(np.where(p.attention.mask, 0.0, -np.inf))
        x = torch.from_numpy(p.x)[None]
        out, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    return out[0].numpy()


def check_mha(p: ProjectedSteps) -> Check:
    """Compare the X mode with torch.nn.MultiheadAttention, or say why the comparison does not apply."""
    ref = "torch.nn.MultiheadAttention"
    e = p.x.shape[1]
    shapes = [p.w_q.shape, p.w_k.shape, p.w_v.shape] + ([p.w_o.shape] if p.w_o is not None else [])
    if any(s != (e, e) for s in shapes):
        return Check(
            ref, None, f"{ref} check does not apply: it needs every weight to be d_model x d_model = {e} x {e}"
        )
    if not np.isclose(p.attention.scale, 1 / np.sqrt(e // p.attention.heads)):
        return Check(ref, None, f"{ref} check does not apply: it always scales by 1/sqrt(d_head)")
    w_o = p.w_o if p.w_o is not None else np.eye(e)
    ours = _undropped(p.attention) @ w_o
    rows = np.setdiff1d(np.arange(len(ours)), p.attention.empty_rows)
    extra = " (compared before dropout, which is random)" if p.attention.dropout > 0 else ""
    if len(rows) < len(ours):
        extra += "; rows with every key masked skipped: torch returns NaN there"
    if len(rows) == 0:
        return Check(ref, None, f"{ref} check does not apply: every row is fully masked")
    return _compare(f"{ref} with the same weights", mha_output(p), ours, rows, extra)
