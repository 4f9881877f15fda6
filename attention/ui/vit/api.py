"""The ViT tab's stateless endpoints, for `gradio_client` and MCP callers: /attention_maps, /feature_maps.

Each takes an image and plain parameters with defaults, answers with one picture sheet, one data
file and a JSON of facts, and keeps nothing for the caller (passes are shared through the server's
bounded store, `passes.PASSES`). The docstrings' `Args:` describe each parameter to MCP clients.
"""

from __future__ import annotations

import gradio as gr

from attention.ui.common.admit import who
from attention.ui.common.api_docs import with_models
from attention.ui.common.components import answer_outputs, image_path, queue_share, user_errors
from attention.ui.common.endpoint import endpoint
from attention.ui.vit.fields import ROLLOUT_QUEUE
from attention.vit.draw import frames as vit_frames
from attention.vit.draw import outputs as vit_outputs
from attention.vit.draw.feature_views import write_feature_outputs
from attention.vit.engine.query import Query
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve import passes as vit_passes
from attention.vit.serve import rollouts


def pass_for(
    image, model, resolution, query_row, query_col, layer, *, one_query: bool = False, qk: bool = True
) -> tuple[vit_passes.Pass, Query | None, int]:
    """What every API call on one image's pass starts with, parsed once: (the pass, from the server's store
    for the visitor of the event, `who()`; the query, None = the model's own token; the layer index, None =
    the last). one_query: the forward records that query's rows only (one request, one query); qk: q and k kept."""
    query = vit_inputs.parse_query(query_row, query_col)
    layer = vit_inputs.parse_layer(layer)
    p = vit_passes.served_pass(image, model, resolution, who(), query=query if one_query else None, keep_qk=qk)
    return p, query, layer


def attention_maps_fn(model_default: str, defaults: dict):
    """The /attention_maps handler, its defaults bound (the start-up model, the tab's style)."""

    @user_errors
    def attention_maps(
        image,
        model=model_default,
        layer=-1,
        resolution=defaults["resolution"],
        view=defaults["view"],
        threshold=defaults["threshold"],
        query_row=None,
        query_col=None,
        head_fusion="mean",
        discard_ratio=0.0,
        discard="row",
    ):
        """Per-head self-attention maps of a vision transformer (DINO, DINOv2, any timm ViT) for one image.

        Returns (overlays, maps, info): one PNG sheet of the captioned overlays (one per head, then
        their mean, or the chosen view); one .npz of the raw float32 maps (heads, rows, cols), scores,
        weights and the image they were computed on; a dict of the facts (model, grid, layer, query,
        tiles with captions, forward_ms, render_ms).

        Args:
            image: {image}.
            model: {models}.
            layer: {layer}.
            resolution: {resolution}.
            view: 'heads', 'mean', 'masks' (DINO's thresholded masks), 'fig3' (coloured masks) or 'rollout'.
            threshold: the share of attention each mask keeps, in (0, 1] (the masks and fig3 views).
            query_row: {query_row}.
            query_col: {query_col}.
            head_fusion: rollout view: how each layer's heads are fused, 'mean', 'max' or 'min'.
            discard_ratio: rollout view: the share of the lowest attention dropped in each layer, 0 to below 1.
            discard: rollout view: drop the lowest 'row' (in each row) or 'global' (whole matrix, CLS kept).
        """
        threshold = defaults["threshold"] if threshold is None else threshold
        opts = dict(head_fusion=head_fusion, discard_ratio=0.0 if discard_ratio is None else discard_ratio)
        rollout_options = {**opts, "discard": discard}
        v = vit_inputs.view_request(
            view, threshold, query_row=query_row, query_col=query_col, layer=layer, rollout_options=rollout_options
        )  # parsed once, here: what follows trusts it
        keep_qk = v.view == "rollout"  # q/k kept for it only
        visitor = who()
        p = vit_passes.served_pass(image, model, resolution, visitor, query=v.query, keep_qk=keep_qk)
        rollouts.ready(p, v, visitor)  # priced; a heavy one computed in the heavy lane, not in this worker
        f = vit_frames.api_sheet(p, v)
        info = vit_outputs.describe(
            f.res, f.outputs, model=p.model, device=p.device, view=v.view, threshold=threshold, render_seconds=f.seconds
        )
        return f.outputs.sheet, f.outputs.npz, info

    return with_models(attention_maps)


def feature_maps_fn(model_default: str, defaults: dict):
    """The /feature_maps handler, its defaults bound."""

    @user_errors
    def feature_maps(
        image,
        model=model_default,
        layer=-1,
        resolution=defaults["resolution"],
        query_row=None,
        query_col=None,
        pca_background=0.0,
        pca="minmax",
    ):
        """Feature views of a vision transformer's patch tokens for one image: PCA colours, similarity, norms.

        Returns (picture, features, info): one PNG of the three views side by side; one .npz with exactly
        pca (rows, cols, 3) in [0, 1], similarity (rows, cols), norms (rows, cols) (float32), image and grid;
        a dict of the facts (model, grid, layer, query, the high-norm patches, what each view shows).

        Args:
            image: {image}.
            model: {models}.
            layer: whose output tokens: 0 = first block, -1 = last (after the final norm, as forward_features).
            resolution: {resolution}.
            query_row: the row of the patch whose similarity to every patch is shown; both empty = CLS.
            query_col: the column of that patch (give both, or neither for the model's own token).
            pca_background: 0 keeps every patch in the PCA; in (0, 1), drops patches whose first component is below it.
            pca: 'minmax' (each component min-max scaled) or 'dinov3' (DINOv3's notebook: whitened PCA fitted on the
                foreground, sigmoid(2x), background black; the .npz then also holds the foreground mask).
        """
        p, query, layer = pass_for(image, model, resolution, query_row, query_col, layer, one_query=True, qk=False)
        background = None if not pca_background else float(pca_background)
        return write_feature_outputs(p, query, layer, background=background, pca_style=pca or "minmax")

    return with_models(feature_maps)


def build(model_default: str, defaults: dict) -> None:
    """Register /attention_maps and /feature_maps (hidden inputs, so every parameter after `image` has a default)."""
    with gr.Row(visible=False):
        endpoint(
            attention_maps_fn(model_default, defaults),
            "attention_maps",
            image_path(type="filepath", image_mode=None, label="image"),
            answer_outputs("overlays"),
            validator=queue_share(),
            **ROLLOUT_QUEUE,
        )
        endpoint(
            feature_maps_fn(model_default, defaults),
            "feature_maps",
            image_path(type="filepath", image_mode=None, label="image"),
            [
                gr.Image(format="png", type="filepath", label="picture"),
                gr.File(label="features"),
                gr.JSON(label="info"),
            ],
            validator=queue_share(),
        )
