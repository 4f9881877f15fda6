"""The calculator's form: what a visitor sets, as a `Settings` for `report.compute`, and back.

The form shows human labels ("1/√d_head", "causal", ...); `read_settings` turns the form's
settings into one `Settings` (checked there), `run_form` picks the matrices the chosen mode
needs and computes. `preset_form` gives the values a preset puts in the form. `readable`
and `custom_mask_start` help the form carry values over between its text and table editors
and start a custom mask from the causal one; `diagnose` names the inputs to mark when a
calculation fails. Matrices in the form are text, table rows (lists of cells) or arrays (rows, cols).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from attention.calculator.matrices import format_cells, format_matrix, parse_matrix
from attention.calculator.presets import Preset
from attention.calculator.report import DIRECT, FROM_X, Result, compute
from attention.calculator.settings import Settings, causal_mask
from attention.errors import AttentionError, FieldError, InputError, blame

MODE_LABELS = {"Q, K, V directly": DIRECT, "From X: Q = X W_q, K = X W_k, V = X W_v": FROM_X}
SCALE_LABELS = {"1/√d_head": "default", "none (1)": "none", "custom": "custom"}
MASK_LABELS = {"none": "none", "causal": "causal", "custom 0/1": "custom"}
# Settings' fields the form shows as labels -> (labels, the setting named in errors)
LABELLED = {"scale_mode": (SCALE_LABELS, "scale"), "mask_mode": (MASK_LABELS, "mask")}
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


def read_settings(values: Mapping[str, object]) -> Settings:
    """The form's settings as one `Settings`: `values` maps Settings' fields (heads, scale_mode, scale,
    mask_mode, mask, dropout, seed) to what the form holds, the two modes as their labels (SCALE_LABELS,
    MASK_LABELS); a field left out takes Settings' default. A bad value raises FieldError naming it."""
    v = dict(values)
    for k, (labels, what) in LABELLED.items():
        if k in v:
            with blame(what):
                v[k] = _key(labels, v[k], what)
    return Settings(**v)


def form_values(s: Settings) -> dict[str, object]:
    """The inverse of `read_settings`: Settings' fields -> what the form shows (labels, the mask as text)."""
    shown = {k: _label(labels, getattr(s, k)) for k, (labels, _) in LABELLED.items()}
    mask = "" if s.mask is None else format_matrix(np.asarray(s.mask, dtype=float))
    return {"heads": s.heads, "scale": s.scale, "dropout": s.dropout, "seed": s.seed, **shown, "mask": mask}


def run_form(matrices: Mapping[str, object], mode_label: str, settings: Settings, use_wo: bool = False) -> Result:
    """`compute` in the mode a form's label names: `matrices` (name -> text, table rows or array) may
    hold every editor's value; only those `needed(mode_label, use_wo)` are read."""
    mode = _key(MODE_LABELS, mode_label, "mode")
    return compute({n: matrices[n] for n in needed(mode_label, use_wo)}, settings, mode=mode)


def diagnose(
    matrices: Mapping[str, object], mode_label: str, values: Mapping[str, object], use_wo: bool = False
) -> tuple[str, tuple[str, ...]]:
    """Why `run_form(matrices, mode_label, read_settings(values), use_wo)` fails: its message and the
    inputs to blame, matrix names ("Q", "W_k", ...) or settings ("heads", "scale", "mask", "dropout",
    "seed"); ("", ()) when it runs."""
    try:
        run_form(matrices, mode_label, read_settings(values), use_wo)
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
    """The form's values for a preset: description, mode_label, use_wo, matrices (name -> array
    (rows, cols)) and settings (`form_values` of the preset's settings)."""
    return {
        "description": p.description,
        "mode_label": _label(MODE_LABELS, p.mode),
        "use_wo": "W_o" in p.matrices,
        "matrices": dict(p.matrices),
        "settings": form_values(p.settings),
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
