"""The ViT tab's Video sub-tab: a video in, every frame's attention out as a video that plays in the page.

The same model, layer, head, view and threshold controls as for images; a progress bar per frame; the
run's cost on this server shown before it runs (over CONFIRM_S, confirmed first); the handler is the
/attention_video endpoint's (`video.api`), which also registers here.
"""

from __future__ import annotations

import gradio as gr

from attention.config import EXAMPLES_DIR, SETTINGS
from attention.errors import AttentionError, ModelLoadError, markdown_text
from attention.ui.common import model_choices
from attention.ui.common.components import error, error_note, number, queue_share, user_errors, warning
from attention.ui.video import api as video_api
from attention.vit.engine.video import STACKED, VIDEO_VIEWS
from attention.vit.engine.video_estimate import CONFIRM_S
from attention.vit.models import loader as vit_models
from attention.vit.models import registry as model_registry
from attention.vit.models import sources as vit_weights
from attention.vit.models.sources import Startup

DIGITS_CLIP = str(EXAMPLES_DIR / "videos" / "digits.mp4")
PHOTO_CLIP = str(EXAMPLES_DIR / "videos" / "chelsea.mp4")
NARROW_PX = 700  # a page narrower than this (a phone) gets a side-by-side result stacked: frame above map
# the page's width goes with the inputs (`layout`); on a narrow page the run's progress and its result are
# drawn under every control, so the page is brought there as the run starts
PAGE_WIDTH_JS = (
    f"(...args) => {{ if (window.innerWidth < {NARROW_PX}) "
    "document.querySelector('#video-out')?.scrollIntoView({block: 'start'}); "
    "return [...args.slice(0, -1), window.innerWidth]; }"
)


def layout(side_by_side: bool, page_width) -> bool | str:
    """The composition of the result: side by side (the checkbox), stacked where the page is narrow."""
    narrow = isinstance(page_width, int | float) and 0 < page_width < NARROW_PX
    return STACKED if side_by_side and narrow else bool(side_by_side)


def summary(facts: dict) -> str:
    """One markdown line of an answer's facts: frames, rate, size, grid, model, device, seconds."""
    o, src = facts["output"], facts["source"]
    rot = f", rotated {src['rotation']}°" if src["rotation"] else ""
    return (
        f"<code>{markdown_text(facts['model'])}</code> · layer {facts['layer']} · "
        f"{o['frames']} frames at {o['fps']:g} fps · "
        f"{o['width']}×{o['height']} px · grid {facts['grid'][0]}×{facts['grid'][1]} · source "
        f"{src['width']}×{src['height']} px, {src['duration_s']:g} s at {src['fps']:g} fps{rot} · {facts['device']} · "
        f"forward {facts['forward_s']:.1f} s of {facts['total_s']:.1f} s"
    )


