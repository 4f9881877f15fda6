"""Two panels of the ViT tab that follow the main view: a second model side by side, and the
feature views (PCA, similarity to the query, token norms) of the chosen layer.

Each is laid out by its `build` inside the tab, then `follow`s the main view: after every change
of image, model, layer or query the panel redraws from the visitor's cached pass (no forward pass
for the features; one for the second model when its pass is not kept).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from attention.errors import AttentionError
from attention.ui.common import model_choices
from attention.ui.common.components import error_note, kept_state, queue_share, tiles_gallery, user_errors
from attention.ui.vit.fields import on_screen
from attention.vit.draw import frames as vit_frames
from attention.vit.draw.drawing import THUMB_SIDE, reduced
from attention.vit.draw.feature_views import EXPLAIN, feature_pictures
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve import passes as vit_passes

VIT_NONE = "(none)"
PCA_STYLES = [("min-max (DINOv2's demos)", "minmax"), ("DINOv3's notebook: foreground, whitened", "dinov3")]
FAST = dict(show_progress="minimal", api_visibility="private")
HEAVY = dict(FAST, validator=queue_share())  # may run a forward: within the visitor's share of the queue
SEEN = ("qrow", "qcol", "layer", "view", "head", "threshold", "alpha", "cmap")  # what the compare panel follows


@dataclass
class Main:
    """The main view's components a panel reads."""

    image: gr.Image
    resolution: gr.Dropdown
    qrow: gr.Number
    qcol: gr.Number
    layer: gr.Slider
    view: gr.Radio
    head: gr.Slider
    threshold: gr.Slider
    alpha: gr.Slider
    cmap: gr.Dropdown
    state: gr.State
    qimg: gr.Image
    model: gr.Dropdown
    good: gr.State | None = None  # the last accepted view (`fields.on_screen`)


class ComparePanel:
    """A second model beside the main one: its large map at the same size, for the same query
    (mapped to its grid), the same head (clamped) and the matching layer."""

    def __init__(self, vit_pass: Callable):
        self.vit_pass = vit_pass
        self.cstate = kept_state()
        with gr.Accordion("Compare with a second model", open=False, elem_id="vit-compare-row"):
            self.compare = gr.Dropdown(
                model_choices.choices((VIT_NONE,)),
                value=VIT_NONE,
                allow_custom_value=True,
                label="Second model (same image, same query, same head)",
                info="e.g. dinov2_vits14 vs dinov2_vits14_reg: registers soak up the attention DINOv2 otherwise "
                "spends on a few background patches",
                elem_id="vit-compare",
            )
            self.cdetails = gr.Markdown("", elem_id="vit-compare-details")
            with gr.Row(equal_height=True, visible=False) as self.cpair:
                self.cmain = gr.Image(
                    label="Main model", format="png", interactive=False, min_width=160, elem_id="vit-cmp-main"
                )
                self.cimg = gr.Image(
                    label="Second model", format="png", interactive=False, min_width=160, elem_id="vit-cmp-img"
                )
            with gr.Accordion("Second model: every head", open=False, visible=False) as self.cacc:
                self.cgallery = tiles_gallery("Second model", 4, "vit-compare-gallery")

    def update(
        self, img, mdl, cmp, res, qr, qc, lay, vw, hd, thr, al, cm, st, cst, main, gd=None, progress=gr.Progress()
    ):
        """The second model's view of the main one's: read from the main view's accepted view `gd` when it
        is the one on screen (checked when drawn: `fields.on_screen`), else from the fields."""
        off = {self.cdetails: "", self.cgallery: [], self.cmain: None, self.cimg: None, self.cstate: None}
        if not cmp or cmp == VIT_NONE or st is None:
            return {**off, self.cpair: gr.update(visible=False), self.cacc: gr.update(visible=False)}
        try:
            c = self.vit_pass(img, cmp, res, progress, state=st)  # the upload's digest from the main view's state
            seen = on_screen(gd, img, mdl, res, SEEN)
            if seen is not None:
                qr, qc, lay, vw, hd, thr, al, cm = (seen[k] for k in SEEN)
            else:
                lay, hd = vit_inputs.parse_layer(lay), vit_inputs.parse_head(hd)
            q = vit_passes.map_query(vit_inputs.parse_query(qr, qc), st.grid, c.base.grid)
            lay_c, hd_c = vit_passes.map_layer(lay, st.num_layers, c.num_layers), min(hd, c.num_heads - 1)
            spec = vit_frames.ViewSpec if seen is None else vit_frames.ViewSpec.trusted
            v = spec(query=q, layer=lay_c, view=vw, threshold=thr, alpha=al, cmap=cm)
            f = vit_frames.tab_frame(c, v, head=hd_c)
        except AttentionError as e:
            return {
                **off,
                self.cdetails: error_note(model_choices.visitor_text(e, cmp)),
                self.cstate: cst,
                self.cpair: gr.update(visible=False),
            }
        return {
            self.cdetails: f.details,
            self.cgallery: list(zip(f.outputs.thumbs, f.outputs.captions)),
            self.cmain: gr.update(value=main, label=f"Main model: {mdl}"),
            self.cimg: gr.update(value=f.query_png, label=f"Second model: {cmp}"),
            self.cstate: c.ref,
            self.cpair: gr.update(visible=True),
            self.cacc: gr.update(visible=True),
        }

    def follow(self, events: list, m: Main) -> None:
        """Redraw after each of `events` succeeds, and when the second model is picked."""
        ins = [m.image, m.model, self.compare, m.resolution, m.qrow, m.qcol, m.layer, m.view, m.head, m.threshold]
        ins += [m.alpha, m.cmap, m.state, self.cstate, m.qimg, m.good]
        outs = [self.cdetails, self.cgallery, self.cmain, self.cimg, self.cstate, self.cpair, self.cacc]
        at = dict(show_progress_on=[self.cdetails])  # one progress indicator per job
        for ev in events:  # follows a job already within the visitor's share (a forward here takes a turn)
            ev.success(self.update, ins, outs, **FAST, **at)
        self.compare.input(user_errors(self.update), ins, outs, **HEAVY, **at)


