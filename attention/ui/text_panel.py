"""The ViT tab's "Find in image" view, for models with a text tower (digit_clip, CLIP, SigLIP): type prompts
(comma-separated), see each prompt's relevance map (large, and as tiles to click), the segmentation (each
patch in its best prompt's colour) and the scores; and the stateless /text_relevance endpoint for API and
MCP callers. Visitor text (the prompts) reaches the page only escaped.
"""

from __future__ import annotations

import gradio as gr

from attention.errors import AttentionError, html_text
from attention.serving.admission import HEAVY
from attention.ui.admit import heavy_endpoint, in_lane, who
from attention.ui.api_docs import with_models
from attention.ui.components import answer_outputs, error_note, image_path, picture, tiles_gallery, user_errors
from attention.vit.text.prompts import MAX_PROMPT_CHARS, MAX_PROMPTS
from attention.vit.text.service import get_text_relevance, has_text, text_models
from attention.vit.text.views import RULE_NAMES, hex_colour, tiles, write_answer

MAP_SIDE = 420  # px: the shorter side of the view's maps (enlarged by a whole factor)
FAST = dict(show_progress="minimal", api_visibility="private")
HOW = {
    "chefer": "each layer's attention weighted by its gradient for the prompt's score (positive part, mean of heads), "
    "carried through the layers (Chefer, Gur & Wolf, ICCV 2021)",
    "legrad": "the positive gradient of each of the last layers' own score with respect to its attention, summed and "
    "min-max scaled (LeGrad, Bousselham et al. 2024)",
    "similarity": "each patch's own token, pooled alone, scored against the prompt (no gradients: the raw similarity)",
}


