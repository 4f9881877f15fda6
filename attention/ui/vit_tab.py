"""The ViT attention maps tab: an image, a model and a query token in; every head's map out.

Every control reuses the visitor's pass from the server's shared store (`passes.PASSES`); the
stateless endpoints for API and MCP callers are in `vit_api`.
"""

from __future__ import annotations

from dataclasses import replace

import gradio as gr
import pandas as pd

from attention.errors import AttentionError, as_whole
from attention.ui import relevance_panel, text_panel, vit_api, vit_examples, vit_layout, vit_live
from attention.ui.admit import who
from attention.ui.components import info, queue_share, user_errors, warning
from attention.ui.model_choices import digits_only_note
from attention.ui.stepwise_api import build as build_stepwise_api
from attention.ui.stepwise_panel import StepwisePanel
from attention.ui.vit_layout import VIT_DEFAULTS
from attention.ui.vit_panels import Main
from attention.ui.vit_refusals import accepted, cleared, refusal
from attention.ui.vit_tour import build as build_tour
from attention.vit.draw import frames as vit_frames
from attention.vit.draw import views as vit_views
from attention.vit.draw.modelview import model_view
from attention.vit.engine import query as vit_query
from attention.vit.models import loader as vit_models
from attention.vit.models import sources as vit_weights
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve import passes as vit_passes
from attention.vit.serve import permalink

STYLE, ROLLOUT = ("threshold", "alpha", "cmap"), ("mean", 0.0, "row")  # the start screen's style and rollout
FAULT = ["vit-fault"]  # the class (vit_tab.css) of an input whose value could not be used


def vit_pass(image, model, resolution, progress: gr.Progress | None = None, state=None):
    """The visitor's pass from the server's shared, bounded store (`passes.PASSES`): computed once
    per (image content, model, resolution), an upload's per visitor (`passes.pass_key`), within the
    model allow-list, the compute budget and the visitor's share; a new forward reports to `progress`
    (the event's progress bar). `state`: the visitor's `passes.Ref` of the pass on screen; when it was
    made from this very file (`inputs.source_stamp`), its key's digest is used (the upload is not
    hashed again: the main view's changes and every panel that follows it)."""
    report = None if progress is None else (lambda frac, desc: progress(frac, desc=desc))
    digest = vit_passes.known_digest(state, image)
    return vit_passes.served_pass(image, model, resolution, who(), progress=report, digest=digest)


def ref(p, image) -> vit_passes.Ref:
    """What the visitor's state keeps of pass `p` shown for `image` (`Pass.ref`, with the file's stamp)."""
    return replace(p.ref, source=vit_inputs.source_stamp(image))


def _view(qrow, qcol, layer: int, view, threshold, alpha, cmap, rollout=()) -> vit_frames.ViewSpec:
    """The tab's fields as one checked view (for `frames.tab_frame` and `frames.download_maps`); `layer`:
    fitted by `fit`; `rollout`: (head fusion, discard ratio, discard rule) when set."""
    return vit_frames.ViewSpec(
        query=vit_inputs.parse_query(qrow, qcol),
        layer=layer,
        view=view,
        threshold=threshold,
        alpha=alpha,
        cmap=cmap,
        rollout_options=dict(zip(("head_fusion", "discard_ratio", "discard"), rollout)),
    )


def _vit_frame(p, qrow, qcol, layer: int, view, head: int, threshold, alpha, cmap, rollout=()):
    """One view of pass `p` as the tab shows it (`_view`; `layer` and `head` fitted by `fit`), and that view."""
    v = _view(qrow, qcol, layer, view, threshold, alpha, cmap, rollout)
    return vit_frames.tab_frame(p, v, head=head), v


