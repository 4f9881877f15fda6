"""The calculator's form: what a visitor sets, as settings for `report.compute`, and back.

The form shows human labels ("1/√d_head", "causal", ...); `run_form` turns them into the
keys `run` takes and picks the matrices the chosen mode needs. `preset_form` gives the
values a preset puts in the form. `readable` and `custom_mask_start` help the form carry
values over between its text and table editors and start a custom mask from the causal one;
`diagnose` names the inputs to mark when a calculation fails.
Matrices in the form are text, table rows (lists of cells) or arrays (rows, cols).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from attention.calculator.matrices import format_cells, format_matrix, parse_matrix
from attention.calculator.presets import Preset
from attention.calculator.report import DIRECT, FROM_X, Result, compute
from attention.calculator.steps import FieldError, causal_mask
from attention.errors import AttentionError, InputError

MODE_LABELS = {"Q, K, V directly": DIRECT, "From X: Q = X W_q, K = X W_k, V = X W_v": FROM_X}
SCALE_LABELS = {"1/√d_head": "default", "none (1)": "none", "custom": "custom"}
MASK_LABELS = {"none": "none", "causal": "causal", "custom 0/1": "custom"}
MATRICES = {DIRECT: ("Q", "K", "V"), FROM_X: ("X", "W_q", "W_k", "W_v", "W_o")}  # W_o is optional
MODE_ABOUT = {  # what a mode computes, shown instead of a preset's description written for the other mode
    DIRECT: "Your own Q (n x d), K (m x d) and V (m x d_v): each query scores every key, softmax turns each "
    "row of scores into weights, and each output row is the weighted mix of the rows of V.",
    FROM_X: "Your own tokens X (n x d_model) and weights W_q, W_k (d_model x d) and W_v (d_model x d_v): "
    "Q = X W_q, K = X W_k and V = X W_v, then attention as in the direct mode; tick W_o to project the "
    "concatenated heads.",
}


def _key(labels: dict[str, str], label: str, what: str) -> str:
    if label not in labels:
        raise InputError(f"{what} '{label}' is not offered; choose one of: {', '.join(labels)}")
    return labels[label]


def _label(labels: dict[str, str], key: str) -> str:
    return next(label for label, k in labels.items() if k == key)


def needed(mode_label: str, use_wo: bool = False) -> tuple[str, ...]:
    """Names of the matrices a mode reads: Q, K, V; or X, W_q, W_k, W_v and, with `use_wo`, W_o."""
    mode = _key(MODE_LABELS, mode_label, "mode")
    names = MATRICES[mode]
    return names if mode == DIRECT else names[:4] + (("W_o",) if use_wo else ())


def run_form(
    matrices: Mapping[str, object],
    *,
    mode_label: str,
    use_wo: bool = False,
    heads: float = 1,
    scale_label: str = "1/√d_head",
    scale: float = 1.0,
    mask_label: str = "none",
    mask: object = "",
    dropout: float = 0.0,
    seed: float = 0,
) -> Result:
    """`run` with the form's labels: `matrices` (name -> text, table rows or array) may hold every
    editor's value; only those `needed(mode_label, use_wo)` are read."""
    return compute(
        {n: matrices[n] for n in needed(mode_label, use_wo)},
        mode=MODE_LABELS[mode_label],
        heads=heads,
        scale_mode=_key(SCALE_LABELS, scale_label, "scale"),
        scale=scale,
        mask_mode=_key(MASK_LABELS, mask_label, "mask"),
        mask=mask,
        dropout=dropout,
        seed=seed,
    )


def diagnose(matrices: Mapping[str, object], **settings: object) -> tuple[str, tuple[str, ...]]:
    """Why `run_form(matrices, **settings)` fails: its message and the inputs to blame, matrix names
    ("Q", "W_k", ...) or settings ("heads", "scale", "mask", "dropout", "seed"); ("", ()) when it runs."""
    try:
        run_form(matrices, **settings)
    except FieldError as e:
        return str(e), e.fields
    except AttentionError as e:
        return str(e), ()
    return "", ()


def table(a: np.ndarray) -> dict[str, list]:
    """A matrix (rows, cols) as a table editor shows it: `value` (rows of strings) and `headers` '0'..'cols - 1'."""
    a = np.atleast_2d(a)
    return {"value": format_cells(a), "headers": [str(j) for j in range(a.shape[1])]}


def preset_form(p: Preset) -> dict[str, object]:
    """The form's values for a preset: description, mode_label, heads, scale_label, scale, mask_label,
    mask (text, blank when none), dropout (0), use_wo, and matrices (name -> array (rows, cols))."""
    return {
        "description": p.description,
        "mode_label": _label(MODE_LABELS, p.mode),
        "heads": p.heads,
        "scale_label": _label(SCALE_LABELS, p.scale_mode),
        "scale": p.scale,
        "mask_label": _label(MASK_LABELS, p.mask_mode),
        "mask": "" if p.mask is None else format_matrix(p.mask),
        "dropout": 0.0,
        "use_wo": "W_o" in p.matrices,
        "matrices": dict(p.matrices),
    }


def about(p: Preset, mode_label: str) -> str:
    """The text above the matrices: the preset's description while its mode is chosen, else MODE_ABOUT's."""
    mode = _key(MODE_LABELS, mode_label, "mode")
    return p.description if p.mode == mode else MODE_ABOUT[mode]


def first_matrices(presets: Mapping[str, Preset]) -> dict[str, np.ndarray]:
    """Every matrix name any preset uses -> its array in the first preset that has it."""
    return {n: a for p in reversed(list(presets.values())) for n, a in p.matrices.items()}


def readable(values: Mapping[str, object]) -> dict[str, np.ndarray]:
    """The values that parse as matrices (name -> array (rows, cols)); unreadable ones are left out."""
    out = {}
    for n, v in values.items():
        try:
            out[n] = parse_matrix(v, n)
        except AttentionError:
            continue
    return out


def custom_mask_start(mask_label: str, mask: str, mode_label: str, matrices: Mapping[str, object]) -> str | None:
    """When "custom 0/1" is chosen and the mask is blank: the causal pattern (n, m) as text, where
    n = rows of Q (or X) and m = rows of K (or n); None otherwise or when those matrices do not parse."""
    if _key(MASK_LABELS, mask_label, "mask") != "custom" or mask.strip():
        return None
    x_mode = _key(MODE_LABELS, mode_label, "mode") == FROM_X
    try:
        n = parse_matrix(matrices["X" if x_mode else "Q"]).shape[0]
        m = n if x_mode else parse_matrix(matrices["K"]).shape[0]
    except AttentionError:
        return None
    return format_matrix(causal_mask(n, m).astype(float))
