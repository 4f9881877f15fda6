"""The ViT tab's layout: every component, where it sits, its labels. `vit_tab` wires the events.

Controls on the left (results first on a phone, `vit_tab.css`), the large map beside every head's
map, then the scores, the model view, the features panel, the link and the download; the second
model below, side by side with the main one.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any, NamedTuple

import gradio as gr

from attention import render as vit_render
from attention.ui import vit_live
from attention.ui.components import image_path, number, slider, tiles_gallery
from attention.ui.vit_panels import ComparePanel, FeaturePanel
from attention.vit import models as vit_models
from attention.vit import session as vit_session
from attention.vit import views as vit_views
from attention.vit.session import Startup

VIT_DEFAULTS = {"resolution": "auto", "view": "heads", "threshold": 0.6, "alpha": 0.6, "cmap": "inferno"}
VIT_CSS = (resources.files("attention.ui") / "vit_tab.css").read_text()


class Layout(NamedTuple):
    """The tab's components by name (unpack in this order). depth: (layers, heads) of the start model."""

    state: Any
    depth: Any
    image: Any
    examples_slot: Any
    model: Any
    resolution: Any
    view: Any
    fusion: Any
    discard_ratio: Any
    discard_rule: Any
    layer: Any
    head: Any
    threshold: Any
    alpha: Any
    cmap: Any
    details: Any
    qimg: Any
    legend: Any
    qlabel: Any
    qrow: Any
    qcol: Any
    cls_btn: Any
    gallery: Any
    scores_md: Any
    score_bars: Any
    weight_bars: Any
    scores_df: Any
    mv_btn: Any
    mv_img: Any
    feats: Any
    link_btn: Any
    link_box: Any
    page_url: Any
    dl_btn: Any
    download: Any
    cmp: Any
    live: Any  # hidden: the browser's copy of the view, for instant redraws (vit_live)


