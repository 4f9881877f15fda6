"""The calculator as a user or an API caller drives it: text in; JSON and an HTML report out.

`compute` reads matrices (text, table rows or arrays), computes the steps with one `Settings`
and checks them against PyTorch. `to_json` gives JSON-friendly data (-inf as null); `to_html`
a self-contained report: per step its formula, and per head a heatmap and, for matrices of at
most TABLE_MAX rows and columns, a table (bigger ones are heatmaps only: their tables would
cost seconds and megabytes; every value is in `to_json`). `report` gives what the calculator
tab shows: checks, notes and the HTML.
"""

from __future__ import annotations

import base64
import functools
import html
from dataclasses import dataclass
from importlib import resources

import numpy as np

from attention.calculator.matrices import format_number, parse_matrix
from attention.calculator.plots import heatmap
from attention.calculator.reference import Check, check_mha, check_sdpa
from attention.calculator.settings import Settings
from attention.calculator.steps import ProjectedSteps, Steps, attend, attend_from_x
from attention.errors import InputError, blame, html_text
from attention.render import png_bytes

DIRECT, FROM_X = "direct", "x"
TABLE_MAX = 16  # matrices with more rows or columns are shown as heatmaps only


@dataclass(frozen=True)
class Result:
    """A calculation: `steps` always; `projected` in the X mode; `checks` against PyTorch."""

    steps: Steps
    projected: ProjectedSteps | None
    checks: tuple[Check, ...]


def _blank(value) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    rows = value.tolist() if isinstance(value, np.ndarray) else list(value)
    return all(c is None or str(c).strip() == "" for r in rows for c in (r if isinstance(r, (list, tuple)) else [r]))


def compute(matrices: dict, settings: Settings = Settings(), *, mode: str = DIRECT) -> Result:
    """Compute attention from `matrices` (name -> text, table rows or array) with `settings`.

    mode "direct": Q, K, V; mode "x": X, W_q, W_k, W_v and optional W_o (blank = none).
    A bad matrix raises `FieldError` (an InputError) naming the inputs at fault.
    """
    if mode not in (DIRECT, FROM_X):
        raise InputError(f"mode '{mode}' is not known; use 'direct' (Q, K, V) or 'x' (X and weights)")
    names = ("Q", "K", "V") if mode == DIRECT else ("X", "W_q", "W_k", "W_v")
    missing = [n for n in names if n not in matrices]
    if missing:
        raise InputError(f"missing matrix {', '.join(missing)}; the {mode} mode needs {', '.join(names)}")
    m = []
    for n in names:
        with blame(n):
            m.append(parse_matrix(matrices[n], n))
    if mode == DIRECT:
        steps = attend(*m, settings)
        return Result(steps, None, (check_sdpa(steps),))
    w_o = matrices.get("W_o")
    with blame("W_o"):
        w_o = None if _blank(w_o) else parse_matrix(w_o, "W_o")
    p = attend_from_x(*m, w_o, settings)
    return Result(p.attention, p, (check_sdpa(p.attention), check_mha(p)))


# --- JSON ------------------------------------------------------------------------------------
def _json(a: np.ndarray, masked: bool = False) -> list:
    """Nested lists of floats (strict JSON): in the masked scores -inf (masked) becomes None (null);
    other non-finite entries (beyond float64's range, named in the notes) become "inf", "-inf" or "nan"."""
    out = a.astype(object)
    for bad, text in ((np.isposinf(a), "inf"), (np.isneginf(a), "-inf"), (np.isnan(a), "nan")):
        out[bad] = text
    if masked:
        out[np.isneginf(a)] = None
    return out.tolist()


