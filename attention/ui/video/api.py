"""The stateless /attention_video endpoint, for `gradio_client` and MCP callers (and the Video sub-tab).

It takes a video file and plain parameters with defaults, answers with the MP4, the .npz of the raw
maps when asked (else None) and a JSON of facts, and keeps nothing for the caller. Video jobs share the
heavy lane with relevance (`attention.crowd.admission.HEAVY`: admitted when they ask to join, round-robin
between visitors, the slot handed on between batches of frames), each within the video budget
(`SETTINGS.video_*`).
"""

from __future__ import annotations

import gradio as gr

from attention.crowd.admission import HEAVY
from attention.errors import InputError
from attention.ui.common.admit import HEAVY_QUEUE, heavy_share, who
from attention.ui.common.api_docs import with_models
from attention.ui.common.components import user_errors
from attention.ui.common.endpoint import endpoint
from attention.validate import THRESHOLD, check_threshold
from attention.vit.engine import query as vit_query
from attention.vit.engine.video import STACKED, VIDEO_VIEWS, check_video_view
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve.video import visitor_video

CONCURRENCY = dict(validator=heavy_share(), **HEAVY_QUEUE)  # admitted at once or refused; computed in HEAVY's turn


def _optional(value, name: str) -> float | None:
    """An optional positive number: None for empty (None, NaN, blank, 0), else the float."""
    if vit_query.is_empty(value) or value == 0:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} {value!r} is not a number; accepted: a positive number, or empty.") from None


def _clip(layer, resolution, fps, seconds) -> dict:
    """The request's layer, resolution, frame rate and length, read one way for the estimate and the run (so
    the estimate refuses what the run would, and prices the same frames)."""
    return {
        "layer": vit_inputs.parse_layer(layer),
        "resolution": resolution or "auto",
        "fps": _optional(fps, "Frame rate"),
        "seconds": _optional(seconds, "Length"),
    }


def estimate_of(video, model, layer, resolution, fps, seconds, side_by_side):
    """The cost of the video the Video tab would make (`video_estimate.Estimate`; None: no video), with
    every refusal the run itself would give (over the frame cap or the budget, not a video, ...)."""
    from attention.config import SETTINGS
    from attention.vit.engine.video_estimate import estimate
    from attention.vit.models.loader import check_allowed, load_vit

    if video is None:
        return None
    vit = load_vit(check_allowed(model))
    return estimate(
        vit,
        video,
        side_by_side=bool(side_by_side),
        **_clip(layer, resolution, fps, seconds),
        max_frames=SETTINGS.video_max_frames,
        max_gflop=SETTINGS.video_budget_gflop(str(next(vit.parameters()).device)),
    )


def attention_video_fn(model_default: str):
    """The /attention_video handler, its default model bound."""

    @user_errors
    def attention_video(
        video,
        model=model_default,
        layer=-1,
        head=0,
        view="mean",
        threshold=0.6,
        resolution="auto",
        fps=None,
        seconds=None,
        side_by_side=False,
        npz=False,
        query_row=None,
        query_col=None,
        progress=gr.Progress(track_tqdm=True),
    ):
        """Attention video of a vision transformer (DINO, DINOv2, any timm ViT): every frame's attention, drawn over it.

        Returns (video, maps, info): an H.264 MP4 of the chosen view over each frame (optionally beside the
        frame); with npz, one .npz of every frame's raw float32 maps (frames, heads, rows, cols), mean, masks,
        times (else None); a dict of the facts (source size, fps, rotation, frames, grid, budget, timings).

        Args:
            video: the video (MP4, WebM, MOV, MKV, AVI or GIF; rotation metadata honoured, audio dropped).
            model: {models}.
            layer: {layer}.
            head: the head of the 'head' and 'masks' views (0 = first).
            view: 'mean' (mean of heads, DINO's video), 'head', 'masks' (one head's threshold mask) or 'fig3'.
            threshold: the share of attention each mask keeps, in (0, 1] (the masks and fig3 views).
            resolution: 'auto' (480 px for DINO), 'native', 'dino480' (480x480), or the shorter side in px.
            fps: output frames per second, 0.1 to 120; empty = the source's (a lower rate costs less).
            seconds: only the first this many seconds of the video; empty = all of it.
            side_by_side: true: the frame on the left, the attention on the right.
            npz: true: also return every frame's raw maps as an .npz.
            query_row: the query patch's row on the patch grid; both empty = the model's own token (CLS, else its
                attention-pooling head's query, else the centre patch).
            query_col: the query patch's column (give both, or neither for the model's own token).
        """
        report = None if progress is None else (lambda frac, desc: progress(frac, desc=desc))
        visitor = who()
        with HEAVY.held(visitor):  # admitted when it asked to join (`heavy_share`); computed in its turns
            return visitor_video(
                video,
                model,
                view=check_video_view(view),
                head=vit_inputs.parse_head(head),
                side_by_side=STACKED if side_by_side == STACKED else bool(side_by_side),
                npz=bool(npz),
                progress=report,
                query=vit_inputs.parse_query(query_row, query_col),
                threshold=check_threshold(THRESHOLD if vit_query.is_empty(threshold) else threshold),
                visitor=visitor,
                **_clip(layer, resolution, fps, seconds),
            )

    return with_models(attention_video)


def build(model_default: str) -> None:
    """Register /attention_video (hidden inputs, so every parameter after `video` has a default)."""
    with gr.Row(visible=False):
        endpoint(
            attention_video_fn(model_default),
            "attention_video",
            gr.File(type="filepath", label="video"),
            [gr.Video(label="video", format=None), gr.File(label="maps"), gr.JSON(label="info")],
            options={"view": {"info": ", ".join(VIDEO_VIEWS)}},
            **CONCURRENCY,
        )
