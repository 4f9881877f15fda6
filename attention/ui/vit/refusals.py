"""A refused change in the ViT tab leaves the page as it was: no control poisoned, no map lost.

A change the server cannot make (a model that cannot load here, a file that is not a picture, a
resolution over the budget, no image) is not raised as an event error, which would cover the
control at fault with Gradio's red "Error" pill and leave the map and the controls disagreeing.
Instead the tab's handlers answer with the last accepted view (`accepted`, kept in the visitor's
state after every drawn view): every control put back to its last accepted value, the last good
map redrawn, the browser's own drawing rolled back (the payload's `rollback`), a visible note
beside the map and one toast saying why. The next action then works from that view.
"""

from __future__ import annotations

import json
import logging
import time

import gradio as gr

from attention.errors import AttentionError, markdown_text
from attention.ui.common import model_choices
from attention.ui.common.components import warning
from attention.vit.serve.inputs import file_digest

log = logging.getLogger(__name__)

KEYS = ("image", "model", "resolution", "qrow", "qcol", "layer", "view", "head", "threshold", "alpha", "cmap")
ROLLOUT = ("fusion", "discard_ratio", "discard_rule")


def accepted(**fields) -> dict:
    """The view just drawn, as the controls' values (`KEYS`, `ROLLOUT`; those not given are left out)."""
    return {k: v for k, v in fields.items() if k in KEYS + ROLLOUT}


def rolled_back(live_json: str) -> str:
    """The browser copy's value `live_json` marked as a rollback (the browser drops its own drawing)."""
    payload = json.loads(live_json)
    payload["rollback"] = time.time_ns()  # a new value each time, so the browser sees it
    return json.dumps(payload)


def note_html(message: str) -> str:
    """The note beside the kept map (the visitor's message escaped)."""
    return (
        '<div class="vit-note" role="status">⚠️ <b>Not changed:</b> '
        f"{markdown_text(message)} The map still shows your last view; every control is back to it.</div>"
    )


def refusal(t, e: AttentionError, kept: dict | None, now: dict, redraw) -> dict:
    """The answer to a refused change: `kept` (the last accepted view, or None before any) restored in
    every control that `now` (the controls as sent) differs in, the last good view redrawn by `redraw`
    (kept -> the tab's outputs; may raise AttentionError: then the maps are left as they are), the
    note shown and the toast raised. `t`: the tab's layout (`layout.ViTTab`)."""
    message = model_choices.visitor_text(e, now.get("model"))
    log.info("a change was refused: %s: %s", type(e).__name__, e)
    warning(message)
    out = {t.note: gr.update(value=note_html(message), visible=True)}
    if kept is None:
        return out | ({t.image: None} if now.get("image") else {})
    controls = {k: getattr(t, k) for k in KEYS + ROLLOUT if k not in ("layer", "head", "qrow", "qcol")}
    for k, comp in controls.items():
        if k in kept and now.get(k, kept[k]) != kept[k]:
            out[comp] = kept[k]
    try:
        drawn = redraw({**now, **kept})
    except AttentionError:
        return out
    if t.live in drawn:
        drawn[t.live] = rolled_back(drawn[t.live])
    drawn[t.head] = gr.update(maximum=drawn[t.head]["maximum"], value=kept.get("head", 0))
    return {**drawn, **out}


def cleared(t, kept: dict | None, now: dict) -> dict:
    """A drawn view's note: hidden, unless this view is the kept one redrawn (a rollback's own echo)."""
    same = kept is not None and all(now.get(k) == v for k, v in kept.items() if k != "image")
    return (
        {}
        if same and _same_image(now.get("image"), kept.get("image"))
        else {t.note: gr.update(value="", visible=False)}
    )


def _same_image(a, b) -> bool:
    """Whether two image values hold the same picture (Gradio serves a copy under another path)."""
    if a == b:
        return True
    try:
        return a is not None and b is not None and file_digest(a) == file_digest(b)
    except (OSError, AttentionError):
        return False
