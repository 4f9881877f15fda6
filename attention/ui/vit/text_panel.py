"""The ViT tab's "Find in image" view: for models with a text tower (digit_clip, CLIP, SigLIP), type prompts
(comma-separated), pick a rule (the open-vocabulary rules, the gradient rules, the raw similarity) and its
options, see each prompt's map (large, and as tiles to click), the segmentation (each patch in its clear best
prompt's colour, none elsewhere) and each prompt's own score; for a model without one, the panel says which
models have one. And the stateless /text_relevance endpoint for API and MCP callers. Visitor text (the prompts)
reaches the page only escaped.
"""

from __future__ import annotations

import gradio as gr

from attention.crowd.admission import HEAVY
from attention.errors import AttentionError, html_text, markdown_text
from attention.ui.common.admit import heavy_endpoint, in_lane, who
from attention.ui.common.api_docs import with_models
from attention.ui.common.components import answer_outputs, error_note, image_path, picture, tiles_gallery, user_errors
from attention.ui.vit import text_rows
from attention.vit.engine import request
from attention.vit.text.find import check_rule
from attention.vit.text.openvocab import RuleOptions, check_options
from attention.vit.text.prompts import MAX_PROMPT_CHARS, MAX_PROMPTS
from attention.vit.text.service import BEST_RULE, get_text_relevance, has_text, proxy_of, text_models
from attention.vit.text.views import RULE_NAMES, hex_colour, score_text, tiles, write_answer

MAP_SIDE = 420  # px: the shorter side of the view's maps (enlarged by a whole factor)
FAST = dict(show_progress="minimal", api_visibility="private")
HOW = {
    "chefer": "each layer's attention weighted by its gradient for the prompt's score (positive part, mean of heads), "
    "carried through the layers (Chefer, Gur & Wolf, ICCV 2021)",
    "legrad": "the positive gradient of each of the last layers' own score with respect to its attention, summed and "
    "min-max scaled (LeGrad, Bousselham et al. 2024)",
    "similarity": "each patch's own token, pooled alone, scored against the prompt (no gradients: the raw similarity)",
    "maskclip": "the last block's attention replaced by each patch's own value, residual and MLP kept; each patch's "
    "cosine with the prompt (MaskCLIP, Zhou et al. 2022)",
    "sclip": "the last block attends by softmax(q q^T) + softmax(k k^T), residual and MLP kept; each patch's cosine "
    "with the prompt (SCLIP, Wang et al. 2023)",
    "clearclip": "the last block attends by softmax(q q^T), its residual and MLP dropped; each patch's cosine with the "
    "prompt (ClearCLIP, Lan et al. 2024)",
    "naclip": "the last block attends by softmax(k k^T + a Gaussian of the patches' distance), residual and MLP "
    "dropped; each patch's cosine with the prompt (NACLIP, Hajimiri et al. 2025)",
    "proxy": "the last block attends by another vision model's patch similarity ({proxy}), residual and MLP dropped; "
    "each patch's cosine with the prompt (ProxyCLIP's idea, Lan et al. 2024)",
}
RESIDUAL_CHOICES = [("as the paper", ""), ("kept", "true"), ("dropped", "false")]


def scores_html(tr, rule: str) -> str:
    """The ranking as an HTML table: colour, prompt (escaped), the prompt's own score, logit, and how many patches
    the segmentation by `rule` gives it; best first; then the patches it leaves to none."""
    seg = tr.segmentation(rule)
    rows = []
    for p, logit, _ in tr.ranking():
        i = tr.prompts.index(p)
        colour = hex_colour(i)
        rows.append(
            f"<tr><td><span style='display:inline-block;width:12px;height:12px;"
            f"background:{colour};border-radius:2px'></span></td><td>{html_text(p)}</td>"
            f"<td style='text-align:right'>{score_text(tr, i)}</td><td style='text-align:right'>{logit:.2f}</td>"
            f"<td style='text-align:right' class='find-patches'>{int((seg == i).sum())}</td></tr>"
        )
    rows.append(
        "<tr class='find-none'><td></td><td><i>none</i> (background, or unclear)</td><td></td><td></td>"
        f"<td style='text-align:right' class='find-patches'>{int((seg < 0).sum())}</td></tr>"
    )
    return (
        "<div style='overflow-x:auto'><table class='find-scores'><thead><tr><th></th><th>prompt</th>"
        "<th>score</th><th>logit</th><th>patches</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
        f"<p style='font-size:0.85em;margin:2px 0'>score: the {html_text(tr.score_name)}, each prompt's own; "
        "patches: how many the segmentation gives each prompt.</p>"
    )


def no_text_note(model: str) -> str:
    """What the panel says for a model without a text tower: which models have one."""
    names = ", ".join(f"`{m}`" for m in text_models())
    return (
        f"**Find in image** (where does the picture show *a cat*?) needs a model with a text tower; "
        f"{markdown_text(model or 'this model')} has none. Pick one under **Model**: {names} "
        "(`digit_clip` ships with the app and reads the digits)."
    )