def to_json(r: Result) -> dict:
    """JSON-friendly dict: per-head step arrays (heads, n, m), output (n, d_v), notes and checks."""
    s = r.steps
    out = {
        "heads": s.heads,
        "scale": s.scale,
        "mask": None if s.mask is None else s.mask.astype(int).tolist(),
        "scores": _json(s.scores),
        "scaled": _json(s.scaled),
        "masked": _json(s.masked, masked=True),
        "weights": _json(s.weights),
        "output": _json(s.output),
        "notes": list(s.notes),
        "checks": [
            {"reference": c.reference, "max_abs_diff": c.max_abs_diff, "ok": c.ok, "message": c.message}
            for c in r.checks
        ],
        "legend": (
            "arrays of steps are [head][query][key]; null = masked (-inf); mask 1 = may attend; "
            '"inf" / "-inf" = beyond float64\'s range (see notes)'
        ),
    }
    if s.dropout > 0:
        out["dropout"] = {"p": s.dropout, "seed": s.seed, "weights_after_dropout": _json(s.dropped)}
    if r.projected is not None:
        p = r.projected
        out.update(Q=_json(p.q), K=_json(p.k), V=_json(p.v), concat=_json(p.concat), output=_json(p.output))
    return out


# --- HTML report -----------------------------------------------------------------------------
FORMULAS = {
    "scores": "scores = Q<sub>h</sub> K<sub>h</sub><sup>T</sup> &nbsp; (query i · key j)",
    "scaled": "scaled = scale × scores",
    "masked": "masked = scaled, with −∞ where the mask forbids (query i may not see key j)",
    "weights": "weights = softmax(masked) over each row: e<sup>x<sub>ij</sub> − max<sub>i</sub></sup> / "
    "Σ<sub>j</sub> e<sup>x<sub>ij</sub> − max<sub>i</sub></sup> &nbsp; (rows sum to 1)",
    "dropped": "dropped = weights × keep / (1 − p), keep ~ Bernoulli(1 − p), seeded",
    "output": "output<sub>h</sub> = weights<sub>h</sub> V<sub>h</sub>; "
    "output = [output<sub>1</sub> … output<sub>H</sub>]",
}
_CSS = "<style>" + (resources.files("attention.calculator") / "report.css").read_text() + "</style>"


