"""The step by step's endpoints for `gradio_client` and MCP callers: /explain_row (the numbers as JSON) and
/export_view (one self-contained HTML file of a view), each from the server's store of passes, for the
event's visitor (session and client address: `vit_api.pass_for`)."""

from __future__ import annotations

import gradio as gr

from attention.ui.components import image_path, number, queue_share, user_errors
from attention.ui.stepwise_panel import export_view
from attention.ui.vit_api import pass_for
from attention.vit.draw import frames as vit_frames
from attention.vit.engine import stepwise
from attention.vit.serve import inputs as vit_inputs


def explain_row_fn(model_default: str):
    @user_errors
    def explain_row(
        image,
        model=model_default,
        layer=-1,
        head=0,
        query_row=None,
        query_col=None,
        k=16,
        temperature=1.0,
        key_row=None,
        key_col=None,
        resolution="auto",
    ):
        """One head's attention row for one query, step by step (the numbers as JSON).

        Returns q (the query vector as the kernel got it), k and v of the prefix tokens and the top-k patches,
        the element-wise products q*k for the selected key, the dot products, the scale, the additive bias (relpos,
        BEiT models; else null), the scores, the softmax weights of the whole row at the temperature, its map
        (rows x cols), the top share, the entropy (bits) and the row restricted to the kept keys (weights, output).

        Args:
            image: the image (PNG, JPEG, WebP, GIF, BMP or TIFF).
            model: a model alias (dino_vits16, dinov2_vits14_reg, dinov3_vits16, mnist_vit, ...).
            layer: the layer: 0 = first, -1 = last.
            head: the head, from 0.
            query_row: the query patch's row; both empty = the model's own token (CLS).
            query_col: the query patch's column.
            k: the top patches kept, 1 to 64.
            temperature: softmax(scores / temperature), 0.05 to 20; 1 = the model.
            key_row: the selected key's row (its products are returned); both empty = the top patch.
            key_col: the selected key's column.
            resolution: 'auto', 'native', 'dino480' or px.
        """
        key = vit_inputs.parse_query(key_row, key_col)
        hd = vit_inputs.parse_index(head or 0, "Head")
        p, q, lay = pass_for(image, model, resolution, query_row, query_col, layer)
        s = stepwise.explain_row(
            p,
            query=q,
            layer=lay,
            head=hd,
            k=16 if k is None else k,
            key=key,
            temperature=1.0 if temperature is None else temperature,
        )
        return {"model": p.model, **s.to_json()}

    return explain_row


def export_view_fn(model_default: str, defaults: dict):
    @user_errors
    def export_view_api(
        image,
        model=model_default,
        layer=-1,
        head=0,
        query_row=None,
        query_col=None,
        view=defaults["view"],
        k=16,
        temperature=1.0,
        resolution="auto",
    ):
        """The view as one self-contained HTML file: the large map, every head's tile and the step by step of
        the head, every picture inline (no server needed to open it).

        Args:
            image: the image (PNG, JPEG, WebP, GIF, BMP or TIFF).
            model: a model alias (dino_vits16, dinov2_vits14_reg, dinov3_vits16, mnist_vit, ...).
            layer: the layer: 0 = first, -1 = last.
            head: the head, from 0.
            query_row: the query patch's row; both empty = the model's own token (CLS).
            query_col: the query patch's column.
            view: 'heads', 'mean', 'masks', 'fig3' or 'rollout'.
            k: the top patches kept in the step by step, 1 to 64.
            temperature: the step by step's softmax temperature, 0.05 to 20.
            resolution: 'auto', 'native', 'dino480' or px.
        """
        hd = vit_inputs.parse_index(head or 0, "Head")
        p, q, lay = pass_for(image, model, resolution, query_row, query_col, layer)
        v = vit_frames.ViewSpec(
            query=q,
            layer=lay,
            view=view,  # checked once, by the ViewSpec
            threshold=defaults["threshold"],
            alpha=defaults["alpha"],
            cmap=defaults["cmap"],
        )
        return str(export_view(p, v, hd, 16 if k is None else k, 1.0 if temperature is None else temperature))

    return export_view_api


def build(model_default: str, defaults: dict) -> None:
    """Register /explain_row (JSON) and /export_view (an HTML file)."""
    with gr.Row(visible=False):
        img = image_path(type="filepath", image_mode=None, label="image")
        mdl = gr.Textbox(model_default, label="model")
        lay, hd = number(-1, label="layer"), number(0, label="head")
        qr, qc = number(None, label="query_row"), number(None, label="query_col")
        k, temp = number(16, label="k"), number(1.0, label="temperature")
        kr, kc = number(None, label="key_row"), number(None, label="key_col")
        res, view = gr.Textbox("auto", label="resolution"), gr.Textbox(defaults["view"], label="view")
        out, page = gr.JSON(label="steps"), gr.File(label="page")
        b1, b2 = gr.Button("explain_row"), gr.Button("export_view")
    b1.click(
        explain_row_fn(model_default),
        [img, mdl, lay, hd, qr, qc, k, temp, kr, kc, res],
        out,
        api_name="explain_row",
        api_visibility="public",
        validator=queue_share(),
    )
    b2.click(
        export_view_fn(model_default, defaults),
        [img, mdl, lay, hd, qr, qc, view, k, temp, res],
        page,
        api_name="export_view",
        api_visibility="public",
        validator=queue_share(),
    )