class TextPanel:
    """The "Find in image" view: shown with every image; for a model without a text tower it says which have one."""

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
            self.rule = gr.Dropdown(
                [(v, k) for k, v in RULE_NAMES.items()], value=BEST_RULE, label="Rule", elem_id="vit-find-rule"
            )
            with gr.Accordion("Rule options (the papers' defaults)", open=False, elem_id="vit-find-options"):
                with gr.Row():
                    self.residual = gr.Dropdown(RESIDUAL_CHOICES, value="", label="Residual and MLP of the last block")
                    self.std, self.gamma, self.beta = (
                        gr.Number(b.default, label=label, minimum=b.slider()[0], maximum=b.slider()[1])
                        for b, label in zip(
                            request.FIND_OPTIONS.values(), ("NACLIP: std (patches)", "proxy: gamma", "proxy: beta")
                        )
                    )
            self.details = gr.Markdown("", elem_id="vit-find-details")
            with gr.Row(equal_height=False):
                with gr.Column(scale=5, min_width=280):
                    self.big = picture(label="Where the prompt matches", height=420, elem_id="vit-find-map")
                with gr.Column(scale=4, min_width=240):
                    self.gallery = tiles_gallery("Each prompt and the segmentation (click one)", 2, "vit-find-tiles")
            self.rows = picture(label=text_rows.LABEL, visible=False, elem_id="vit-find-rows")  # a click on the map
            self.scores = gr.HTML("", elem_id="vit-find-scores")
            self.caption = gr.Markdown("", elem_id="vit-find-caption")

    @property
    def options(self) -> list:
        return [self.residual, self.std, self.gamma, self.beta]

    @property
    def linked(self) -> list:
        """What a permalink sets: the prompts, the rule, its options."""
        return [self.prompts, self.rule, *self.options]

    def from_link(self, link) -> dict:
        """The rule and options a permalink (`permalink.Link`) carries, as this panel's values."""
        d = RuleOptions()
        res = "" if link.find_residual is None else str(link.find_residual).lower()
        values = (link.find_rule or BEST_RULE, res, link.find_std, link.find_gamma, link.find_beta)
        defaults = (BEST_RULE, "", d.std, d.gamma, d.beta)
        return {c: (dv if v is None else v) for c, v, dv in zip([self.rule, *self.options], values, defaults)}

    @staticmethod
    def link_fields(rule, residual, std, gamma, beta) -> dict:
        """The panel's rule and options as permalink fields: only those that are not the defaults."""
        d = RuleOptions()
        o = check_options(
            residual, std if std is not None else d.std, gamma or d.gamma, beta if beta is not None else d.beta
        )
        return {
            "find_rule": rule if rule and rule != BEST_RULE else None,
            "find_residual": o.residual,
            "find_std": o.std if o.std != d.std else None,
            "find_gamma": o.gamma if o.gamma != d.gamma else None,
            "find_beta": o.beta if o.beta != d.beta else None,
        }

    @property
    def outputs(self) -> list:
        return [self.box, self.details, self.big, self.gallery, self.scores, self.caption, self.chosen, self.rows]

    def draw(self, progress=gr.Progress(), *, img, mdl, res, prompts, rule, residual, std, gamma, beta, chosen, al, cm):
        """The view for the main view's image, model and resolution, the typed prompts, the rule and its options;
        for a model without a text tower, the models that have one."""
        if img is None:
            return {self.box: gr.update(visible=False)}
        empty = {self.big: None, self.gallery: None, self.scores: "", self.caption: ""}
        empty[self.rows] = gr.update(visible=False)
        if not has_text(mdl):
            return {self.box: gr.update(visible=True), self.details: no_text_note(mdl), **empty}
        if not (prompts or "").strip():
            return {
                self.box: gr.update(visible=True),
                self.details: "Type what to find, e.g. *a handwritten seven, a handwritten three*, then **Find**.",
                **empty,
            }
        rule = rule if rule in RULE_NAMES else BEST_RULE
        try:
            opts = check_options(residual, std, gamma, beta)
            tr = get_text_relevance(img, mdl, res, prompts, rule, opts, visitor=who())
        except AttentionError as e:
            return {self.box: gr.update(visible=True), self.details: error_note(e), **empty}
        ts = tiles(tr, rule, alpha=al, cmap=cm, min_side=MAP_SIDE)
        k = min(max(int(chosen or 0), 0), len(ts) - 1)
        passes = "one forward and one backward pass" if rule in ("chefer", "legrad") else "one forward pass"
        how = HOW[rule].format(proxy=proxy_of(mdl))
        return {
            self.box: gr.update(visible=True),
            self.details: f"{len(tr.prompts)} prompt(s) · grid {tr.grid[0]}×{tr.grid[1]} · {tr.seconds * 1e3:.0f} ms "
            f"for {passes} (all prompts at once) · rule: {RULE_NAMES[rule]}",
            self.big: gr.update(value=ts[k].image, label=ts[k].caption),
            self.gallery: [(t.image, t.caption) for t in ts],
            self.scores: scores_html(tr, rule),
            self.caption: f"**{RULE_NAMES[rule]}:** {how}. Bright = more. The segmentation colours a patch by the "
            "prompt whose map is clearly highest there (colours as in the table) and leaves it uncoloured (none) "
            "where no prompt is (background, or a tie). Each score is the prompt's own: "
            + ("the sigmoid of its logit." if tr.kind == "siglip" else "the cosine of image and prompt, not a share."),
            self.chosen: k,
            self.rows: gr.update(value=None, visible=False),  # a click on the new map shows its rows
        }

    def follow(self, events: list, main) -> None:
        """Redraw after each of `events` succeeds, on Find, Enter in the prompts, a rule or option change, a tile
        click."""
        ins = dict(img=main.image, mdl=main.model, res=main.resolution, prompts=self.prompts, rule=self.rule)
        ins |= dict(zip(("residual", "std", "gamma", "beta"), self.options)) | dict(chosen=self.chosen)
        by_name = dict(inputs_kwargs=ins | dict(al=main.alpha, cm=main.cmap), **FAST)  # the handler's parameters
        draw = in_lane(user_errors(self.draw))  # in the heavy lane's threads, at ATTENTION_HEAVY_NICE
        for ev in events:
            ev.success(draw, None, self.outputs, **by_name)
        gr.on([self.go.click, self.prompts.submit], lambda: 0, None, self.chosen, queue=False, **FAST).then(
            draw, None, self.outputs, **by_name
        )
        gr.on([self.rule.input, *(c.input for c in self.options)], draw, None, self.outputs, **by_name)

        def pick(evt: gr.SelectData) -> int:
            """A tile clicked: it is shown large."""
            return int(evt.index)

        self.gallery.select(pick, None, self.chosen, queue=False, **FAST).then(draw, None, self.outputs, **by_name)
        where = {k: v for k, v in by_name["inputs_kwargs"].items() if k != "chosen"}
        self.big.select(text_rows.patch_rows(MAP_SIDE), None, self.rows, inputs_kwargs=where, **FAST)


