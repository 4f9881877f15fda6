"""The ViT tab's examples: the first screen's image, and the galleries of shipped pictures (digits
through mnist_vit; photos through the default model when its weights are at hand), whose outputs
Gradio caches, then fits to the visitor's own state (`adopt`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gradio as gr

from attention.config import EXAMPLES_DIR
from attention.ui.common import a11y
from attention.ui.common.components import user_errors
from attention.ui.vit import live as vit_live
from attention.ui.vit.refusals import accepted
from attention.vit.draw.views import check_view
from attention.vit.engine import request
from attention.vit.models import loader as vit_models
from attention.vit.models import registry as model_registry
from attention.vit.models.sources import Startup

VIT_PHOTOS = [
    "chelsea",
    "astronaut",
    "coffee",
    "rocket",
    "grace_hopper",
    "china",
    "flower",
    "camera",
    "coins",
    "hubble_deep_field",
    "retina",
]


DIGIT_TEXT_MODELS = ("digit_clip",)  # models with a text tower that read the shipped digits
PRIVATE = {"api_visibility": "private", "show_progress": "hidden"}


def remembered(model: str):
    """The kept text model after the model control changed by any means: a digit text model is kept, mnist_vit
    (a digit example sets it) leaves the kept one as it is (`gr.skip`), any other model clears it."""
    if model in DIGIT_TEXT_MODELS:
        return model
    return gr.skip() if model == model_registry.OFFLINE_MODEL else None


def start_image(startup: Startup) -> str:
    """The first screen's image: a photo through the default model when its weights are at hand, else a
    digit through mnist_vit."""
    photo = EXAMPLES_DIR / "photos" / "chelsea.jpg"
    return str(photo if startup.default_available else EXAMPLES_DIR / "digits" / "digit_3.png")


def build(t, startup: Startup, example: Callable, shown: list, vit_pass: Callable, after: dict) -> list:
    """The example galleries in `t.examples_slot`: `example` (image, model, resolution, view, threshold,
    opacity, colormap) -> the values of `shown` (cached by Gradio, lazily); after each is shown, the
    visitor's pass (`vit_pass`) fits the sliders, the query and the browser's copy (`after`: the
    event's options). Returns those follow-up events."""

    @user_errors
    def adopt(img, mdl, res, vw, al, cm):
        """After an example is shown (from the examples cache): the visitor's pass (computed now if no
        longer kept, so the next change is instant), sliders fitted to the model, query CLS, and the
        browser's copy of the view."""
        p = vit_pass(img, mdl, res)
        return {
            t.gallery: gr.update(selected_index=0),
            t.live: vit_live.value(p, p.at(None, -1), check_view(vw), 0, al, cm),
            t.layer: gr.update(maximum=p.num_layers - 1, value=p.num_layers - 1),
            t.head: gr.update(maximum=p.num_heads - 1, value=0),
            t.qrow: None,
            t.qcol: None,
            t.state: p.ref,
            t.good: accepted(image=img, model=mdl, resolution=res, qrow=None, qcol=None, layer=p.num_layers - 1)
            | accepted(view=vw, head=0, alpha=al, cmap=cm),
            t.note: gr.update(value="", visible=False),
        }

    ex_in = [t.image, t.model, t.resolution, t.view, t.threshold, t.alpha, t.cmap]
    row = [request.RESOLUTION, request.VIEW.default, request.THRESHOLD.default, request.OPACITY.default]
    row += [request.CMAP.default]
    digits = [[str(EXAMPLES_DIR / "digits" / f"digit_{i}.png"), model_registry.OFFLINE_MODEL, *row] for i in range(10)]
    photos = [[str(EXAMPLES_DIR / "photos" / f"{n}.jpg"), vit_models.default_model(), *row] for n in VIT_PHOTOS]
    sets = [("Digits · mnist_vit (ships with the app)", digits, "vit_digit_examples")]
    if startup.default_available:
        sets.insert(0, (f"Photos · {vit_models.default_model()}", photos, "vit_photo_examples"))
    kept = gr.State(None)  # a text model the visitor picked that reads the digits: digit examples keep it
    t.model.input(lambda m: m if m in DIGIT_TEXT_MODELS else None, t.model, kept, queue=False, **PRIVATE)
    # set without a pick too (a permalink's ?model=digit_clip); mnist_vit set by a digit example leaves it as it was
    t.model.change(remembered, t.model, kept, queue=False, **PRIVATE)

    def keep_model(mdl, chosen):
        """A digit example after the visitor picked a model that reads digits with a text tower: that model
        stays (the example's own outputs were mnist_vit's: drawn again below)."""
        return chosen if chosen and mdl == model_registry.OFFLINE_MODEL else mdl

    @user_errors
    def redraw(img, mdl, res, vw, thr, al, cm):
        """The example's outputs again for the kept model; nothing to do when the example's own model stayed."""
        if mdl == model_registry.OFFLINE_MODEL:
            return {c: gr.skip() for c in shown}
        return example(img, mdl, res, vw, thr, al, cm)

    adopted, names = [], {}
    with t.examples_slot:
        for label, rows, api in sets:
            # each thumbnail's name for screen readers (Gradio draws it as a button holding only the picture)
            names[f"#{api.replace('_', '-')} button.gallery-item"] = [
                f"Example: {Path(r[0]).stem.replace('_', ' ')}" for r in rows
            ]
            ex = gr.Examples(
                rows,
                ex_in,
                shown,
                fn=example,
                cache_examples=True,
                cache_mode="lazy",
                label=label,
                visible_columns=[0],
                examples_per_page=11,
                api_name=api,
                api_visibility="private",
                elem_id=api.replace("_", "-"),
            )
            loaded = ex.load_input_event
            if api == "vit_digit_examples":
                loaded = loaded.then(keep_model, [t.model, kept], t.model, queue=False, **PRIVATE)
                loaded = loaded.then(redraw, ex_in, shown, **after)
            adopted.append(
                loaded.then(
                    adopt,
                    [t.image, t.model, t.resolution, t.view, t.alpha, t.cmap],
                    [t.layer, t.head, t.qrow, t.qcol, t.state, t.live, t.gallery, t.good, t.note],
                    **after,
                )
            )
        a11y.component(names, "vit-examples-names")
    return adopted
