"""The ViT tab's event handlers: what each control's change, click or download answers, over the
layout's components (`layout.ViTTab`); `tab` wires them to their events.

Every handler reuses the visitor's pass from the server's shared store (`passes.PASSES`).
"""

from __future__ import annotations

from dataclasses import replace

import gradio as gr
import pandas as pd

from attention.errors import AttentionError, as_whole
from attention.ui.common.admit import who
from attention.ui.common.components import info, user_errors, warning
from attention.ui.common.model_choices import digits_only_note, visitor_text
from attention.ui.vit import live as vit_live
from attention.ui.vit.fields import ROLLOUT, fitted, link_request, ref, request_of, vit_frame, vit_pass
from attention.ui.vit.layout import map_caption
from attention.ui.vit.refusals import accepted, cleared, link_note, query_words, refusal
from attention.vit.draw import frames as vit_frames
from attention.vit.draw import views as vit_views
from attention.vit.draw.modelview import model_view
from attention.vit.engine import query as vit_query
from attention.vit.engine.request import (
    CMAP,
    DISCARD_RATIO,
    DISCARD_RULE,
    FUSION,
    HEAD,
    OPACITY,
    RESOLUTION,
    THRESHOLD,
    ViewSpec,
)
from attention.vit.models import registry as model_registry
from attention.vit.serve import permalink, rollouts

