"""The ViT tab's event handlers: what each control's change, click or download answers, over the
layout's components (`layout.ViTTab`); `tab` wires them to their events.

Every handler reuses the visitor's pass from the server's shared store (`passes.PASSES`).
"""

from __future__ import annotations

import gradio as gr
import pandas as pd

from attention.errors import AttentionError, as_whole
from attention.ui.common.admit import who
from attention.ui.common.components import info, user_errors, warning
from attention.ui.common.model_choices import digits_only_note, visitor_text
from attention.ui.vit import live as vit_live
from attention.ui.vit.fields import fit, ref, view_spec, vit_frame, vit_pass
from attention.ui.vit.layout import VIT_DEFAULTS, map_caption
from attention.ui.vit.refusals import accepted, cleared, link_note, query_words, refusal
from attention.vit.draw import frames as vit_frames
from attention.vit.draw import views as vit_views
from attention.vit.draw.modelview import model_view
from attention.vit.engine import query as vit_query
from attention.vit.models import registry as model_registry
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve import permalink, rollouts

STYLE, ROLLOUT = ("threshold", "alpha", "cmap"), ("mean", 0.0, "row")  # the start screen's style and rollout


class ViTHandlers:
    """The tab's handlers over the layout `t` (`layout.ViTTab`); `s`: the start-up model
    (`sources.startup_model`), `first_image`: the start screen's image."""

    def __init__(self, t, s, first_image: str):
        self.t, self.s, self.first_image = t, s, first_image
        self.ropts = [t.fusion, t.discard_ratio, t.discard_rule]  # the rollout options' components

    def score_plots(self, rows) -> dict:
        """The top tokens of the scores table as two bar charts (drawn in the browser), in rank order
        ("#01 ..." names sort as ranks; plain values, so cached example outputs can hold them)."""
        data = pd.DataFrame(
            {
                "token": [f"#{r[0]:02d} {r[1]}" for r in rows],
                "raw score": [r[2] for r in rows],
                "softmax weight": [r[3] for r in rows],
                "token kind": ["patch" if r[1].startswith("patch") else "prefix token" for r in rows],
            }
        )
        return {self.t.score_bars: data, self.t.weight_bars: data}

    def shown(self, fv, p, img, hd: int, plain=False, now: dict | None = None, kept: dict | None = None) -> dict:
        """A Frame and its checked view (`vit_frame`) as the display outputs, for `img` (the file the
        visitor's state stamps) and head `hd` (fitted); the view's style goes to the browser's copy
        (#vit-live). `plain`: values only, no gr.update and no browser copy (cached example
        outputs cannot hold updates in Gradio 6.31; `adopt` fits the sliders and sends the copy).
        `now`: the controls' values of this view, kept as the last accepted one (`refusals`);
        `kept`: the one before (a refusal's note stays while the view is the kept one)."""
        f, v = fv
        q = None if isinstance(f.res.query, str) else f.res.query
        vw = v.view
        tiles = list(zip(f.outputs.thumbs, f.outputs.captions))
        out = {
            self.t.caption: map_caption(vw, hd, p.num_heads, f.res.layer),
            self.t.qimg: f.query_png,
            self.t.gallery: tiles,
            self.t.details: f.details,
            self.t.qlabel: f.query_label,
            self.t.scores_md: f.scores_summary,
            **self.score_plots(f.scores_rows),
            self.t.scores_df: f.scores_rows,
            self.t.download: None,  # a new view: the last download no longer matches it
            self.t.legend: f.legend,
        }
        if plain:  # (Gradio 6.31 cannot read an empty File back from the examples cache: no download key)
            return {k: v for k, v in out.items() if k is not self.t.download} | {
                self.t.layer: f.res.layer,
                self.t.head: 0,
            }
        return {
            **out,
            # the highlighted tile is the one shown large (a one-tile view: that tile)
            self.t.gallery: gr.update(value=tiles, selected_index=hd if vw in ("heads", "masks") else 0),
            self.t.layer: gr.update(maximum=p.num_layers - 1, value=f.res.layer),
            self.t.head: gr.update(maximum=p.num_heads - 1),
            self.t.qrow: None if q is None else q[0],
            self.t.qcol: None if q is None else q[1],
            self.t.state: ref(p, img),
            self.t.live: vit_live.value(p, f.res, vw, hd, v.alpha, v.cmap),
            **({} if now is None else {self.t.good: accepted(**now), **cleared(self.t, kept, now)}),
            **(
                {}
                if now is None or not (note := digits_only_note(now["model"], now["image"], p.ref.key[0]))
                else {self.t.details: f"{note}\n\n{f.details}"}
            ),
        }

    @staticmethod
    def view_of(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, fu, dr, du) -> dict:
        """The controls' values as one dict (`refusals.KEYS`)."""
        return dict(image=img, model=mdl, resolution=res, qrow=qr, qcol=qc, layer=lay, view=vw, head=hd) | dict(
            threshold=thr, alpha=al, cmap=cm, fusion=fu, discard_ratio=dr, discard_rule=du
        )

    def redraw(self, v: dict) -> dict:
        """The view `v` (`view_of`) drawn again from its kept pass (a refusal's rollback)."""
        p = vit_pass(v["image"], v["model"], v["resolution"])
        ro = (v.get("fusion"), v.get("discard_ratio"), v.get("discard_rule"))
        args = (v["qrow"], v["qcol"], v["layer"], v["view"], v["head"], v["threshold"], v["alpha"], v["cmap"])
        fv = vit_frame(p, *args, ro if None not in ro else ())
        return self.shown(fv, p, v["image"], v["head"])

    def answer(self, now: dict, kept: dict | None, st, progress=None) -> dict:
        """The view of the controls `now`, fitted to its pass; a refusal (`refusals.refusal`) when it
        cannot be drawn."""
        try:
            p = vit_pass(now["image"], now["model"], now["resolution"], progress, st)
            lay, hd, qr, qc = fit(p, st, now["layer"], now["head"], now["qrow"], now["qcol"])
            now = now | dict(layer=lay, head=hd, qrow=qr, qcol=qc)
            ro = (now["fusion"], now["discard_ratio"], now["discard_rule"])
            fv = vit_frame(p, qr, qc, lay, now["view"], hd, now["threshold"], now["alpha"], now["cmap"], ro)
        except AttentionError as e:
            return refusal(self.t, e, kept, now, self.redraw)
        now["layer"] = fv[0].res.layer  # (-1: the last layer, as the slider shows it)
        now["view"] = fv[1].view  # checked (`fields.on_screen`: the panels that follow trust it)
        return self.shown(fv, p, now["image"], hd, now=now, kept=kept)

    def check_query(self, img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, *ro):
        """Validator of the query fields: only the field at fault is marked, the last maps stay."""
        grid = st.grid if st is not None else None
        verdicts = []
        for value, other, name, i in ((qr, qc, "row", 0), (qc, qr, "column", 1)):
            empty, other_empty = vit_query.is_empty(value), vit_query.is_empty(other)
            top = f"0 to {grid[i] - 1}" if grid else "0 or more"
            v = as_whole(value)
            ok = (empty and other_empty) or (not empty and v is not None and v >= 0 and (not grid or v < grid[i]))
            verdicts.append(gr.validate(ok, "" if ok else query_words(name, value, top)))
        return [gr.validate(True, "")] * 3 + verdicts + [gr.validate(True, "")] * (7 + len(ro))

    @user_errors
    def update(self, img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, fu, dr, du, gd, progress=gr.Progress()):
        half = vit_query.is_empty(qr) != vit_query.is_empty(qc) and gd  # a query half typed (Enter commits it):
        if half:  # not this change's business: the query on screen is kept, and so are the fields as typed
            qr, qc = gd.get("qrow"), gd.get("qcol")
        out = self.answer(self.view_of(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, fu, dr, du), gd, st, progress)
        return {k: v for k, v in out.items() if k not in (self.t.qrow, self.t.qcol)} if half else out

    @user_errors
    def click(self, img, mdl, res, lay, vw, hd, thr, al, cm, st, fu, dr, du, gd, px, evt: gr.SelectData):
        now = self.view_of(img, mdl, res, None, None, lay, vw, hd, thr, al, cm, fu, dr, du)
        try:
            base = vit_pass(img, mdl, res, state=st).base
        except AttentionError as e:
            return refusal(self.t, e, gd, now, self.redraw)
        ok = isinstance(px, list) and len(px) == 2 and all(type(v) is int and v >= 0 for v in px)
        x, y = px if ok else evt.index
        r, c = vit_views.patch_at(x, y, base)
        return self.answer(now | dict(qrow=r, qcol=c), gd, st)

    @user_errors
    def pick_head(self, img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, fu, dr, du, gd, evt: gr.SelectData):
        """A click on a head's tile shows that head large; the mean's tile shows the mean view, the
        Head slider left where it was (the mean is no head)."""
        now = self.view_of(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, fu, dr, du)
        try:
            heads = vit_pass(img, mdl, res, state=st).num_heads
        except AttentionError as e:
            return refusal(self.t, e, gd, now, self.redraw)
        now |= dict(view="mean") if evt.index >= heads else dict(head=evt.index)
        out = self.answer(now, gd, st)
        refused = self.t.note in out and out[self.t.note].get("visible")
        return out if refused else {**out, self.t.head: now["head"], self.t.view: now["view"]}

    @user_errors
    def make_download(self, img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, fu, dr, du, gd=None):
        """The .npz of the view on screen (raw float32 maps, scores, weights, image, every picture)."""
        p = vit_pass(img, mdl, res, state=st)
        lay, hd, qr, qc = fit(p, st, lay, hd, qr, qc)
        v = view_spec(qr, qc, lay, vw, thr, al, cm, (fu, dr, du))
        rollouts.ready(p, v, who())  # a heavy rollout: computed in the heavy lane
        d = vit_frames.download_maps(p, v)
        return gr.update(value=d.outputs.npz, visible=True)

    @user_errors
    def model_sheet(self, img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, *ro):
        """Every layer x every head of the visitor's query, from their pass (no new forward)."""
        p = vit_pass(img, mdl, res, state=st)
        _, _, qr, qc = fit(p, st, lay, hd, qr, qc)
        return model_view(p, vit_inputs.parse_query(qr, qc), alpha=al, cmap=cm)

    @user_errors
    def first_screen(self, request: gr.Request, progress=gr.Progress()):
        """What a new visitor sees at once: the start example's maps (the pass is shared by all), or
        the view a permalink names (`?example=chelsea&layer=9&q=5,7`; a bad parameter is named in a
        warning and the start screen shown)."""
        d, refused = VIT_DEFAULTS, None
        try:
            link = permalink.parse(dict(request.query_params) if request is not None else {})
        except AttentionError as e:
            link, refused = permalink.Link(), str(e)
        img = str(permalink.examples()[link.example]) if link.example else self.first_image
        digit = link.example is not None and link.example.startswith("digit_")
        start = model_registry.OFFLINE_MODEL if digit else self.s.model
        mdl, res, vw = link.model or start, link.resolution or d["resolution"], link.view or d["view"]
        qr, qc = link.query if isinstance(link.query, tuple) else (None, None)
        try:
            p = vit_pass(img, mdl, res, progress)
        except AttentionError as e:  # the link's model or resolution: the start screen's, the refusal named
            if (mdl, res) == (start, d["resolution"]):
                raise
            refused, mdl, res = visitor_text(e, mdl), start, d["resolution"]
            p = vit_pass(img, mdl, res, progress)
        if refused:
            warning(f"This link could not be opened as given: {refused}")
        lay, hd, qr, qc = fit(p, None, link.layer, link.head, qr, qc)
        thr, al, cm = (d[k] if v is None else v for k, v in zip(STYLE, (link.threshold, link.alpha, link.cmap)))
        ro = tuple(ROLLOUT[i] if v is None else v for i, v in enumerate((link.fusion, link.discard, link.rule)))
        fv = vit_frame(p, qr, qc, lay, vw, hd, thr, al, cm, ro)
        f = fv[0]
        head_up = gr.update(maximum=p.num_heads - 1, value=hd)
        now = self.view_of(img, mdl, res, qr, qc, f.res.layer, fv[1].view, hd, thr, al, cm, *ro)
        return {
            **self.shown(fv, p, img, hd, now=now),
            self.t.image: img,
            self.t.model: mdl,
            self.t.resolution: res,
            self.t.view: vw,
            self.t.head: head_up,
            self.t.why.target: link.cls,
            **dict(zip([self.t.threshold, self.t.alpha, self.t.cmap, *self.ropts], (thr, al, cm, *ro))),
            self.t.find.prompts: link.find or "",
            **self.t.find.from_link(link),
            **({} if refused is None else {self.t.note: gr.update(value=link_note(refused, mdl), visible=True)}),
        }

    @user_errors
    def make_link(self, img, mdl, res, qr, qc, lay, vw, hd, cls, thr, al, cm, fu, dr, du, find, *found_url):
        """The address of the view on screen (an uploaded image is not part of it: links name examples);
        colours, threshold, opacity and rollout options only where they are not the start screen's, and
        "Find in image"'s prompts."""
        q = vit_inputs.parse_query(qr, qc)
        given = [(thr, "threshold"), (al, "alpha"), (cm, "cmap")]
        style = {k: v for v, k in given if v is not None and v != VIT_DEFAULTS[k]}
        ro = dict(zip(("fusion", "discard", "rule"), (fu, dr, du)))
        style |= {k: v for (k, v), d in zip(ro.items(), ROLLOUT) if v is not None and v != d}
        link = permalink.Link(
            **style,
            example=permalink.example_name(img),
            model=(mdl or "").strip() or None,
            resolution=str(res),
            layer=vit_inputs.parse_layer(lay),
            head=vit_inputs.parse_head(hd),
            view=vit_views.check_view(vw),
            query=q,
            cls=None if cls is None else int(cls),
            find=(find or "").strip() or None,
            **self.t.find.link_fields(*found_url[:-1]),
        )
        if link.example is None and img is not None:
            info(
                "Uploaded images are not part of links (the server keeps no one's files): this link opens "
                "the same model, layer, head, view and query on the start image."
            )
        base = (found_url[-1] or "").split("?")[0].split("#")[0]
        return gr.update(value=f"{base}?{permalink.query_string(link)}", visible=True)

    @user_errors
    def example(self, img, mdl, res, vw, thr, al, cm):
        p = vit_pass(img, mdl, res)
        return self.shown(vit_frame(p, None, None, -1, vw, 0, thr, al, cm), p, img, 0, plain=True)
