"""The ViT tab's "Why this class?" view, for classifier models (mnist_vit, DeiT, supervised ViTs): the
top-5 classes as clickable bars, the relevance map of the chosen class large, the CLS attention of the
same pass beside it; and the stateless /relevance endpoint for API and MCP callers.

The panel follows the main view (image, model, resolution, query): a click on its relevance map makes
that patch the main view's query; the chosen class travels in permalinks as `&class=`.
"""

from __future__ import annotations

import gradio as gr
import numpy as np

from attention.crowd.admission import HEAVY
from attention.errors import AttentionError, html_text
from attention.render import mark_patch
from attention.ui.common.admit import heavy_endpoint, in_lane, who
from attention.ui.common.api_docs import with_models
from attention.ui.common.components import answer_outputs, error_note, image_path, number, picture, user_errors
from attention.vit.draw.drawing import QUERY_COLOR
from attention.vit.relevance.labels import short_name
from attention.vit.relevance.service import get_relevance, is_classifier
from attention.vit.relevance.views import enlarged, tiles, write_answer
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve.passes import known_digest

BARS = 5  # the top classes; one more bar shows the chosen class when it is not among them
MAP_SIDE = 480  # px: the shorter side of the view's maps (enlarged by a whole factor)
FAST = dict(show_progress="minimal", api_visibility="private")
RULES = {"chefer": "Chefer et al. 2021 (generic rule)", "grad_rollout": "grad-rollout (vit-explain)"}
CSS = (
    "#vit-relevance .rel-bar{justify-content:flex-start;text-align:left;font-variant-numeric:tabular-nums;"
    "background:linear-gradient(90deg,#fcd9a0 var(--w),transparent var(--w));border:1px solid #e5c48a}"
    "#vit-relevance .rel-bar.rel-chosen{background:linear-gradient(90deg,#f59e0b var(--w),#fff3dc var(--w));"
    "font-weight:700;border:2px solid #b45309}" + "".join(f"#vit-relevance .rel-w{i}{{--w:{i}%}}" for i in range(101))
)


