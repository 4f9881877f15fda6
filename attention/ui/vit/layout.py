"""The ViT tab's layout: every component, where it sits, its labels. `tab` wires the events.

The first screen (1400x1000) holds the image, the model and the view on the left, the large map with
the layer and head sliders right under it in the middle, and every head's map on the right (`side`:
room for another view beside the map). Under the map and the tiles, for a classifier: "Why this
class?" (`relevance_panel`). Below: a second model beside the main one, the examples, then the
scores, the model view, the features, the link and the download. On a phone the map and its sliders
come first, then the tiles, "Why this class?", then the controls (`tab.css`).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

import gradio as gr

from attention import render as vit_render
from attention.ui.common import model_choices
from attention.ui.common.components import error_note, image_path, kept_state, number, slider, tiles_gallery
from attention.ui.vit import live as vit_live
from attention.ui.vit.faithfulness_panel import FaithfulnessPanel
from attention.ui.vit.panels import ComparePanel, FeaturePanel
from attention.ui.vit.relevance_panel import RelevancePanel
from attention.ui.vit.text_panel import TextPanel
from attention.vit.draw import texts as vit_texts
from attention.vit.draw import views as vit_views
from attention.vit.models import loader as vit_models
from attention.vit.models.sources import Startup

VIT_DEFAULTS = {"resolution": "auto", "view": "heads", "threshold": 0.6, "alpha": 0.6, "cmap": "inferno"}
VIT_CSS = (resources.files("attention.ui.vit") / "tab.css").read_text()
DISCARD_RULES = [("in each row", "row"), ("whole matrix, CLS kept (vit-explain)", "global")]  # rollout: (label, rule)


def map_caption(view: str, head: int, heads: int, layer: int) -> str:
    """Markdown naming what the large map shows: which head (or the mean, the rollout, every mask), which layer."""
    what = {
        "heads": f"head {head}",
        "masks": f"head {head}, its threshold mask",
        "mean": f"the mean of the {heads} heads",
        "rollout": f"the rollout through layers 0 to {layer}",
        "fig3": f"the masks of all {heads} heads",
    }[view]
    return f"Large map: **{what}** · layer {layer} · click a patch to make it the query"


class ViTTab:
    """The tab's components as attributes, laid out inside the caller's `gr.Tab` for start-up choice
    `s`. depth: (layers, heads) of the start model; `side`: the column beside the large map (the head
    tiles; room for another view)."""

    def __init__(self, s: Startup, vit_pass: Callable, fit: Callable):
        self.tour_slot = gr.Column(elem_id="vit-tour-slot")  # the guided first visit (`tour`)
        gr.Markdown(
            "Every head's attention from the **query token** (CLS, or any patch you click) over the image. "
            "Layer, head, view and colours reuse your last forward pass: they answer at once. Upload an image or "
            "pick an example below.",
            elem_id="vit-intro",
        )
        if notice := model_choices.visitor_notice(s):  # short, for visitors (the operator's fix: the log)
            model_choices.log_operator_notice(s)
            gr.HTML(
                f'<div style="border:1px solid #e0b000;background:#fff8e1;color:#5d4300;border-radius:6px;'
                f'line-height:1.35;padding:4px 10px">{error_note(notice)}</div>',
                elem_id="vit-notice",
            )
        self.state = kept_state()
        self.good = kept_state()  # the last accepted view's control values (`refusals`)
        self.clicked = gr.JSON(None, visible="hidden", elem_id="vit-clicked")  # the latest click's pixel (browser)
        self.depth = vit_models.depth(s.model)
        with gr.Row(equal_height=False, elem_id="vit-main"):
            with gr.Column(scale=3, min_width=250, elem_id="vit-controls"):
                self._controls(s)
            with gr.Column(scale=9, min_width=340, elem_id="vit-results"):
                self.details = gr.Markdown("Loading the first example...", elem_id="vit-details")
                with gr.Row(equal_height=False):
                    with gr.Column(scale=7, min_width=320, elem_id="vit-map-column"):
                        self._map()
                    with gr.Column(scale=5, min_width=300, elem_id="vit-side") as self.side:
                        self.gallery = tiles_gallery("Every head (click one to show it large)", 2, "vit-gallery")
                # "Why this class?" (classifiers only): under the map and the tiles, before the controls on a phone
                self.why = RelevancePanel()
                self.steps_slot = gr.Column(elem_id="vit-steps-slot")  # one head's row step by step (`stepwise_panel`)
                self.find = TextPanel()  # "Find in image" (models with a text tower only)
        self.cmp = ComparePanel(vit_pass)
        self.examples_slot = gr.Column(elem_id="vit-examples")
        self._panels()
        self.feats = FeaturePanel(vit_pass, fit)
        self._keep()
        self.live = vit_live.component()  # hidden: the browser's copy of the view, for instant redraws

    def _controls(self, s: Startup) -> None:
        self.image = image_path(
            type="filepath",
            image_mode=None,
            label="Image",
            format="png",
            sources=["upload", "clipboard"],
            height=170,
            elem_id="vit-image",
        )
        self.model = gr.Dropdown(
            model_choices.choices(),
            value=s.model,
            allow_custom_value=True,
            label="Model",
            info="an alias, a timm ViT name, or hf-hub:org/repo",
            elem_id="vit-model",
        )
        self.view = gr.Radio(
            [(label, key) for key, label in vit_views.VIEWS.items()],
            value=VIT_DEFAULTS["view"],
            label="View",
            elem_id="vit-view",
        )
        self.threshold = slider(
            0.05,
            1.0,
            value=VIT_DEFAULTS["threshold"],
            step=0.05,
            label="Mask threshold",
            info="share of attention each mask keeps",
            elem_id="vit-threshold",
        )
        self.alpha = slider(
            0.0, 1.0, value=VIT_DEFAULTS["alpha"], step=0.05, label="Overlay opacity", elem_id="vit-alpha"
        )
        with gr.Row():
            self.cmap = gr.Dropdown(
                list(vit_render.COLORMAPS),
                value=VIT_DEFAULTS["cmap"],
                label="Colormap",
                min_width=110,
                elem_id="vit-cmap",
            )
            self.resolution = gr.Dropdown(
                ["auto", "native", "dino480", "224", "320", "480", "640", "800"],
                value=VIT_DEFAULTS["resolution"],
                allow_custom_value=True,
                label="Resolution",
                info="shorter side, px (DINOv3: the height)",
                min_width=110,
                elem_id="vit-resolution",
            )
        with gr.Accordion("Rollout options", open=False, elem_id="vit-rollout-options"):
            self.fusion = gr.Radio(["mean", "max", "min"], value="mean", label="Head fusion", elem_id="vit-fusion")
            self.discard_ratio = slider(
                0.0,
                0.95,
                value=0.0,
                step=0.05,
                label="Discard ratio",
                info="share of the lowest attention dropped in each layer",
                elem_id="vit-discard",
            )
            self.discard_rule = gr.Radio(
                DISCARD_RULES, value="row", label="Drop the lowest", elem_id="vit-discard-rule"
            )

    def _map(self) -> None:
        """The large map, its caption, the layer and head sliders right under it, the legend, the query."""
        self.caption = gr.Markdown(map_caption("heads", 0, self.depth[1], self.depth[0] - 1), elem_id="vit-caption")
        self.qimg = gr.Image(
            show_label=False,
            format="png",
            interactive=False,
            elem_id="vit-query-image",
            buttons=[],  # no chrome over the map's patches (the download is in its panel below)
        )
        # a refusal's note: the last good map is kept, and why the change was not made (`refusals`)
        self.note = gr.Markdown("", visible=False, elem_id="vit-note")
        with gr.Row(equal_height=False, elem_id="vit-depth"):
            self.layer = slider(
                0,
                self.depth[0] - 1,
                value=self.depth[0] - 1,
                step=1,
                label="Layer",
                info="starts at the last",
                min_width=150,
                elem_id="vit-layer",
            )
            self.head = slider(
                0,
                self.depth[1] - 1,
                value=0,
                step=1,
                label="Head",
                info="or click a head's map",
                min_width=150,
                elem_id="vit-head",
            )
        self.legend = gr.HTML(
            vit_texts.legend_html(VIT_DEFAULTS["cmap"]),
            elem_id="vit-legend",
            head=f"<style>{VIT_CSS}</style>",
        )  # tab-local CSS (css= needs launch())
        self.qlabel = gr.Markdown("**Query: the CLS token.**", elem_id="vit-query-label")
        with gr.Row(equal_height=False, elem_id="vit-query-row"):
            self.qrow = number(None, label="Query row", precision=0, min_width=70, elem_id="vit-qrow")
            self.qcol = number(None, label="Query col", precision=0, min_width=70, elem_id="vit-qcol")
            self.cls_btn = gr.Button("Back to the model's token", size="sm", min_width=90, elem_id="vit-cls")
        self.faith = FaithfulnessPanel()  # "how faithful is this view here?", on demand, under the map's controls

    def _panels(self) -> None:
        with gr.Accordion(
            "Scores vs weights: the query row of the chosen head, before and after softmax",
            open=False,
            elem_id="vit-scores-panel",
        ):
            self.scores_md = gr.Markdown("", elem_id="vit-scores-summary")
            with gr.Row():
                self.score_bars, self.weight_bars = (
                    gr.BarPlot(
                        x="token",
                        y=y,
                        color="token kind",
                        title=title,
                        height=300,
                        x_label_angle=-40,
                        min_width=280,
                        elem_id=eid,
                    )
                    for y, title, eid in (
                        ("raw score", "raw score q·k/√d", "vit-score-bars"),
                        ("softmax weight", "softmax weight", "vit-weight-bars"),
                    )
                )
            self.scores_df = gr.Dataframe(
                headers=vit_texts.SCORE_HEADERS, interactive=False, elem_id="vit-scores", max_height=260
            )
        with gr.Accordion(
            "Model view: every layer × every head for this query, on one sheet", open=False, elem_id="vit-mv-panel"
        ):
            self.mv_btn = gr.Button("Draw the model view", size="sm", elem_id="vit-model-view-btn")
            gr.Markdown("Rows: layers (first at the top); columns: heads. Full screen to zoom; download as PNG.")
            self.mv_img = gr.Image(
                show_label=False,
                format="png",
                interactive=False,
                buttons=["download", "fullscreen"],
                elem_id="vit-model-view",
            )

    def _keep(self) -> None:
        """The link to this view and the download."""
        with gr.Row(equal_height=True):
            self.link_btn = gr.Button("Link to this view", size="sm", scale=0, min_width=170, elem_id="vit-link-btn")
            self.link_box = gr.Textbox(
                label="Link to this view (copy it with the button on the right)",
                interactive=False,
                visible=False,
                buttons=["copy"],  # (drawn only in a container: container=False hid it)
                elem_id="vit-link",
            )
            self.page_url = gr.Textbox(visible=False)  # the page's address, filled in by the browser
        self.dl_btn = gr.Button(
            "Download this view: raw float32 maps + every picture, one .npz", size="sm", elem_id="vit-download-btn"
        )
        self.download = gr.File(
            label="The .npz: np.load it, or unzip it for the PNGs",
            interactive=False,
            visible=False,
            height=60,
            elem_id="vit-download",
        )
