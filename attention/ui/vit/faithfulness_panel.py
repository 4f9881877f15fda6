"""The ViT tab's faithfulness line, under the large map: "how faithful is this view here?", on demand (a button),
for the visitor's image: the shown map's perturbation AUCs against a random order's (`attention.vit.score.service`),
in the heavy lane and priced like relevance; a click on the line's "curves" shows the small curve. And the
stateless /faithfulness endpoint for API and MCP callers.

A change of the main view clears the line (it spoke of the view before); a refusal (over budget, busy) is shown
as a note in the line, and the page stays usable.
"""

from __future__ import annotations

import gradio as gr

from attention.crowd.admission import HEAVY
from attention.errors import AttentionError
from attention.ui.common.admit import HEAVY_QUEUE, heavy_endpoint, heavy_share, in_lane, who
from attention.ui.common.api_docs import with_models
from attention.ui.common.components import error_note, image_path, picture, user_errors
from attention.ui.vit.fields import view_spec
from attention.vit.score import service as score_service
from attention.vit.score.views import curves_picture, line, write_answer
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve.passes import known_digest

FAST = dict(show_progress="minimal", api_visibility="private")


class FaithfulnessPanel:
    """The line and its curve, made where this is called (under the large map)."""

    def __init__(self):
        with gr.Column(elem_id="vit-faith"):
            with gr.Row(equal_height=False):
                self.button = gr.Button(
                    "How faithful is this view here?", size="sm", scale=0, min_width=220, elem_id="vit-faith-btn"
                )
                self.show = gr.Button(
                    "Show the curves", size="sm", scale=0, min_width=140, visible=False, elem_id="vit-faith-show"
                )
            self.line = gr.Markdown("", elem_id="vit-faith-line")
            self.curve = picture(show_label=False, height=250, visible=False, buttons=[], elem_id="vit-faith-curve")
        self.kept = gr.State(None)  # the last line's curve picture, shown on click

    def score(self, img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, fu, dr, du, st=None):
        """The line for the view on screen (its fields as the main view reads them), and its curve kept."""
        hidden = gr.update(visible=False)
        try:
            v = view_spec(qr, qc, int(lay), vw, thr, al, cm, (fu, dr, du))
            s = score_service.faithfulness(img, mdl, res, v, int(hd or 0), visitor=who(), digest=known_digest(st, img))
        except AttentionError as e:
            return error_note(e), None, hidden, hidden
        return line(s), curves_picture(s), gr.update(visible=True), hidden

    def follow(self, events: list, main, ropts: list) -> None:
        """Compute on the button (heavy lane: admitted as it asks, `heavy_share`); clear after each of `events`."""
        ins = [main.image, main.model, main.resolution, main.qrow, main.qcol, main.layer, main.view, main.head]
        ins += [main.threshold, main.alpha, main.cmap, *ropts, main.state]
        outs = [self.line, self.kept, self.show, self.curve]
        self.button.click(in_lane(user_errors(self.score)), ins, outs, validator=heavy_share(), **HEAVY_QUEUE, **FAST)
        self.show.click(lambda pic: gr.update(value=pic, visible=pic is not None), self.kept, self.curve, **FAST)
        clear = ("", None, gr.update(visible=False), gr.update(visible=False, value=None))
        for ev in events:
            ev.success(lambda: clear, None, outs, queue=False, **FAST)


def faithfulness_fn(model_default: str):
    """The /faithfulness handler."""

    @user_errors
    def faithfulness(
        image, model=model_default, view="mean", layer=-1, head=0, query_row=None, query_col=None, resolution="auto"
    ):
        """How faithful one attention view is for this image: the view's map scored by Chefer et al.'s
        perturbation test against a random order (remove patches, most relevant first and least relevant first,
        10% at a time, set to black; read the top class's probability, or for a model without a classifier the
        cosine of its embedding with the whole image's; the area under each curve).

        Returns (picture, file, info): the curves as a PNG; a .json of the curves; a dict with the AUCs of the
        view and of the random order (positive: lower is more faithful; negative: higher is), the explained
        answer and the settings.

        Args:
            image: {image}.
            model: {models}.
            view: 'heads' (the head `head`), 'mean' (mean of heads), 'rollout', 'masks' (the head's map), 'fig3'.
            layer: {layer}.
            head: the head scored for the 'heads' and 'masks' views.
            query_row: {query_row}.
            query_col: {query_col}.
            resolution: {resolution}.
        """
        v = vit_inputs.view_request(view or "mean", 0.6, query_row=query_row, query_col=query_col, layer=layer)
        visitor = who()
        with HEAVY.held(visitor):  # admitted when it asked to join (`heavy_share`); its turn if it computes
            s = score_service.faithfulness(image, model, resolution, v, int(head or 0), visitor=visitor)
        return write_answer(s)

    return with_models(faithfulness)


def build_api(model_default: str) -> None:
    """Register /faithfulness (hidden inputs, so every parameter after `image` has a default)."""
    with gr.Row(visible=False):
        ins = [image_path(type="filepath", image_mode=None, label="image"), gr.Textbox(model_default, label="model")]
        ins += [gr.Textbox("mean", label="view"), gr.Number(-1, label="layer", precision=0)]
        ins += [gr.Number(0, label="head", precision=0), gr.Number(None, label="query_row", precision=0)]
        ins += [gr.Number(None, label="query_col", precision=0), gr.Textbox("auto", label="resolution")]
        outs = [gr.Image(format="png", type="filepath", label="curves"), gr.File(label="curves json"), gr.JSON()]
        heavy_endpoint(faithfulness_fn(model_default), "faithfulness", ins, outs)