class RelevancePanel:
    """The "Why this class?" view; hidden while the main model has no classifier head."""

    def __init__(self):
        self.target = number(None, visible=False, precision=0, elem_id="vit-rel-target")  # chosen class; None: top
        self.top = gr.State([])  # the bars' class indices
        self.chosen_for = gr.State(None)  # the model the chosen class belongs to (another model: its top class)
        with gr.Column(visible=False, elem_id="vit-relevance") as self.box:
            gr.HTML("<h3 style='margin:4px 0'>Why this class?</h3>", head=f"<style>{CSS}</style>")
            self.details = gr.Markdown("", elem_id="vit-rel-details")
            with gr.Row(equal_height=False):
                with gr.Column(scale=3, min_width=220, elem_id="vit-rel-classes"):
                    gr.Markdown("**Top classes** (click one to explain it)")
                    self.bars = [
                        gr.Button("", visible=False, size="sm", elem_classes=["rel-bar"], elem_id=f"vit-rel-bar-{i}")
                        for i in range(BARS + 1)
                    ]
                    self.rule = gr.Radio(
                        [(v, k) for k, v in RULES.items()],
                        value="chefer",
                        label="Relevance rule",
                        elem_id="vit-rel-rule",
                    )
                with gr.Column(scale=5, min_width=280):
                    self.relimg = picture(
                        label="Relevance for the chosen class (click a patch to query it)",
                        height=420,
                        elem_id="vit-rel-map",
                    )
                with gr.Column(scale=4, min_width=240):
                    self.attimg = picture(
                        label="Attention of CLS, last layer (the same for every class)",
                        height=320,
                        elem_id="vit-rel-attn",
                    )
                    self.cmpimg = picture(  # the compare panel's second model, when it is a classifier too
                        label="Second model", height=320, visible=False, elem_id="vit-rel-compare"
                    )
            self.caption = gr.Markdown("", elem_id="vit-rel-caption")

    @property
    def outputs(self) -> list:
        return [self.box, self.details, *self.bars, self.top, self.relimg, self.attimg, self.cmpimg, self.caption] + [
            self.target,
            self.chosen_for,
        ]

    def second(self, img, cmp, res, rel, rule, al, cm, digest=None) -> dict:
        """The compare panel's second model's relevance for the same class (its own top class when its classes
        are other ones), when it is a classifier; else hidden."""
        if not cmp or not is_classifier(cmp):
            return gr.update(visible=False, value=None)
        try:
            other = get_relevance(img, cmp, res, visitor=who(), digest=digest)
            same = other.names == rel.names
            if same and other.target != rel.target:
                other = get_relevance(img, cmp, res, rel.target, visitor=who(), digest=digest)
        except AttentionError as e:
            return gr.update(visible=True, value=None, label=f"Second model: {e}")
        pic = {t.name: t.image for t in tiles(other, alpha=al, cmap=cm, min_side=MAP_SIDE)}[rule]
        what = "the same class" if same else f"its own top class, '{short_name(other.names[other.target])}'"
        return gr.update(visible=True, value=pic, label=f"Second model, {cmp.strip()}: relevance for {what}")

    def draw(
        self, img, mdl, res, target, rule, qr, qc, al, cm, chosen_for=None, cmp=None, st=None, progress=gr.Progress()
    ):
        """The view for the main view's image, model and resolution; hidden for a model without a head.
        target: the chosen class, kept while the model is the one it was chosen for (`chosen_for`; None: any).
        cmp: the compare panel's second model. st: the main view's state (`passes.Ref`): the upload's digest
        from it, when it was made from this file (`passes.known_digest`), not hashed again."""
        if img is None or not is_classifier(mdl):
            return {self.box: gr.update(visible=False)}
        if chosen_for is not None and chosen_for != mdl:
            target = None  # a class index of another model
        try:
            digest = known_digest(st, img)
            rel = get_relevance(img, mdl, res, None if target is None else int(target), visitor=who(), digest=digest)
        except AttentionError as e:
            return {self.box: gr.update(visible=True), self.details: error_note(e)}
        ts = {t.name: t.image for t in tiles(rel, alpha=al, cmap=cm, min_side=MAP_SIDE)}
        step = enlarged(rel, MAP_SIDE).shape[0] // rel.grid[0]
        q = vit_inputs.parse_query(qr, qc)
        rule = rule if rule in RULES else "chefer"
        pics = [ts[rule], ts["attention"]]
        if isinstance(q, tuple) and 0 <= q[0] < rel.grid[0] and 0 <= q[1] < rel.grid[1]:
            pics = [mark_patch(p, q, step, color=QUERY_COLOR) for p in pics]
        top = rel.top(BARS)
        if rel.target not in [i for i, _, _ in top]:
            top.append((rel.target, rel.names[rel.target], float(rel.probs[rel.target])))
        bars = [
            gr.update(
                value=f"{short_name(n)} · {p:.1%}",
                visible=True,
                elem_classes=["rel-bar", f"rel-w{round(p * 100)}"] + (["rel-chosen"] if i == rel.target else []),
            )
            for i, n, p in top
        ] + [gr.update(visible=False)] * (BARS + 1 - len(top))
        name = html_text(short_name(rel.names[rel.target]))
        how = {
            "chefer": "each layer's attention weighted by its gradient for this class (positive part, mean of heads), "
            "carried through the layers (Chefer, Gur & Wolf, ICCV 2021)",
            "grad_rollout": "rollout of the attention weighted by its gradient for this class, its lowest 90% dropped "
            "in each layer (jacobgil/vit-explain)",
        }[rule]
        return {
            self.box: gr.update(visible=True),
            self.details: f"Explaining **'{name}'** ({rel.probs[rel.target]:.1%}) · grid {rel.grid[0]}×{rel.grid[1]} "
            f"· {rel.seconds * 1e3:.0f} ms for one forward and one backward pass",
            **dict(zip(self.bars, bars)),
            self.top: [i for i, _, _ in top],
            self.relimg: pics[0],
            self.attimg: pics[1],
            self.cmpimg: self.second(img, cmp, res, rel, rule, al, cm, digest),
            self.target: target,
            self.chosen_for: mdl,
            self.caption: f"**Left: why '{name}'.** Which patches made the model say '{name}': {how}. "
            "**Right: where the CLS token looks** in the last layer, mean of heads: attention, the same whatever "
            "the class. Bright = more.",
        }

    def patch_at(self, img, mdl, res, target, x: float, y: float) -> tuple[int, int]:
        """(row, col) of the patch under pixel (x, y) of the relevance map (clamped to the grid)."""
        rel = get_relevance(img, mdl, res, None if target is None else int(target), visitor=who())
        step = enlarged(rel, MAP_SIDE).shape[0] // rel.grid[0]
        return min(rel.grid[0] - 1, max(0, int(y // step))), min(rel.grid[1] - 1, max(0, int(x // step)))

    def follow(self, events: list, main, on_query=None, compare=None) -> None:
        """Redraw after each of `events` succeeds, on a bar click, a rule change and a new second model
        (`compare`, the compare panel's dropdown). `on_query(event)`: chains the main view's update after a
        click on the relevance map has set the query fields."""
        ins = [main.image, main.model, main.resolution, self.target, self.rule, main.qrow, main.qcol]
        ins += [main.alpha, main.cmap, self.chosen_for, compare if compare is not None else gr.State(None), main.state]
        draw = in_lane(user_errors(self.draw))  # in the heavy lane's threads, at ATTENTION_HEAVY_NICE
        for ev in events:
            ev.success(draw, ins, self.outputs, **FAST)
        self.rule.input(draw, ins, self.outputs, **FAST)
        if compare is not None:
            compare.input(draw, ins, self.outputs, **FAST)
        for i, bar in enumerate(self.bars):
            bar.click(
                lambda top, i=i: top[i] if i < len(top) else None, self.top, self.target, queue=False, **FAST
            ).then(draw, ins, self.outputs, **FAST)

        @user_errors
        def click(img, mdl, res, target, evt: gr.SelectData):
            """A click on the relevance map: that patch becomes the main view's query (row, col)."""
            return self.patch_at(img, mdl, res, target, *evt.index)

        clicked = self.relimg.select(
            click,
            [main.image, main.model, main.resolution, self.target],
            [main.qrow, main.qcol],
            **FAST,
        )
        if on_query is not None:
            on_query(clicked)


def relevance_fn(model_default: str):
    """The /relevance handler."""

    @user_errors
    def relevance(image, model=model_default, target=None, resolution="auto"):
        """Why a vision transformer classifier says a class: relevance maps beside the CLS attention of the same pass.

        Returns (picture, maps, info): one PNG of three captioned overlays (the relevance of each patch for the
        class by Chefer et al.'s rule, by vit-explain's grad-rollout, and the last layer's CLS attention); one .npz
        with chefer, grad_rollout, attention (rows, cols) float32 maps, logits and probs of every class, the target
        and the image; a dict of the facts (target, top 5 classes with probabilities, grid, captions).

        Args:
            image: {image}.
            model: a classifier: {classifiers}.
            target: the class to explain: an index or a name ('tabby', '3'); empty = the top class.
            resolution: 'auto' (the model's own size), 'native', or the shorter side in px.
        """
        t = None if target is None or (isinstance(target, str) and not target.strip()) else target
        if isinstance(t, float) and np.isfinite(t) and t == int(t):
            t = int(t)
        visitor = who()
        with HEAVY.held(visitor):  # admitted when it asked to join (`heavy_share`); its turn if it computes
            rel = get_relevance(image, model, resolution, t, visitor=visitor)
        return write_answer(rel, model=(model or "").strip())

    return with_models(relevance)


def build_api(model_default: str) -> None:
    """Register /relevance (hidden inputs, so every parameter after `image` has a default)."""
    with gr.Row(visible=False):
        r_img = image_path(type="filepath", image_mode=None, label="image")
        r_model = gr.Textbox(model_default, label="model")
        r_target = gr.Textbox("", label="target")
        r_res = gr.Textbox("auto", label="resolution")
        heavy_endpoint(relevance_fn(model_default), "relevance", [r_img, r_model, r_target, r_res], answer_outputs())
