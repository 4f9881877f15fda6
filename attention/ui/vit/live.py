"""The ViT tab's hidden #vit-live component: the browser's copy of the view (`attention.vit.serve.live`).

Its value is the JSON of `live.payload`, set by every answer of the tab; its script
(`live.js`) redraws the large map at once on a patch click, a layer change or a head click,
and asks these two server functions, by the pass's signed token, for a view's maps and for the base
picture: direct calls, not queued, each a lookup in the kept passes and at most one query row per
layer and head from the kept q/k (no forward), answering about 10 kB (maps) or one image.
"""

from __future__ import annotations

import json
from importlib import resources

import gradio as gr

from attention.errors import AttentionError
from attention.vit.engine.query import parse as parse_query
from attention.vit.serve import live
from attention.vit.serve.passes import Pass

LIVE_JS = (resources.files("attention.vit.serve") / "live.js").read_text()
# the `js` of the tab's events: their inputs as given, once the browser has drawn its own map (<= 250 ms)
AFTER_DRAWING = "(...args) => (window.attentionLive ? window.attentionLive.settled(args) : args)"
# the click's `js`: as AFTER_DRAWING, its last input replaced by the latest click's pixel [x, y] (null: none seen)
AFTER_CLICK = (
    "(...args) => { const L = window.attentionLive; if (!L) return args;"
    " args[args.length - 1] = L.clicked || null; return L.settled(args); }"
)


def live_maps(args) -> dict | None:
    """[token, query ([row, col], or null for the model's own token), layer] -> that view's maps (`live.view_maps`), or
    None for an unknown pass or a query or layer off the pass (the browser then waits for the answer)."""
    if not isinstance(args, (list, tuple)) or len(args) != 3:
        return None
    p = live.find(args[0])
    query, layer = args[1], args[2]
    whole = query is None or (isinstance(query, list) and len(query) == 2 and all(type(v) is int for v in query))
    if p is None or type(layer) is not int or not whole:
        return None
    try:
        return live.view_maps(p, None if query is None else parse_query(query), layer)
    except AttentionError:
        return None


def live_base(tok) -> str | None:
    """token -> the pass's base picture as a data URL (`live.base_image`), or None (unknown pass)."""
    p = live.find(tok)
    return None if p is None else live.base_image(p)


def component() -> gr.HTML:
    """The hidden component (in the page, not on screen) that carries the payload and the script."""
    return gr.HTML(
        "",
        html_template="",
        js_on_load=LIVE_JS,
        visible="hidden",
        elem_id="vit-live",
        server_functions=[live_maps, live_base],
    )


def value(p: Pass, res, view: str, head: int, alpha: float, cmap: str) -> str:
    """The component's value for the view of `res` (from pass `p`) on screen: `live.payload` as JSON.
    view: a checked view name (`views.check_view`)."""
    return json.dumps(live.payload(p, res, view=view, head=int(head), alpha=float(alpha), cmap=cmap))
