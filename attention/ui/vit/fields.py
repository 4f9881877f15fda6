"""The ViT tab's fields read against the visitor's pass: the pass itself (from the server's shared
store, `passes.PASSES`), what the visitor's state keeps of it, the layer, head and query fitted to it,
and the fields as one checked view and its frame. Shared by the tab's handlers and its panels.
"""

from __future__ import annotations

from dataclasses import replace

import gradio as gr

from attention.config import SETTINGS
from attention.ui.common.admit import who
from attention.vit.draw import frames as vit_frames
from attention.vit.engine.query import Query
from attention.vit.engine.request import (
    DISCARD_RATIO,
    OPACITY,
    THRESHOLD,
    ViewRequest,
    ViewSpec,
    parse_head,
    parse_layer,
)
from attention.vit.engine.request import rollout as rollout_options
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve import passes as vit_passes
from attention.vit.serve import rollouts

ROLLOUT_QUEUE = dict(concurrency_limit=SETTINGS.concurrency + SETTINGS.heavy_slots + SETTINGS.heavy_waiting)
"""Gradio's queue for an event that may draw a rollout: a heavy one waits for its turn in the heavy lane
(`rollouts.ready`) while its event is running, so the event's Gradio limit has room for the heavy lane's
jobs (its slots and waiting room, each visitor's share refused at once over that) beside the light ones,
whose forwards the forward lane bounds: visitors' rollouts never take the workers another visitor's maps need."""


def vit_pass(image, model, resolution, progress: gr.Progress | None = None, state=None):
    """The visitor's pass from the server's shared, bounded store (`passes.PASSES`): computed once
    per (image content, model, resolution), an upload's per visitor (`passes.pass_key`), within the
    model allow-list, the compute budget and the visitor's share; a new forward reports to `progress`
    (the event's progress bar). `state`: the visitor's `passes.Ref` of the pass on screen; when it was
    made from this very file (`inputs.source_stamp`), its key's digest is used (the upload is not
    hashed again: the main view's changes and every panel that follows it)."""
    report = None if progress is None else (lambda frac, desc: progress(frac, desc=desc))
    digest = vit_passes.known_digest(state, image)
    return vit_passes.served_pass(image, model, resolution, who(), progress=report, digest=digest)


def ref(p, image) -> vit_passes.Ref:
    """What the visitor's state keeps of pass `p` shown for `image` (`Pass.ref`, with the file's stamp)."""
    return replace(p.ref, source=vit_inputs.source_stamp(image))


NAMES = dict(qrow="query_row", qcol="query_col")  # a control named otherwise in the request
ROLLOUT = ("fusion", "discard_ratio", "discard_rule")  # the rollout options' controls


def request_of(now: dict) -> ViewRequest:
    """The controls' values `now` (`refusals.KEYS`; those absent: their defaults) as one request, read once at
    the edge (`request.ViewRequest.parse`: the query, layer and head parsed, the view and style checked). The
    rollout's options count only when all three are given. InputError naming the field at fault."""
    given = {NAMES.get(k, k): v for k, v in now.items() if k not in ROLLOUT}
    if all(now.get(k) is not None for k in ROLLOUT):
        given |= {k: now[k] for k in ROLLOUT}
    return ViewRequest.parse(**given)


def link_request(link, image, model) -> ViewRequest:
    """A permalink's view (`permalink.Link`, checked) of `image` by `model` as a request, its rollout options
    at their defaults when not given; a hand-made link's number beyond a slider's end (thr=0.01) is taken at
    that end (`Bound.on_slider`): the page's sliders hold it."""
    qr, qc = link.query if isinstance(link.query, tuple) else (None, None)  # a token query: the model's own
    thr, al = THRESHOLD.on_slider(link.threshold), OPACITY.on_slider(link.alpha)
    ro = rollout_options(link.fusion, DISCARD_RATIO.on_slider(link.discard), link.rule)
    return ViewRequest.parse(
        image, model, link.resolution, query_row=qr, query_col=qc, layer=link.layer, head=link.head,
        view=link.view, threshold=thr, alpha=al, cmap=link.cmap, fusion=ro["head_fusion"],
        discard_ratio=ro["discard_ratio"], discard_rule=ro["discard"],
    )  # fmt: skip


def fitted(p, st, r: ViewRequest) -> tuple[ViewSpec, int]:
    """Request `r`'s view and head fitted to pass `p` (`fit_parsed`): the view placed at the fitted query and
    layer (nothing checked again), and the head."""
    lay, hd, q = fit_parsed(p, st, r.spec.layer, r.head, r.spec.query)
    return r.spec.placed(q, lay), hd


def vit_frame(p, v: ViewSpec, head: int):
    """One view `v` of pass `p` as the tab shows it (fitted: `fitted`), and that view; a heavy rollout is
    computed in the heavy lane first (`rollouts.ready`)."""
    rollouts.ready(p, v, who())
    return vit_frames.tab_frame(p, v, head=head), v


FITTED = ("layer", "head", "qrow", "qcol")  # the fields `fit` fits to a pass


def on_screen(gd, image, model, resolution, keys: tuple = FITTED) -> dict | None:
    """The main view's last accepted view (`refusals.accepted`, kept in the visitor's state `gd`) when
    it is the view of (image, model, resolution) and holds `keys`: its layer and head are whole numbers
    fitted to the pass, its view name and style were checked when the main view drew it (`fitted`,
    `request_of`), so the panels that follow it trust them (nothing parsed again). None otherwise (no view
    accepted yet, another image, or an example's view, which keeps no style): parse the fields then."""
    same = gd is not None and (gd.get("image"), gd.get("model"), gd.get("resolution")) == (image, model, resolution)
    return gd if same and all(k in gd for k in keys) else None


def fit_parsed(p, st, lay: int, hd: int, q: Query | None) -> tuple[int, int, Query | None]:
    """The visitor's parsed layer, head and query fitted to pass `p`: a new model starts at its last layer, a
    new grid at the model's own token; otherwise (no state yet, as after an example) values are kept when they
    fit, so the first change after an example is not thrown away."""
    if st is not None and p.key[1] != st.key[1]:
        lay = p.num_layers - 1
    if st is not None and p.base.grid != st.grid:
        q = None
    if isinstance(q, tuple) and not (0 <= q[0] < p.base.grid[0] and 0 <= q[1] < p.base.grid[1]) and st is None:
        q = None
    return min(lay, p.num_layers - 1) if lay >= 0 else lay, min(hd, p.num_heads - 1), q


def fit(p, st, lay, hd, qr, qc):
    """The panels' raw fields fitted to pass `p` (`fit_parsed`, after parsing them): (layer, head, row, col)."""
    lay, hd, q = fit_parsed(p, st, parse_layer(lay), parse_head(hd), vit_inputs.parse_query(qr, qc))
    qr, qc = q if isinstance(q, tuple) else (None, None)
    return lay, hd, qr, qc