# the style and rollout options a link names only where they are not the start screen's (the request's defaults)
LINK_STYLE = dict(threshold=THRESHOLD.default, alpha=OPACITY.default, cmap=CMAP.default)
LINK_ROLLOUT = dict(fusion=FUSION.default, discard=DISCARD_RATIO.default, rule=DISCARD_RULE.default)


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

    def shown(
        self, fv, p, img, hd: int, plain=False, now: dict | None = None, kept: dict | None = None, asked=None
    ) -> dict:
        """A Frame and its checked view (`vit_frame`) as the display outputs, for `img` (the file the
        visitor's state stamps) and head `hd` (fitted); the view's style goes to the browser's copy
        (#vit-live). `plain`: values only, no gr.update and no browser copy (cached example
        outputs cannot hold updates in Gradio 6.31; `adopt` fits the sliders and sends the copy).
        `now`: the controls' values of this view, kept as the last accepted one (`refusals`);
        `kept`: the one before (a refusal's note stays while the view is the kept one). `asked`: the layer the
        request carried; when the view drew that layer the slider's value is not sent back, so a change the
        visitor made while this job ran (Gradio sends it after this answer) is not put back to this one's."""
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
            self.t.layer: gr.update(maximum=p.num_layers - 1)
            if asked == f.res.layer
            else gr.update(maximum=p.num_layers - 1, value=f.res.layer),
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

    def redraw(self, v: dict) -> dict:
        """The view `v` (the controls' values, `refusals.accepted`) drawn again from its kept pass (a refusal's
        rollback)."""
        r = request_of(v)
        p = vit_pass(r.image, r.model, r.resolution)
        return self.shown(vit_frame(p, r.spec, r.head), p, v["image"], r.head)

    def answer(self, now: dict, kept: dict | None, st, progress=None, pick=None) -> dict:
        """The view of the controls `now`, read once into a request (`request_of`), its pass resolved once and
        the view fitted to it; `pick(p, r, now) -> (r, now)`: a click's change, read against that pass. A
        refusal (`refusals.refusal`) when it cannot be drawn."""
        try:
            r = request_of(now)
            p = vit_pass(r.image, r.model, r.resolution, progress, st)
            if pick is not None:
                r, now = pick(p, r, now)
            v, hd = fitted(p, st, r)
            fv = vit_frame(p, v, hd)
        except AttentionError as e:
            return refusal(self.t, e, kept, now, self.redraw)
        q = fv[1].query if isinstance(fv[1].query, tuple) else (None, None)
        # the fitted layer (-1: the last, as the slider shows it), head and query; the view checked
        # (`fields.on_screen`: the panels that follow trust it)
        now = now | dict(layer=fv[0].res.layer, head=hd, qrow=q[0], qcol=q[1], view=fv[1].view)
        return self.shown(fv, p, now["image"], hd, now=now, kept=kept, asked=r.spec.layer)

    def check_query(self, **fields):
        """Validator of the query fields: only the field at fault is marked, the last maps stay."""
        st = fields.get("state")
        grid = st.grid if st is not None else None
        qr, qc = fields["qrow"], fields["qcol"]
        verdicts = {}
        for value, other, name, i in ((qr, qc, "row", 0), (qc, qr, "column", 1)):
            empty, other_empty = vit_query.is_empty(value), vit_query.is_empty(other)
            top = f"0 to {grid[i] - 1}" if grid else "0 or more"
            v = as_whole(value)
            ok = (empty and other_empty) or (not empty and v is not None and v >= 0 and (not grid or v < grid[i]))
            verdicts["q" + name[:3]] = gr.validate(ok, "" if ok else query_words(name, value, top))
        return [verdicts.get(k, gr.validate(True, "")) for k in fields]  # in the order of the event's inputs

    @user_errors
    def update(self, progress=gr.Progress(), **fields):
        """A control changed: the view of the controls (`tab.named`: the event's inputs by name). A query half
        typed (Enter commits it) is not this change's business: the query on screen stays, the fields as typed."""
        gd = fields.get("good")
        half = vit_query.is_empty(fields.get("qrow")) != vit_query.is_empty(fields.get("qcol")) and gd
        if half:
            fields |= dict(qrow=gd.get("qrow"), qcol=gd.get("qcol"))
        out = self.answer(accepted(**fields), gd, fields.get("state"), progress)
        return {k: v for k, v in out.items() if k not in (self.t.qrow, self.t.qcol)} if half else out

    @user_errors
    def click(self, evt: gr.SelectData, **fields):
        """A patch clicked on the large map: that patch is the query (the pixel from the page's script when it
        sent one, else the event's), read against the event's one pass."""
        px = fields.get("clicked")
        ok = isinstance(px, list) and len(px) == 2 and all(type(v) is int and v >= 0 for v in px)
        x, y = px if ok else evt.index

        def at_patch(p, r, now):
            rc = vit_views.patch_at(x, y, p.base)
            return replace(r, spec=r.spec.placed(rc, r.spec.layer)), now | dict(qrow=rc[0], qcol=rc[1])

        return self.answer(accepted(**fields), fields.get("good"), fields.get("state"), pick=at_patch)

    @user_errors
    def pick_head(self, evt: gr.SelectData, **fields):
        """A click on a head's tile shows that head large; the mean's tile shows the mean view, the
        Head slider left where it was (the mean is no head)."""
        picked = {}

        def tile(p, r, now):
            if evt.index >= p.num_heads:
                picked.update(view="mean")
                return replace(r, spec=ViewSpec.trusted(**vars(r.spec) | picked)), now | picked
            picked.update(head=evt.index)
            return replace(r, head=evt.index), now | picked

        now = accepted(**fields)
        out = self.answer(now, fields.get("good"), fields.get("state"), pick=tile)
        if self.t.note in out and out[self.t.note].get("visible"):  # refused: the controls as they were
            return out
        return {**out, self.t.head: picked.get("head", now["head"]), self.t.view: picked.get("view", now["view"])}

    def _fitted(self, fields: dict):
        """The event's request fitted to its pass: (pass, view, head)."""
        r, st = request_of(accepted(**fields)), fields.get("state")
        p = vit_pass(r.image, r.model, r.resolution, state=st)
        return (p, *fitted(p, st, r))

    @user_errors
    def make_download(self, **fields):
        """The .npz of the view on screen (raw float32 maps, scores, weights, image, every picture)."""
        p, v, _ = self._fitted(fields)
        rollouts.ready(p, v, who())  # a heavy rollout: computed in the heavy lane
        d = vit_frames.download_maps(p, v)
        return gr.update(value=d.outputs.npz, visible=True)

    @user_errors
    def model_sheet(self, **fields):
        """Every layer x every head of the visitor's query, from their pass (no new forward)."""
        p, v, _ = self._fitted(fields)
        return model_view(p, v.query, alpha=v.alpha, cmap=v.cmap)

    @user_errors
    def first_screen(self, request: gr.Request, progress=gr.Progress()):
        """What a new visitor sees at once: the start example's maps (the pass is shared by all), or the view a
        permalink names (`?example=chelsea&layer=9&q=5,7`; a bad parameter named, the start screen shown)."""
        refused = None
        try:
            link = permalink.parse(dict(request.query_params) if request is not None else {})
        except AttentionError as e:
            link, refused = permalink.Link(), str(e)
        img = str(permalink.examples()[link.example]) if link.example else self.first_image
        digit = link.example is not None and link.example.startswith("digit_")
        start = model_registry.OFFLINE_MODEL if digit else self.s.model
        mdl = link.model or start
        r = link_request(link, img, mdl)
        try:
            p = vit_pass(img, mdl, r.resolution, progress)
        except AttentionError as e:  # the link's model or resolution refused
            if (mdl, r.resolution) == (start, RESOLUTION):
                raise
            refused, mdl = visitor_text(e, mdl), start
            r = link_request(replace(link, model=None, resolution=None), img, mdl)
            p = vit_pass(img, mdl, r.resolution, progress)
        if refused:  # the start view shown, the refusal named
            warning(f"This link could not be opened as given: {refused}")
        v, hd = fitted(p, None, r)
        fv = vit_frame(p, v, hd)
        q = v.query if isinstance(v.query, tuple) else (None, None)
        res, vw, (thr, al, cm) = r.resolution, r.spec.view, (v.threshold, v.alpha, v.cmap)
        head_up = gr.update(maximum=p.num_heads - 1, value=hd)
        ro = tuple(v.rollout_options.values())
        now = dict(image=img, model=mdl, resolution=res, qrow=q[0], qcol=q[1], layer=fv[0].res.layer, view=vw)
        now |= dict(head=hd, threshold=thr, alpha=al, cmap=cm) | dict(zip(ROLLOUT, ro))
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
    def make_link(self, **fields):
        """The address of the view on screen (an uploaded image is not part of it: links name examples);
        colours, threshold, opacity and rollout options only where they are not the start screen's, and
        "Find in image"'s prompts, rule and options (`FIND_KEYS`)."""
        now = accepted(**fields)
        r, img = request_of(now), now["image"]
        v = r.spec
        style = {k: getattr(v, k) for k in LINK_STYLE if getattr(v, k) != LINK_STYLE[k]}
        ro = dict(zip(LINK_ROLLOUT, (now.get(k) for k in ROLLOUT)))
        style |= {k: x for k, x in ro.items() if x is not None and x != LINK_ROLLOUT[k]}
        cls, find = fields.get("cls"), fields.get("find")
        link = permalink.Link(
            **style,
            example=permalink.example_name(img),
            model=(r.model or "").strip() or None,
            resolution=str(r.resolution),
            layer=v.layer,
            head=r.head,
            view=v.view,
            query=v.query,
            cls=None if cls is None else int(cls),
            find=(find or "").strip() or None,
            **self.t.find.link_fields(*(fields.get(k) for k in permalink.FIND_KEYS)),
        )
        if link.example is None and img is not None:
            info(
                "Uploaded images are not part of links (the server keeps no one's files): this link opens "
                "the same model, layer, head, view and query on the start image."
            )
        base = (fields.get("page_url") or "").split("?")[0].split("#")[0]
        return gr.update(value=f"{base}?{permalink.query_string(link)}", visible=True)

    @user_errors
    def example(self, img, mdl, res, vw, thr, al, cm):
        p = vit_pass(img, mdl, res)
        v = ViewSpec(view=vw, threshold=thr, alpha=al, cmap=cm)
        return self.shown(vit_frame(p, v, HEAD), p, img, HEAD, plain=True)