def fit(p, st, lay, hd, qr, qc):
    """The visitor's layer, head and query fitted to pass `p`: a new model starts at its last
    layer, a new grid at CLS; otherwise (no state yet, as after an example) values are kept when
    they fit, so the first change after an example is not thrown away."""
    lay, hd = vit_inputs.parse_index(lay, "Layer"), vit_inputs.parse_index(hd or 0, "Head")
    if st is not None and p.key[1] != st.key[1]:
        lay = p.num_layers - 1
    if st is not None and p.base.grid != st.grid:
        qr = qc = None
    q = vit_inputs.parse_query(qr, qc)
    if isinstance(q, tuple) and not (0 <= q[0] < p.base.grid[0] and 0 <= q[1] < p.base.grid[1]) and st is None:
        qr = qc = None
    return min(lay, p.num_layers - 1) if lay >= 0 else lay, min(hd, p.num_heads - 1), qr, qc


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

    def score_plots(rows) -> dict:
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
        return {t.score_bars: data, t.weight_bars: data}

    def shown(fv, p, img, hd: int, plain=False, now: dict | None = None, kept: dict | None = None) -> dict:
        """A Frame and its checked view (`_vit_frame`) as the display outputs, for `img` (the file the
        visitor's state stamps) and head `hd` (fitted); the view's style goes to the browser's copy
        (#vit-live). `plain`: values only, no gr.update and no browser copy (cached example
        outputs cannot hold updates in Gradio 6.31; `adopt` fits the sliders and sends the copy).
        `now`: the controls' values of this view, kept as the last accepted one (`vit_refusals`);
        `kept`: the one before (a refusal's note stays while the view is the kept one)."""
        f, v = fv
        q = None if isinstance(f.res.query, str) else f.res.query
        vw = v.view
        tiles = list(zip(f.outputs.thumbs, f.outputs.captions))
        out = {
            t.caption: vit_layout.map_caption(vw, hd, p.num_heads, f.res.layer),
            t.qimg: f.query_png,
            t.gallery: tiles,
            t.details: f.details,
            t.qlabel: f.query_label,
            t.scores_md: f.scores_summary,
            **score_plots(f.scores_rows),
            t.scores_df: f.scores_rows,
            t.download: None,  # a new view: the last download no longer matches it
            t.legend: f.legend,
        }
        if plain:  # (Gradio 6.31 cannot read an empty File back from the examples cache: no download key)
            return {k: v for k, v in out.items() if k is not t.download} | {t.layer: f.res.layer, t.head: 0}
        return {
            **out,
            # the highlighted tile is the one shown large (a one-tile view: that tile)
            t.gallery: gr.update(value=tiles, selected_index=hd if vw in ("heads", "masks") else 0),
            t.layer: gr.update(maximum=p.num_layers - 1, value=f.res.layer),
            t.head: gr.update(maximum=p.num_heads - 1),
            t.qrow: None if q is None else q[0],
            t.qcol: None if q is None else q[1],
            t.state: ref(p, img),
            t.live: vit_live.value(p, f.res, vw, hd, v.alpha, v.cmap),
            **({} if now is None else {t.good: accepted(**now), **cleared(t, kept, now)}),
            **(
                {}
                if now is None or not (note := digits_only_note(now["model"], now["image"], p.ref.key[0]))
                else {t.details: f"{note}\n\n{f.details}"}
            ),
        }

    def view_of(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, fu, dr, du) -> dict:
        """The controls' values as one dict (`vit_refusals.KEYS`)."""
        return dict(image=img, model=mdl, resolution=res, qrow=qr, qcol=qc, layer=lay, view=vw, head=hd) | dict(
            threshold=thr, alpha=al, cmap=cm, fusion=fu, discard_ratio=dr, discard_rule=du
        )

    def redraw(v: dict) -> dict:
        """The view `v` (`view_of`) drawn again from its kept pass (a refusal's rollback)."""
        p = vit_pass(v["image"], v["model"], v["resolution"])
        ro = (v.get("fusion"), v.get("discard_ratio"), v.get("discard_rule"))
        args = (v["qrow"], v["qcol"], v["layer"], v["view"], v["head"], v["threshold"], v["alpha"], v["cmap"])
        fv = _vit_frame(p, *args, ro if None not in ro else ())
        return shown(fv, p, v["image"], v["head"])

    def answer(now: dict, kept: dict | None, st, progress=None) -> dict:
        """The view of the controls `now`, fitted to its pass; a refusal (`vit_refusals.refusal`) when it
        cannot be drawn."""
        try:
            p = vit_pass(now["image"], now["model"], now["resolution"], progress, st)
            lay, hd, qr, qc = fit(p, st, now["layer"], now["head"], now["qrow"], now["qcol"])
            now = now | dict(layer=lay, head=hd, qrow=qr, qcol=qc)
            ro = (now["fusion"], now["discard_ratio"], now["discard_rule"])
            fv = _vit_frame(p, qr, qc, lay, now["view"], hd, now["threshold"], now["alpha"], now["cmap"], ro)
        except AttentionError as e:
            return refusal(t, e, kept, now, redraw)
        now["layer"] = fv[0].res.layer  # (-1: the last layer, as the slider shows it)
        return shown(fv, p, now["image"], hd, now=now, kept=kept)

    def check_query(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, *ro):
        """Validator of the query fields: only the field at fault is marked, the last maps stay."""
        grid = st.grid if st is not None else None
        verdicts = []
        for value, other, name, i in ((qr, qc, "row", 0), (qc, qr, "column", 1)):
            empty, other_empty = vit_query.is_empty(value), vit_query.is_empty(other)
            top = f"0 to {grid[i] - 1}" if grid else "0 or more"
            v = as_whole(value)
            ok = (empty and other_empty) or (not empty and v is not None and v >= 0 and (not grid or v < grid[i]))
            msg = (
                ""
                if ok
                else f"Query {name} {value!r}: accepted a whole number {top}, or both fields empty for the "
                "model's own token (CLS, or its pooling head's)."
            )
            verdicts.append(gr.validate(ok, msg))
        return [gr.validate(True, "")] * 3 + verdicts + [gr.validate(True, "")] * (7 + len(ro))

    @user_errors
    def update(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, fu, dr, du, gd, progress=gr.Progress()):
        return answer(view_of(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, fu, dr, du), gd, st, progress)

    @user_errors
    def click(img, mdl, res, lay, vw, hd, thr, al, cm, st, fu, dr, du, gd, px, evt: gr.SelectData):
        now = view_of(img, mdl, res, None, None, lay, vw, hd, thr, al, cm, fu, dr, du)
        try:
            base = vit_pass(img, mdl, res, state=st).base
        except AttentionError as e:
            return refusal(t, e, gd, now, redraw)
        ok = isinstance(px, list) and len(px) == 2 and all(type(v) is int and v >= 0 for v in px)
        x, y = px if ok else evt.index
        r, c = vit_views.patch_at(x, y, base)
        return answer(now | dict(qrow=r, qcol=c), gd, st)

    @user_errors
    def pick_head(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, fu, dr, du, gd, evt: gr.SelectData):
        """A click on a head's tile shows that head large; the mean's tile shows the mean view, the
        Head slider left where it was (the mean is no head)."""
        now = view_of(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, fu, dr, du)
        try:
            heads = vit_pass(img, mdl, res, state=st).num_heads
        except AttentionError as e:
            return refusal(t, e, gd, now, redraw)
        now |= dict(view="mean") if evt.index >= heads else dict(head=evt.index)
        out = answer(now, gd, st)
        refused = t.note in out and out[t.note].get("visible")
        return out if refused else {**out, t.head: now["head"], t.view: now["view"]}

    @user_errors
    def make_download(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, fu, dr, du, gd=None):
        """The .npz of the view on screen (raw float32 maps, scores, weights, image, every picture)."""
        p = vit_pass(img, mdl, res, state=st)
        lay, hd, qr, qc = fit(p, st, lay, hd, qr, qc)
        d = vit_frames.download_maps(p, _view(qr, qc, lay, vw, thr, al, cm, (fu, dr, du)))
        return gr.update(value=d.outputs.npz, visible=True)

    @user_errors
    def model_sheet(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, *ro):
        """Every layer x every head of the visitor's query, from their pass (no new forward)."""
        p = vit_pass(img, mdl, res, state=st)
        _, _, qr, qc = fit(p, st, lay, hd, qr, qc)
        return model_view(p, vit_inputs.parse_query(qr, qc), alpha=al, cmap=cm)

    @user_errors
    def first_screen(request: gr.Request, progress=gr.Progress()):
        """What a new visitor sees at once: the start example's maps (the pass is shared by all), or
        the view a permalink names (`?example=chelsea&layer=9&q=5,7`; a bad parameter is named in a
        warning and the start screen shown)."""
        d = VIT_DEFAULTS
        try:
            link = permalink.parse(dict(request.query_params) if request is not None else {})
        except AttentionError as e:
            warning(f"This link could not be opened as given: {e}")
            link = permalink.Link()
        img = str(permalink.examples()[link.example]) if link.example else first_image
        digit = link.example is not None and link.example.startswith("digit_")
        mdl = link.model or (vit_models.OFFLINE_MODEL if digit else s.model)
        res, vw = link.resolution or d["resolution"], link.view or d["view"]
        qr, qc = link.query if isinstance(link.query, tuple) else (None, None)
        p = vit_pass(img, mdl, res, progress)
        lay, hd, qr, qc = fit(p, None, -1 if link.layer is None else link.layer, link.head or 0, qr, qc)
        thr, al, cm = (d[k] if v is None else v for k, v in zip(STYLE, (link.threshold, link.alpha, link.cmap)))
        ro = tuple(ROLLOUT[i] if v is None else v for i, v in enumerate((link.fusion, link.discard, link.rule)))
        fv = _vit_frame(p, qr, qc, lay, vw, hd, thr, al, cm, ro)
        f = fv[0]
        head_up = gr.update(maximum=p.num_heads - 1, value=hd)
        now = view_of(img, mdl, res, qr, qc, f.res.layer, vw, hd, thr, al, cm, *ro)
        return {
            **shown(fv, p, img, hd, now=now),
            t.image: img,
            t.model: mdl,
            t.resolution: res,
            t.view: vw,
            t.head: head_up,
            t.why.target: link.cls,
            **dict(zip([t.threshold, t.alpha, t.cmap, *ropts], (thr, al, cm, *ro))),
            t.find.prompts: link.find or "",
        }

    @user_errors
    def make_link(img, mdl, res, qr, qc, lay, vw, hd, cls, thr, al, cm, fu, dr, du, find, url):
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
            layer=vit_inputs.parse_index(lay, "Layer"),
            head=vit_inputs.parse_index(hd or 0, "Head"),
            view=vit_views.check_view(vw),
            query=q,
            cls=None if cls is None else int(cls),
            find=(find or "").strip() or None,
        )
        if link.example is None and img is not None:
            info(
                "Uploaded images are not part of links (the server keeps no one's files): this link opens "
                "the same model, layer, head, view and query on the start image."
            )
        base = (url or "").split("?")[0].split("#")[0]
        return gr.update(value=f"{base}?{permalink.query_string(link)}", visible=True)

    @user_errors
    def example(img, mdl, res, vw, thr, al, cm):
        p = vit_pass(img, mdl, res)
        return shown(_vit_frame(p, None, None, -1, vw, 0, thr, al, cm), p, img, 0, plain=True)

    adopted = []  # events after which only "Why this class?" redraws: the first screen, an example's follow-up
    ropts = [t.fusion, t.discard_ratio, t.discard_rule]
    inputs = [t.image, t.model, t.resolution, t.qrow, t.qcol, *style, t.state, *ropts, t.good]
    # what an answer may set: the view's outputs, and on a refusal every control back to the kept view
    restored = [t.good, t.note, t.image, t.model, t.resolution, t.view, t.threshold, t.alpha, t.cmap, *ropts]
    fast = dict(show_progress="minimal", api_visibility="private")
    heavy_only = dict(validator=queue_share())  # jobs that may run a forward: a visitor's share of the queue
    heavy = dict(fast, **heavy_only)
    on_map = dict(fast, show_progress_on=[t.qimg])  # one progress indicator (and error mark) per job
    on_map_heavy = dict(on_map, **heavy_only)
    # one listener per input that can be at fault (a failure marks that input only; the last good maps
    # stay unmarked), one job per change: a dropdown's `input` fires twice for one pick (on the pick and
    # again on blur), its `change` once; "always_last" runs the latest change after a running one; each
    # may run a forward, so each asks for a turn within the visitor's share of the queue
    at = dict(trigger_mode="always_last", js=vit_live.AFTER_DRAWING, api_visibility="private", **heavy_only)
    quick = dict(queue=False, api_visibility="private")
    upload = t.image.upload(update, inputs, [*show, t.state, *restored], show_progress_on=[t.image], **at)
    # a file that failed: no broken picture left in the input, which is outlined until an image is read
    upload.failure(lambda: gr.update(value=None, elem_classes=FAULT), None, t.image, **quick)
    upload.success(lambda: gr.update(elem_classes=[]), None, t.image, **quick)
    changes = [
        upload,
        t.model.change(update, inputs, [*show, t.state, *restored], show_progress_on=[t.model], **at),
        t.resolution.change(update, inputs, [*show, t.state, *restored], show_progress_on=[t.resolution], **at),
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
            update,
            inputs,
            [*show, t.state, *restored],
            show_progress_on=[t.qimg],
            **at,
        ),
        gr.on(  # typed query fields: checked first, so only the field at fault is marked
            [t.qrow.submit, t.qcol.submit],
            update,
            inputs,
            [*show, t.state, *restored],
            **on_map,
            validator=queue_share(check_query),
        ),
        # clicks as changes: the latest runs after a running one (the browser has drawn it already)
        t.qimg.select(
            click,
            [t.image, t.model, t.resolution, *style, t.state, *ropts, t.good, t.clicked],
            [*show, t.state, *restored],
            trigger_mode="always_last",
            js=vit_live.AFTER_CLICK,
            **on_map_heavy,
        ),
        t.gallery.select(
            pick_head,
            inputs,  # the tile names the head
            [*show, t.state, *restored],
            trigger_mode="always_last",
            **on_map_heavy,
        ),
        t.cls_btn.click(lambda: (None, None), None, [t.qrow, t.qcol], api_visibility="private", queue=False).then(
            update, inputs, [*show, t.state, *restored], **on_map_heavy
        ),
    ]
    t.dl_btn.click(make_download, inputs, t.download, **heavy)
    t.mv_btn.click(model_sheet, inputs, t.mv_img, **heavy)
    t.link_btn.click(
        make_link,
        [t.image, t.model, t.resolution, t.qrow, t.qcol, t.layer, t.view, t.head, t.why.target, *style[3:], *ropts]
        + [t.find.prompts]
        + [t.page_url],
        t.link_box,
        js="(...args) => [...args.slice(0, -1), window.location.href]",
        **fast,
    )
    if demo is not None:
        adopted.append(  # the first screen: "Why this class?" follows it too
            demo.load(first_screen, None, [*show, t.state, *restored, t.why.target, t.find.prompts], **fast)
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
    )
    t.cmp.follow(changes, main)
    t.feats.follow(changes, main)

    shown_by_examples = [c for c in show if c not in (t.download, t.qrow, t.qcol, t.live)]
    adopted += vit_examples.build(t, s, example, shown_by_examples, vit_pass, fast)
    then_update = lambda ev: ev.then(update, inputs, [*show, t.state, *restored], **on_map)  # noqa: E731
    t.why.follow([*changes, *adopted], main, on_query=then_update, compare=t.cmp.compare)
    with t.steps_slot:  # one head's row step by step, and the guided first visit that drives the tab
        steps = StepwisePanel(vit_pass, fit)
    steps.follow([*changes, *adopted], main)
    build_tour(t, steps, first_image, s.model, then_update, demo)
    t.find.follow([*changes, *adopted], main)
    vit_api.build(s.model, VIT_DEFAULTS)
    build_stepwise_api(s.model, VIT_DEFAULTS)
    relevance_panel.build_api(vit_models.OFFLINE_MODEL)
    text_panel.build_api("digit_clip")