def build(startup: Startup | None = None) -> None:
    """The Video sub-tab, inside the caller's `gr.Tab`; registers /attention_video. `startup`: the
    start-up model (default: the image tab's rule, `sources.startup_model`)."""
    startup = startup or vit_weights.startup_model()
    gr.Markdown(
        "Upload a short video or pick an example: each frame goes through the model (in batches of frames, one "
        "forward each) and the chosen view of its attention is drawn over it, as in DINO's attention videos. "
        f"This server takes up to {SETTINGS.video_max_frames:,} frames per video; a lower frame rate or a shorter "
        "length costs less.",
        elem_id="video-intro",
    )
    with gr.Row(equal_height=False, elem_id="video-main"):
        with gr.Column(scale=2, min_width=280, elem_id="video-controls"):
            video = gr.Video(
                label="Video", sources=["upload"], format=None, include_audio=True, height=220, elem_id="video-in"
            )
            # the run, its cost on this server and (over CONFIRM_S) its confirmation: on the first screen
            estimate = gr.Markdown("Pick a video: its cost shows here before it runs.", elem_id="video-estimate")
            confirm = gr.Checkbox(False, label="Run it anyway", visible=False, elem_id="video-confirm")
            run = gr.Button("Make the attention video", variant="primary", elem_id="video-run")
            examples = gr.Column()
            model = gr.Dropdown(
                model_choices.choices(),
                value=startup.model,
                allow_custom_value=True,
                label="Model",
                elem_id="video-model",
            )
            resolution = gr.Dropdown(
                ["auto", "native", "dino480", "56", "224", "320", "480"],  # 56: the digit example's
                value="auto",
                allow_custom_value=True,
                label="Resolution",
                info="shorter side, px",
                elem_id="video-resolution",
            )
            view = gr.Radio([(label, key) for key, label in VIDEO_VIEWS.items()], value="mean", label="View")
            with gr.Row():
                layer = number(-1, label="Layer", info="-1 = last", precision=0, elem_id="video-layer")
                head = number(0, label="Head", info="head and mask views", precision=0, elem_id="video-head")
            threshold = gr.Slider(0.05, 1.0, value=0.6, step=0.05, label="Threshold", info="share of mass kept")
            with gr.Row():
                fps = number(0, label="Frame rate", info="0 = the source's", elem_id="video-fps")
                seconds = number(0, label="Seconds", info="0 = all of it", elem_id="video-seconds")
            with gr.Row():
                side = gr.Checkbox(
                    True, label="Side by side with the frame", info="on a phone: above it", elem_id="video-side"
                )
                npz = gr.Checkbox(False, label="Raw maps (.npz) too", elem_id="video-npz")
        with gr.Column(scale=3, elem_id="video-results"):
            out = gr.Video(label="Attention video", autoplay=True, loop=True, interactive=False, elem_id="video-out")
            details = gr.Markdown(elem_id="video-details")
            maps = gr.File(label="Raw maps (.npz)", visible=False, elem_id="video-maps")
            page_width = gr.Number(0, visible=False)  # set in the browser by PAGE_WIDTH_JS at each run

    with examples:  # mnist_vit's layer-2 head 3 follows a digit anywhere in the frame (tests/vit/engine/test_video.py)
        # (56 px: the clip's own size, so the next upload is not run at its native size by mnist_vit)
        rows = [[DIGITS_CLIP, model_registry.OFFLINE_MODEL, "56", 2, "head", 3]]
        if startup.default_available:
            rows.insert(0, [PHOTO_CLIP, vit_models.default_model(), "auto", -1, "mean", 0])
        gr.Examples(rows, [video, model, resolution, layer, view, head], label="Examples", cache_examples=False)

    handler = video_api.attention_video_fn(startup.model)

    @user_errors  # a file that is not a video: its message, no traceback (the estimate reads it first)
    def make(v, m, lay, hd, vw, thr, res, f, sec, sbs, want_npz, sure, width=0, progress=gr.Progress(track_tqdm=True)):
        est = video_api.estimate_of(v, m, lay, res, f, sec, sbs)
        if est is not None and est.needs_confirmation and not sure:
            warning(f"This video would take {est.text().split('about ')[-1]}: tick 'Run it anyway' to make it.")
            return gr.skip(), gr.skip(), gr.skip()
        if (e := _unavailable(m)) is not None:  # said to the visitor in one line (the operator's fix: the log)
            raise error(e)
        sbs = layout(sbs, width)
        mp4, npz_path, facts = handler(v, m, lay, hd, vw, thr, res, f, sec, sbs, want_npz, None, None, progress)
        return mp4, summary(facts), gr.update(value=npz_path, visible=npz_path is not None)

    def _unavailable(m) -> str | None:
        name = (m or "").strip()
        if name in vit_models.REGISTRY and model_choices.unavailable(name):
            return model_choices.visitor_text(ModelLoadError(f"{name}: weights not here"), name)
        return None

    def priced(v, m, lay, res, f, sec, sbs):
        """The estimate line and the confirmation box for the video and settings chosen."""
        if v is None:
            return "Pick a video: its cost shows here before it runs.", gr.update(visible=False, value=False)
        try:
            est = video_api.estimate_of(v, m, lay, res, f, sec, sbs)
        except AttentionError as e:
            return error_note(model_choices.visitor_text(e, m)), gr.update(visible=False, value=False)
        over = est.needs_confirmation
        note = f" · over {CONFIRM_S:.0f} s: confirm below" if over else ""
        return f"**Cost:** {est.text()}{note}", gr.update(visible=over, value=False)

    cost_in = [video, model, layer, resolution, fps, seconds, side]
    for ev in (video.change, model.change, resolution.change, layer.blur, fps.blur, seconds.blur, side.input):
        ev(
            priced,
            cost_in,
            [estimate, confirm],
            api_visibility="private",
            show_progress="minimal",
            validator=queue_share(),
        )
    run.click(
        make,
        [video, model, layer, head, view, threshold, resolution, fps, seconds, side, npz, confirm, page_width],
        [out, details, maps],
        js=PAGE_WIDTH_JS,
        api_visibility="private",
        show_progress_on=[out],
        **video_api.CONCURRENCY,
    )
    video_api.build(startup.model)
