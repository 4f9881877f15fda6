"""The ViT attention maps tab: an image, a model and a query token in; every head's map out.

This module wires the events: which control's change, click or load runs which handler
(`handlers`), with what inputs and outputs, in which queue. Every control reuses the visitor's
pass from the server's shared store (`passes.PASSES`); the stateless endpoints for API and MCP
callers are in `api`.
"""

from __future__ import annotations

import gradio as gr

from attention.ui.common.components import queue_share
from attention.ui.vit import api as vit_api
from attention.ui.vit import examples as vit_examples
from attention.ui.vit import faithfulness_panel, relevance_panel, text_panel
from attention.ui.vit import layout as vit_layout
from attention.ui.vit import live as vit_live
from attention.ui.vit.fields import ROLLOUT_QUEUE, fit, vit_pass
from attention.ui.vit.handlers import ViTHandlers
from attention.ui.vit.layout import VIT_DEFAULTS
from attention.ui.vit.panels import Main
from attention.ui.vit.stepwise_api import build as build_stepwise_api
from attention.ui.vit.stepwise_panel import StepwisePanel
from attention.ui.vit.tour import build as build_tour
from attention.vit.models import registry as model_registry
from attention.vit.models import sources as vit_weights

FAULT = ["vit-fault"]  # the class (tab.css) of an input whose value could not be used