def layout(s: Startup, vit_pass: Callable, fit: Callable) -> Layout:
    """Lay out the tab inside the caller's `gr.Tab` for start-up choice `s`; the components by name."""
    gr.Markdown(
        "Upload an image or pick an example: every head's attention from the **query token** (the CLS token, "
        "or any patch you click) is laid over the image. Changing layer, view, head, threshold, opacity or "
        "colours reuses your last forward pass, so it answers at once.",
        elem_id="vit-intro",
    )
    if s.notice:
        gr.HTML(
            f'<div style="border:1px solid #e0b000;background:#fff8e1;color:#5d4300;border-radius:6px;'
            f'padding:8px 12px">⚠️ {s.notice}</div>',
            elem_id="vit-notice",
        )
    state = gr.State(None, time_to_live=1800)
    depth = vit_session.depth(s.model)
    with gr.Row(equal_height=False, elem_id="vit-main"):
        with gr.Column(scale=2, min_width=280, elem_id="vit-controls"):
            image = image_path(
                type="filepath",
                image_mode=None,
                label="Image",
                format="png",
                sources=["upload", "clipboard"],
                height=220,
                elem_id="vit-image",
            )
            examples_slot = gr.Column()
            model = gr.Dropdown(
                [(f"{a} · {sp.description}", a) for a, sp in vit_models.REGISTRY.items()],
                value=s.model,
                allow_custom_value=True,
                label="Model",
                info="an alias, a timm ViT name, or hf-hub:org/repo",
                elem_id="vit-model",
            )
            resolution = gr.Dropdown(
                ["auto", "native", "dino480", "224", "320", "480", "640", "800"],
                value=VIT_DEFAULTS["resolution"],
                allow_custom_value=True,
                label="Resolution",
                info="shorter side, px (DINOv3: the height)",
                elem_id="vit-resolution",
            )
            view = gr.Radio(
                [(label, key) for key, label in vit_views.VIEWS.items()],
                value=VIT_DEFAULTS["view"],
                label="View",
                elem_id="vit-view",
            )
            with gr.Accordion("Rollout options", open=False, elem_id="vit-rollout-options"):
                fusion = gr.Radio(["mean", "max", "min"], value="mean", label="Head fusion", elem_id="vit-fusion")
                discard_ratio = slider(
                    0.0,
                    0.95,
                    value=0.0,
                    step=0.05,
                    label="Discard ratio",
                    info="share of the lowest attention dropped in each layer",
                    elem_id="vit-discard",
                )
                discard_rule = gr.Radio(
                    [("in each row", "row"), ("whole matrix, CLS kept (vit-explain)", "global")],
                    value="row",
                    label="Drop the lowest",
                    elem_id="vit-discard-rule",
                )
            layer = slider(
                0,
                depth[0] - 1,
                value=depth[0] - 1,
                step=1,
                label="Layer",
                info="0 = first; starts at the last",
                elem_id="vit-layer",
            )
            head = slider(
                0, depth[1] - 1, value=0, step=1, label="Head", info="or click a head's map", elem_id="vit-head"
            )
            threshold = slider(
                0.05,
                1.0,
                value=VIT_DEFAULTS["threshold"],
                step=0.05,
                label="Mask threshold",
                info="share of attention each mask keeps",
                elem_id="vit-threshold",
            )
            alpha = slider(
                0.0,
                1.0,
                value=VIT_DEFAULTS["alpha"],
                step=0.05,
                label="Overlay opacity",
                info="0 = image only",
                elem_id="vit-alpha",
            )
            cmap = gr.Dropdown(
                list(vit_render.COLORMAPS), value=VIT_DEFAULTS["cmap"], label="Colormap", elem_id="vit-cmap"
            )
        with gr.Column(scale=8, min_width=340, elem_id="vit-results"):
            details = gr.Markdown("Loading the first example...", elem_id="vit-details")
            with gr.Row(equal_height=False):
                with gr.Column(scale=7, min_width=320):
                    qimg = gr.Image(
                        label="The chosen head's map: click a patch to make it the query",
                        format="png",
                        interactive=False,
                        height=540,
                        elem_id="vit-query-image",
                        buttons=["download", "fullscreen"],
                    )
                    legend = gr.HTML(
                        vit_views.legend_html(VIT_DEFAULTS["cmap"]),
                        elem_id="vit-legend",
                        head=f"<style>{VIT_CSS}</style>",
                    )  # tab-local CSS (css= needs launch())
                    qlabel = gr.Markdown("**Query: the CLS token.**", elem_id="vit-query-label")
                    with gr.Row(equal_height=False):
                        qrow = number(None, label="Query row", precision=0, min_width=70, elem_id="vit-qrow")
                        qcol = number(None, label="Query col", precision=0, min_width=70, elem_id="vit-qcol")
                        cls_btn = gr.Button("Back to CLS", size="sm", min_width=90, elem_id="vit-cls")
                with gr.Column(scale=5, min_width=300):
                    gallery = tiles_gallery("Every head (click one to show it large)", 2, "vit-gallery")
            with gr.Accordion(
                "Scores vs weights: the query row of the chosen head, before and after softmax", open=False
            ):
                scores_md = gr.Markdown("", elem_id="vit-scores-summary")
                with gr.Row():
                    score_bars = gr.BarPlot(
                        x="token",
                        y="raw score",
                        color="token kind",
                        title="raw score q·k/√d",
                        height=300,
                        x_label_angle=-40,
                        elem_id="vit-score-bars",
                    )
                    weight_bars = gr.BarPlot(
                        x="token",
                        y="softmax weight",
                        color="token kind",
                        title="softmax weight",
                        height=300,
                        x_label_angle=-40,
                        elem_id="vit-weight-bars",
                    )
                scores_df = gr.Dataframe(
                    headers=vit_views.SCORE_HEADERS, interactive=False, elem_id="vit-scores", max_height=260
                )
            with gr.Accordion("Model view: every layer × every head for this query, on one sheet", open=False):
                mv_btn = gr.Button("Draw the model view", size="sm", elem_id="vit-model-view-btn")
                mv_img = gr.Image(
                    label="Rows: layers (first at the top); columns: heads. Full screen to zoom; download as PNG",
                    format="png",
                    interactive=False,
                    buttons=["download", "fullscreen"],
                    elem_id="vit-model-view",
                )
            feats = FeaturePanel(vit_pass, fit)
            with gr.Row(equal_height=True):
                link_btn = gr.Button("Link to this view", size="sm", scale=0, min_width=170, elem_id="vit-link-btn")
                link_box = gr.Textbox(
                    show_label=False,
                    interactive=False,
                    visible=False,
                    buttons=["copy"],
                    container=False,
                    elem_id="vit-link",
                )
                page_url = gr.Textbox(visible=False)  # the page's address, filled in by the browser
            dl_btn = gr.Button(
                "Download this view: raw float32 maps + every picture, one .npz", size="sm", elem_id="vit-download-btn"
            )
            download = gr.File(
                label="The .npz: np.load it, or unzip it for the PNGs",
                interactive=False,
                visible=False,
                height=60,
                elem_id="vit-download",
            )
    cmp = ComparePanel(vit_pass)
    live = vit_live.component()
    return Layout(
        state,
        depth,
        image,
        examples_slot,
        model,
        resolution,
        view,
        fusion,
        discard_ratio,
        discard_rule,
        layer,
        head,
        threshold,
        alpha,
        cmap,
        details,
        qimg,
        legend,
        qlabel,
        qrow,
        qcol,
        cls_btn,
        gallery,
        scores_md,
        score_bars,
        weight_bars,
        scores_df,
        mv_btn,
        mv_img,
        feats,
        link_btn,
        link_box,
        page_url,
        dl_btn,
        download,
        cmp,
        live,
    )
