"""The step by step's endpoints for `gradio_client` and MCP callers: /explain_row (the numbers as JSON) and
/export_view (one self-contained HTML file of a view), each from the server's store of passes, for the
event's visitor (session and client address: `api.pass_for`)."""

from __future__ import annotations

import gradio as gr

from attention.ui.common.api_docs import with_models
from attention.ui.common.components import image_path, queue_share, user_errors
from attention.ui.common.endpoint import endpoint
from attention.ui.vit.api import pass_for
from attention.ui.vit.fields import ROLLOUT_QUEUE
from attention.ui.vit.stepwise_panel import export_view
from attention.vit.draw import frames as vit_frames
from attention.vit.engine import query as vit_query
from attention.vit.engine import stepwise
from attention.vit.serve import inputs as vit_inputs


def _knobs(k, temperature) -> dict:
    """The step by step's k and temperature as sent, an empty one (None, NaN, blank) its default
    (`stepwise.K`, `stepwise.TEMPERATURE`); the engine checks their ranges."""
    return {
        "k": stepwise.K if vit_query.is_empty(k) else k,
        "temperature": stepwise.TEMPERATURE if vit_query.is_empty(temperature) else temperature,
    }


def explain_row_fn(model_default: str):
    @user_errors
    def explain_row(
        image,
        model=model_default,
        layer=-1,
        head=0,
        query_row=None,
        query_col=None,
        k=stepwise.K,
        temperature=stepwise.TEMPERATURE,
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
            image: {image}.
            model: {models}.
            layer: {layer}.
            head: {head}.
            query_row: {query_row}.
            query_col: {query_col}.
            k: the top patches kept, 1 to 64.
            temperature: softmax(scores / temperature), 0.05 to 20; 1 = the model.
            key_row: the selected key's row (its products are returned); both empty = the top patch.
            key_col: the selected key's column.
            resolution: {resolution}.
        """
        key = vit_inputs.parse_query(key_row, key_col)
        hd = vit_inputs.parse_head(head)
        p, q, lay = pass_for(image, model, resolution, query_row, query_col, layer)
        s = stepwise.explain_row(p, query=q, layer=lay, head=hd, key=key, **_knobs(k, temperature))
        return {"model": p.model, **s.to_json()}

    return with_models(explain_row)


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
        k=stepwise.K,
        temperature=stepwise.TEMPERATURE,
        resolution="auto",
    ):
        """The view as one self-contained HTML file: the large map, every head's tile and the step by step of
        the head, every picture inline (no server needed to open it).

        Args:
            image: {image}.
            model: {models}.
            layer: {layer}.
            head: {head}.
            query_row: {query_row}.
            query_col: {query_col}.
            view: 'heads', 'mean', 'masks', 'fig3' or 'rollout'.
            k: the top patches kept in the step by step, 1 to 64.
            temperature: the step by step's softmax temperature, 0.05 to 20.
            resolution: {resolution}.
        """
        hd = vit_inputs.parse_head(head)
        p, q, lay = pass_for(image, model, resolution, query_row, query_col, layer)
        v = vit_frames.ViewSpec(
            query=q,
            layer=lay,
            view=view,  # checked once, by the ViewSpec
            threshold=defaults["threshold"],
            alpha=defaults["alpha"],
            cmap=defaults["cmap"],
        )
        return str(export_view(p, v, hd, **_knobs(k, temperature)))

    return with_models(export_view_api)


def build(model_default: str, defaults: dict) -> None:
    """Register /explain_row (JSON) and /export_view (an HTML file)."""
    with gr.Row(visible=False):
        endpoint(
            explain_row_fn(model_default),
            "explain_row",
            image_path(type="filepath", image_mode=None, label="image"),
            [gr.JSON(label="steps")],
            validator=queue_share(),
        )
        endpoint(
            export_view_fn(model_default, defaults),
            "export_view",
            image_path(type="filepath", image_mode=None, label="image"),
            [gr.File(label="page")],
            validator=queue_share(),
            **ROLLOUT_QUEUE,
        )