def build(demo: gr.Blocks | None = None) -> None:
    """The ViT attention maps tab, inside the caller's `gr.Tab`; registers /attention_maps.
    `demo`: the app, whose page load shows the start example's maps at once."""
    # decided when the tab is built (after `python app.py --model PATH` registered the operator's model):
    # cheap, a cache lookup, no network under HF_HUB_OFFLINE=1
    s = vit_weights.startup_model()
    first_image = vit_examples.start_image(s)
    t = vit_layout.ViTTab(s, vit_pass, fit)

    show = [
        t.caption,
        t.qimg,
        t.gallery,
        t.details,
        t.qlabel,
        t.scores_md,
        t.score_bars,
        t.weight_bars,
        t.scores_df,
        t.download,
        t.legend,
        t.layer,
        t.head,
        t.qrow,
        t.qcol,
        t.live,
    ]
    style = [t.layer, t.view, t.head, t.threshold, t.alpha, t.cmap]

    h = ViTHandlers(t, s, first_image)

    adopted = []  # events after which only "Why this class?" redraws: the first screen, an example's follow-up
    ropts = h.ropts
    inputs = [t.image, t.model, t.resolution, t.qrow, t.qcol, *style, t.state, *ropts, t.good]
    # what an answer may set: the view's outputs, and on a refusal every control back to the kept view
    restored = [t.good, t.note, t.image, t.model, t.resolution, t.view, t.threshold, t.alpha, t.cmap, *ropts]
    fast = dict(show_progress="minimal", api_visibility="private")
    # jobs that may run a forward: a visitor's share of the queue; and draw a rollout: room for the heavy lane's
    heavy_only = dict(validator=queue_share(), **ROLLOUT_QUEUE)
    heavy = dict(fast, **heavy_only)
    on_map = dict(fast, show_progress_on=[t.qimg], **ROLLOUT_QUEUE)  # one progress indicator (and error mark) per job
    on_map_heavy = dict(on_map, validator=queue_share())
    # one listener per input that can be at fault (a failure marks that input only; the last good maps
    # stay unmarked), one job per change: a dropdown's `input` fires twice for one pick (on the pick and
    # again on blur), its `change` once; "always_last" runs the latest change after a running one; each
    # may run a forward, so each asks for a turn within the visitor's share of the queue
    at = dict(trigger_mode="always_last", js=vit_live.AFTER_DRAWING, api_visibility="private", **heavy_only)
    quick = dict(queue=False, api_visibility="private")
    upload = t.image.upload(h.update, inputs, [*show, t.state, *restored], show_progress_on=[t.image], **at)
    # a file that failed: no broken picture left in the input, which is outlined until an image is read
    upload.failure(lambda: gr.update(value=None, elem_classes=FAULT), None, t.image, **quick)
    upload.success(lambda: gr.update(elem_classes=[]), None, t.image, **quick)
    changes = [
        upload,
        t.model.change(h.update, inputs, [*show, t.state, *restored], show_progress_on=[t.model], **at),
        t.resolution.change(h.update, inputs, [*show, t.state, *restored], show_progress_on=[t.resolution], **at),
        gr.on(
            [
                t.view.input,
                t.fusion.input,
                t.discard_ratio.release,
                t.discard_rule.input,
                t.cmap.input,
                t.layer.release,
                t.head.release,
                t.threshold.release,
                t.alpha.release,
            ],
            h.update,
            inputs,
            [*show, t.state, *restored],
            show_progress_on=[t.qimg],
            **at,
        ),
        gr.on(  # typed query fields: checked first, so only the field at fault is marked
            [t.qrow.submit, t.qcol.submit],
            h.update,
            inputs,
            [*show, t.state, *restored],
            **on_map,
            validator=queue_share(h.check_query),
        ),
        # clicks as changes: the latest runs after a running one (the browser has drawn it already)
        t.qimg.select(
            h.click,
            [t.image, t.model, t.resolution, *style, t.state, *ropts, t.good, t.clicked],
            [*show, t.state, *restored],
            trigger_mode="always_last",
            js=vit_live.AFTER_CLICK,
            **on_map_heavy,
        ),
        t.gallery.select(
            h.pick_head,
            inputs,  # the tile names the head
            [*show, t.state, *restored],
            trigger_mode="always_last",
            **on_map_heavy,
        ),
        t.cls_btn.click(lambda: (None, None), None, [t.qrow, t.qcol], api_visibility="private", queue=False).then(
            h.update, inputs, [*show, t.state, *restored], **on_map_heavy
        ),
    ]
    t.dl_btn.click(h.make_download, inputs, t.download, **heavy)
    t.mv_btn.click(h.model_sheet, inputs, t.mv_img, **heavy)
    t.link_btn.click(
        h.make_link,
        [t.image, t.model, t.resolution, t.qrow, t.qcol, t.layer, t.view, t.head, t.why.target, *style[3:], *ropts]
        + [t.find.prompts, t.find.rule, *t.find.options]
        + [t.page_url],
        t.link_box,
        js="(...args) => [...args.slice(0, -1), window.location.href]",
        **fast,
    )
    if demo is not None:
        adopted.append(  # the first screen: "Why this class?" follows it too
            demo.load(h.first_screen, None, [*show, t.state, *restored, t.why.target, *t.find.linked], **fast)
        )
    main = Main(
        t.image,
        t.resolution,
        t.qrow,
        t.qcol,
        t.layer,
        t.view,
        t.head,
        t.threshold,
        t.alpha,
        t.cmap,
        t.state,
        t.qimg,
        t.model,
        t.good,
    )
    t.cmp.follow(changes, main)
    t.feats.follow(changes, main)

    shown_by_examples = [c for c in show if c not in (t.download, t.qrow, t.qcol, t.live)]
    adopted += vit_examples.build(t, s, h.example, shown_by_examples, vit_pass, fast)
    then_update = lambda ev: ev.then(h.update, inputs, [*show, t.state, *restored], **on_map)  # noqa: E731
    t.why.follow([*changes, *adopted], main, on_query=then_update, compare=t.cmp.compare)
    with t.steps_slot:  # one head's row step by step, and the guided first visit that drives the tab
        steps = StepwisePanel(vit_pass, fit)
    steps.follow([*changes, *adopted], main)
    build_tour(t, steps, first_image, s.model, then_update, demo)
    t.find.follow([*changes, *adopted], main)
    t.faith.follow([*changes, *adopted], main, ropts)
    vit_api.build(s.model, VIT_DEFAULTS)
    build_stepwise_api(s.model, VIT_DEFAULTS)
    relevance_panel.build_api(model_registry.OFFLINE_MODEL)
    text_panel.build_api("digit_clip")
    faithfulness_panel.build_api(model_registry.OFFLINE_MODEL)