def text_fn(model_default: str):
    """The /text_relevance handler."""

    @user_errors
    def text_relevance(
        image,
        prompts,
        model=model_default,
        resolution=request.RESOLUTION,
        rule=request.FIND_RULE,
        residual="",
        std=request.FIND_STD.default,
        gamma=request.FIND_GAMMA.default,
        beta=request.FIND_BETA.default,
    ):
        """Where an image matches each of several text prompts, for a vision-language model (CLIP, SigLIP).

        Returns (picture, maps, info): one PNG of captioned overlays (each prompt's map by the rule, then the
        segmentation: each patch in its clear best prompt's colour, none elsewhere); one .npz with the rule's
        and the raw similarity's (prompts, rows, cols) float32 maps, the segmentation (-1: none), the logits and
        scores, the prompts and the image; a dict of the facts (the prompts ranked with their own scores: CLIP's
        cosine, SigLIP's sigmoid; the grid, the rule and its options, the colours).

        Args:
            image: {image}.
            prompts: {prompts}.
            model: a model with a text tower: {text_models}.
            resolution: 'auto' (the model's own size), 'native', or the shorter side in px.
            rule: 'sclip' (the default), 'naclip', 'clearclip', 'maskclip', 'proxy', 'chefer', 'legrad' or 'similarity'.
                SCLIP, NACLIP, ClearCLIP, MaskCLIP: the open-vocabulary rules; proxy: a DINO's patch similarity as
                the last block's attention (digit_clip's: mnist_vit's); chefer: Chefer et al. 2021; legrad: LeGrad;
                similarity: the raw patch-text similarity.
            residual: '' for the paper's choice, 'true' or 'false': keep the last block's residual and MLP.
                The open-vocabulary rules only; MaskCLIP and SCLIP keep them, the others drop them.
            std: {std}.
            gamma: {gamma}.
            beta: {beta}.
        """
        opts = check_options(residual, std, gamma, beta)
        visitor = who()
        with HEAVY.held(visitor):  # admitted when it asked to join (`heavy_share`); its turn if it computes
            tr = get_text_relevance(image, model, resolution, prompts, rule, opts, visitor=visitor)
        return write_answer(tr, model=(model or "").strip(), rule=check_rule(rule))

    return with_models(text_relevance)


def build_api(model_default: str = "digit_clip") -> None:
    """Register /text_relevance (hidden inputs, so every parameter after `prompts` has a default)."""
    with gr.Row(visible=False):
        t_img = image_path(type="filepath", image_mode=None, label="image")
        t_prompts = gr.Textbox("", label="prompts")
        t_model = gr.Textbox(model_default, label="model")
        t_res = gr.Textbox(request.RESOLUTION, label="resolution")
        t_rule = gr.Textbox(BEST_RULE, label="rule")
        d = RuleOptions()
        t_opts = [gr.Textbox("", label="residual"), gr.Number(d.std, label="std")]
        t_opts += [gr.Number(d.gamma, label="gamma"), gr.Number(d.beta, label="beta")]
        outputs = answer_outputs()
        inputs = [t_img, t_prompts, t_model, t_res, t_rule, *t_opts]
        heavy_endpoint(text_fn(model_default), "text_relevance", inputs, outputs)


__all__ = ["TextPanel", "build_api", "text_fn", "text_models"]