def png_data_uri(rgb: np.ndarray) -> str:
    """A uint8 RGB image as a data: URI (PNG)."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(rgb)).decode()


def table_html(a: np.ndarray, rows: str = "q", cols: str = "k") -> str:
    """An (r, c) matrix as an HTML table with labelled rows and columns; -inf shown as '-inf'."""
    head = "".join(f"<th>{cols}{j}</th>" for j in range(a.shape[1]))
    body = "".join(
        f"<tr><th>{rows}{i}</th>"
        + "".join("<td class='qkv-inf'>−inf</td>" if np.isneginf(x) else f"<td>{format_number(x)}</td>" for x in row)
        + "</tr>"
        for i, row in enumerate(a)
    )
    return f"<div class='qkv-tab'><table><tr><th></th>{head}</tr>{body}</table></div>"


def _too_big(shape: tuple[int, ...], table_max: int | None) -> bool:
    return table_max is not None and max(shape) > table_max


def _card(
    title: str,
    formula: str,
    stack: np.ndarray,
    *,
    cols: str = "k",
    rows: str = "q",
    vmin: float | None = None,
    vmax: float | None = None,
    names: list[str] | None = None,
    table_max: int | None = TABLE_MAX,
) -> str:
    heads = []
    for i, a in enumerate(stack):
        name = names[i] if names else (f"head {i}" if len(stack) > 1 else "")
        finite = a[np.isfinite(a)]
        lo = vmin if vmin is not None else (finite.min() if finite.size else 0)
        hi = vmax if vmax is not None else (finite.max() if finite.size else 0)
        img = png_data_uri(heatmap(a, vmin=vmin, vmax=vmax, target=180, max_cell=40))
        big = _too_big(a.shape, table_max)
        size = f" · {a.shape[0]} x {a.shape[1]}, no table" if big else ""
        heads.append(
            f"<div class='qkv-head'><b>{html.escape(name)}</b><br><img src='{img}' alt='{html.escape(title)} "
            f"{html.escape(name)} heatmap'><div class='qkv-legend'>dark {format_number(lo)} → bright "
            f"{format_number(hi)}{size}</div>{'' if big else table_html(a, rows, cols)}</div>"
        )
    return (
        f"<div class='qkv-card'><h4>{html.escape(title)}</h4><div class='qkv-f'>{formula}</div>"
        f"<div class='qkv-heads'>{''.join(heads)}</div></div>"
    )


def to_html(r: Result, table_max: int | None = TABLE_MAX) -> str:
    """The whole report: projections (X mode), then every step per head, then the output.

    Matrices with more than `table_max` rows or columns get a heatmap but no table, and the
    report opens with a note saying so (None: tables for every size).
    """
    s, p, cards = r.steps, r.projected, []
    card = functools.partial(_card, table_max=table_max)
    if p is not None:
        cards.append(
            card(
                "0. Projections",
                "Q = X W<sub>q</sub>, K = X W<sub>k</sub>, V = X W<sub>v</sub>",
                [p.q, p.k, p.v],
                rows="x",
                cols="",
                names=["Q", "K", "V"],
            )
        )
    cards.append(card("1. Scores", FORMULAS["scores"], s.scores))
    cards.append(card("2. Scaled", FORMULAS["scaled"] + f" = {format_number(s.scale, 6)} × scores", s.scaled))
    if s.mask is not None:
        cards.append(
            card("3. Masked", FORMULAS["masked"] + " <span class='qkv-legend'>(striped = −∞)</span>", s.masked)
        )
    else:
        cards.append("<div class='qkv-card'><h4>3. Masked</h4><div class='qkv-f'>no mask: masked = scaled</div></div>")
    cards.append(card("4. Softmax weights", FORMULAS["weights"], s.weights, vmin=0.0, vmax=1.0))
    if s.dropout > 0:
        cards.append(
            card("4b. Dropout", FORMULAS["dropped"] + f", p = {s.dropout:g}, seed {s.seed}", s.dropped, vmin=0.0)
        )
    cards.append(card("5. Output", FORMULAS["output"], s.head_outputs if s.heads > 1 else s.output[None], cols="v"))
    if s.heads > 1:
        cards.append(
            card(
                "5b. Heads concatenated",
                "output = [output<sub>1</sub> … output<sub>H</sub>]",
                s.output[None],
                cols="v",
                names=["concat"],
            )
        )
    if p is not None and p.w_o is not None:
        cards.append(
            card("6. Output projection", "output = concat W<sub>o</sub>", p.output[None], cols="o", names=["output"])
        )
    shown = [s.scores[0], s.output] + ([p.q, p.k, p.v, p.output] if p is not None else [])
    largest = max(shown, key=lambda a: max(a.shape)).shape
    note = (
        ""
        if not _too_big(largest, table_max)
        else (
            f"<p class='qkv-note'>The largest matrix here is {largest[0]} x {largest[1]}: "
            f"matrices over {table_max} rows or columns are shown as heatmaps only, without tables. "
            "Every value is in the JSON that the API endpoints /calculate and /calculate_from_x return.</p>"
        )
    )
    return _CSS + note + "<div class='qkv-steps'>" + "".join(cards) + "</div>"


def stale_html(message: str) -> str:
    """The note above results left from the last valid input when a calculation failed with `message`."""
    return (
        f"<div class='qkv-stale-box'><b>Not recalculated:</b> {html_text(message)}<br>The results below are "
        "for the previous valid input; fix the input outlined in red.</div>"
    )


def report(r: Result, table_max: int | None = TABLE_MAX) -> tuple[str, str, str]:
    """What the calculator shows: the torch checks and the notes as Markdown lists, and `to_html(r)`."""
    checks = "\n".join(f"- {c.message}" for c in r.checks)
    notes = "\n".join(f"- {n}" for n in r.steps.notes)
    return checks, notes, to_html(r, table_max)