class FeaturePanel:
    """The chosen layer's feature views, drawn only while the panel is open."""

    def __init__(self, vit_pass: Callable, fit: Callable):
        self.vit_pass, self.fit = vit_pass, fit
        self.open = gr.State(False)
        with gr.Accordion(
            "Features of this layer: PCA colours, similarity to the query, token norms", open=False
        ) as self.acc:
            gr.Markdown(
                "\n".join(f"- **{k}**: {v}." for k, v in EXPLAIN.items())
                + "\n\nClick a patch of the large map to move the similarity's query.",
                elem_id="vit-features-help",
            )
            self.style = gr.Radio(PCA_STYLES, value="minmax", label="PCA colours", elem_id="vit-pca-style")
            self.gallery = tiles_gallery("Feature views of the chosen layer", 3, "vit-features")

    @user_errors
    def update(self, is_open, img, mdl, res, qr, qc, lay, hd, al, cm, st, style="minmax"):
        if not is_open:
            return gr.skip()
        p = self.vit_pass(img, mdl, res, state=st)  # the main view's pass, by the key in the visitor's state
        lay, _, qr, qc = self.fit(p, st, lay, hd, qr, qc)
        q = vit_inputs.parse_query(qr, qc)
        tiles, _ = feature_pictures(p, q, lay, alpha=al, cmap=cm, pca_style=style or "minmax")
        return [(reduced(t.image, THUMB_SIDE), t.caption) for t in tiles]

    def follow(self, events: list, m: Main) -> None:
        """Redraw after each of `events` succeeds (while open), and when the panel opens."""
        ins = [self.open, m.image, m.model, m.resolution, m.qrow, m.qcol, m.layer, m.head, m.alpha, m.cmap, m.state]
        ins.append(self.style)
        for ev in events:  # follows a job already within the visitor's share (no forward of its own)
            ev.success(self.update, ins, self.gallery, **FAST)
        self.style.input(self.update, ins, self.gallery, **FAST)
        self.acc.expand(lambda: True, None, self.open, queue=False, api_visibility="private").then(
            self.update, ins, self.gallery, **HEAVY
        )
        self.acc.collapse(lambda: False, None, self.open, queue=False, api_visibility="private")
