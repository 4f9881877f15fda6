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


def view_spec(qrow, qcol, layer: int, view, threshold, alpha, cmap, rollout=()) -> vit_frames.ViewSpec:
    """The tab's fields as one checked view (for `frames.tab_frame` and `frames.download_maps`); `layer`:
    fitted by `fit`; `rollout`: (head fusion, discard ratio, discard rule) when set."""
    return vit_frames.ViewSpec(
        query=vit_inputs.parse_query(qrow, qcol),
        layer=layer,
        view=view,
        threshold=threshold,
        alpha=alpha,
        cmap=cmap,
        rollout_options=dict(zip(("head_fusion", "discard_ratio", "discard"), rollout)),
    )


def vit_frame(p, qrow, qcol, layer: int, view, head: int, threshold, alpha, cmap, rollout=()):
    """One view of pass `p` as the tab shows it (`view_spec`; `layer` and `head` fitted by `fit`), and that view."""
    v = view_spec(qrow, qcol, layer, view, threshold, alpha, cmap, rollout)
    rollouts.ready(p, v, who())  # a heavy rollout: computed in the heavy lane
    return vit_frames.tab_frame(p, v, head=head), v


FITTED = ("layer", "head", "qrow", "qcol")  # the fields `fit` fits to a pass


def on_screen(gd, image, model, resolution, keys: tuple = FITTED) -> dict | None:
    """The main view's last accepted view (`refusals.accepted`, kept in the visitor's state `gd`) when
    it is the view of (image, model, resolution) and holds `keys`: its layer and head are whole numbers
    fitted to the pass, its view name and style were checked when the main view drew it (`fit`,
    `view_spec`), so the panels that follow it trust them (nothing parsed again). None otherwise (no view
    accepted yet, another image, or an example's view, which keeps no style): parse the fields then."""
    same = gd is not None and (gd.get("image"), gd.get("model"), gd.get("resolution")) == (image, model, resolution)
    return gd if same and all(k in gd for k in keys) else None


def fit(p, st, lay, hd, qr, qc):
    """The visitor's layer, head and query fitted to pass `p`: a new model starts at its last
    layer, a new grid at CLS; otherwise (no state yet, as after an example) values are kept when
    they fit, so the first change after an example is not thrown away."""
    lay, hd = vit_inputs.parse_layer(lay), vit_inputs.parse_head(hd)
    if st is not None and p.key[1] != st.key[1]:
        lay = p.num_layers - 1
    if st is not None and p.base.grid != st.grid:
        qr = qc = None
    q = vit_inputs.parse_query(qr, qc)
    if isinstance(q, tuple) and not (0 <= q[0] < p.base.grid[0] and 0 <= q[1] < p.base.grid[1]) and st is None:
        qr = qc = None
    return min(lay, p.num_layers - 1) if lay >= 0 else lay, min(hd, p.num_heads - 1), qr, qc