def scores_html(tr) -> str:
    """The ranking as an HTML table: colour, prompt (escaped), score, logit; best first."""
    rows = []
    for rank, (p, logit, prob) in enumerate(tr.ranking(), 1):
        i = tr.prompts.index(p)
        colour = hex_colour(i)
        rows.append(
            f"<tr><td>{rank}</td><td><span style='display:inline-block;width:12px;height:12px;"
            f"background:{colour};border-radius:2px'></span></td><td>{html_text(p)}</td>"
            f"<td style='text-align:right'>{prob:.1%}</td><td style='text-align:right'>{logit:.2f}</td></tr>"
        )
    what = "sigmoid of the logit" if tr.kind == "siglip" else "softmax over the prompts"
    return (
        "<table class='find-scores'><thead><tr><th>#</th><th></th><th>prompt</th>"
        f"<th>score ({what})</th><th>logit</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


class TextPanel:
    """The "Find in image" view; hidden while the main model has no text tower."""

    def __init__(self):
        self.chosen = gr.State(0)  # the tile shown large
        with gr.Column(visible=False, elem_id="vit-find") as self.box:
            gr.HTML("<h3 style='margin:4px 0'>Find in image</h3>")
            with gr.Row(equal_height=True):
                self.prompts = gr.Textbox(
                    "",
                    label=f"Prompts (comma-separated, up to {MAX_PROMPTS})",
                    placeholder="a handwritten seven, a handwritten three",
                    max_length=MAX_PROMPTS * (MAX_PROMPT_CHARS + 2),
                    scale=5,
                    elem_id="vit-find-prompts",
                )
                self.go = gr.Button("Find", variant="primary", scale=1, min_width=80, elem_id="vit-find-go")
            self.rule = gr.Radio(
                [(v, k) for k, v in RULE_NAMES.items()], value="chefer", label="Rule", elem_id="vit-find-rule"
            )
            self.details = gr.Markdown("", elem_id="vit-find-details")
            with gr.Row(equal_height=False):
                with gr.Column(scale=5, min_width=280):
                    self.big = picture(label="Where the prompt matches", height=420, elem_id="vit-find-map")
                with gr.Column(scale=4, min_width=240):
                    self.gallery = tiles_gallery("Each prompt and the segmentation (click one)", 2, "vit-find-tiles")
            self.scores = gr.HTML("", elem_id="vit-find-scores")
            self.caption = gr.Markdown("", elem_id="vit-find-caption")

    @property
    def outputs(self) -> list:
        return [self.box, self.details, self.big, self.gallery, self.scores, self.caption, self.chosen]

    def draw(self, img, mdl, res, prompts, rule, chosen, al, cm, progress=gr.Progress()):
        """The view for the main view's image, model and resolution and the typed prompts; hidden for a model
        without a text tower."""
        if img is None or not has_text(mdl):
            return {self.box: gr.update(visible=False)}
        if not (prompts or "").strip():
            return {
                self.box: gr.update(visible=True),
                self.details: "Type what to find, e.g. *a handwritten seven, a handwritten three*, then **Find**.",
                self.big: None,
                self.gallery: None,
                self.scores: "",
                self.caption: "",
            }
        rule = rule if rule in RULE_NAMES else "chefer"
        try:
            tr = get_text_relevance(img, mdl, res, prompts, visitor=who())
        except AttentionError as e:
            return {self.box: gr.update(visible=True), self.details: error_note(e)}
        ts = tiles(tr, rule, alpha=al, cmap=cm, min_side=MAP_SIDE)
        k = min(max(int(chosen or 0), 0), len(ts) - 1)
        return {
            self.box: gr.update(visible=True),
            self.details: f"{len(tr.prompts)} prompt(s) · grid {tr.grid[0]}×{tr.grid[1]} · {tr.seconds * 1e3:.0f} ms "
            "for one forward and one backward pass (all prompts at once)",
            self.big: gr.update(value=ts[k].image, label=ts[k].caption),
            self.gallery: [(t.image, t.caption) for t in ts],
            self.scores: scores_html(tr),
            self.caption: f"**{RULE_NAMES[rule]}:** {HOW[rule]}. Bright = more. The segmentation colours each patch "
            "by the prompt whose map is highest there (colours as in the table).",
            self.chosen: k,
        }

    def follow(self, events: list, main) -> None:
        """Redraw after each of `events` succeeds, on Find, Enter in the prompts, a rule change, a tile click."""
        ins = [main.image, main.model, main.resolution, self.prompts, self.rule, self.chosen, main.alpha, main.cmap]
        draw = in_lane(user_errors(self.draw))  # in the heavy lane's threads, at ATTENTION_HEAVY_NICE
        for ev in events:
            ev.success(draw, ins, self.outputs, **FAST)
        gr.on([self.go.click, self.prompts.submit], lambda: 0, None, self.chosen, queue=False, **FAST).then(
            draw, ins, self.outputs, **FAST
        )
        self.rule.input(draw, ins, self.outputs, **FAST)

        def pick(evt: gr.SelectData) -> int:
            """A tile clicked: it is shown large."""
            return int(evt.index)

        self.gallery.select(pick, None, self.chosen, queue=False, **FAST).then(draw, ins, self.outputs, **FAST)


def text_fn(model_default: str):
    """The /text_relevance handler."""

    @user_errors
    def text_relevance(image, prompts, model=model_default, resolution="auto", rule="chefer"):
        """Where an image matches each of several text prompts, for a vision-language model (CLIP, SigLIP).

        Returns (picture, maps, info): one PNG of captioned overlays (each prompt's relevance map, then the
        segmentation: each patch in its best prompt's colour); one .npz with chefer, legrad and similarity
        (prompts, rows, cols) float32 maps, the segmentation, the logits and probabilities, the prompts and the
        image; a dict of the facts (the prompts ranked with their scores, the grid, the colours).

        Args:
            image: {image}.
            prompts: what to find, comma-separated ('a cat, a remote'): 1 to 8 prompts of up to 100 characters.
            model: a model with a text tower: {text_models}.
            resolution: 'auto' (the model's own size), 'native', or the shorter side in px.
            rule: 'chefer' (Chefer et al. 2021), 'legrad' (LeGrad) or 'similarity' (raw patch-text similarity).
        """
        if rule not in RULE_NAMES:
            from attention.errors import InputError

            raise InputError(f"Rule {str(rule)[:40]!r} is not accepted; accepted: {', '.join(RULE_NAMES)}.")
        visitor = who()
        with HEAVY.held(visitor):  # admitted when it asked to join (`heavy_share`); its turn if it computes
            tr = get_text_relevance(image, model, resolution, prompts, visitor=visitor)
        return write_answer(tr, model=(model or "").strip(), rule=rule)

    return with_models(text_relevance)


def build_api(model_default: str = "digit_clip") -> None:
    """Register /text_relevance (hidden inputs, so every parameter after `prompts` has a default)."""
    with gr.Row(visible=False):
        t_img = image_path(type="filepath", image_mode=None, label="image")
        t_prompts = gr.Textbox("", label="prompts")
        t_model = gr.Textbox(model_default, label="model")
        t_res = gr.Textbox("auto", label="resolution")
        t_rule = gr.Textbox("chefer", label="rule")
        outputs = answer_outputs()
        inputs = [t_img, t_prompts, t_model, t_res, t_rule]
        heavy_endpoint(text_fn(model_default), "text_relevance", inputs, outputs)


__all__ = ["TextPanel", "build_api", "text_fn", "text_models"]
