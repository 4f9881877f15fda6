"""The ViT attention maps tab: an image, a model and a query token in; every head's map out.

Every control reuses the visitor's pass from the server's shared store (`session.PASSES`); the
stateless endpoints for API and MCP callers are in `vit_api`.
"""

from __future__ import annotations

import gradio as gr
import pandas as pd

from attention.config import EXAMPLES_DIR
from attention.errors import AttentionError, as_whole
from attention.ui import vit_api, vit_layout, vit_live
from attention.ui.components import user_errors
from attention.ui.vit_layout import VIT_DEFAULTS
from attention.ui.vit_panels import Main
from attention.vit import models as vit_models
from attention.vit import permalink
from attention.vit import query as vit_query
from attention.vit import session as vit_session
from attention.vit import views as vit_views
from attention.vit.modelview import model_view


def start_image(startup: vit_session.Startup) -> str:
    """The first screen's image: a photo through the default model when its weights are at hand, else a
    digit through mnist_vit."""
    photo = EXAMPLES_DIR / "photos" / "chelsea.jpg"
    return str(photo if startup.default_available else EXAMPLES_DIR / "digits" / "digit_3.png")


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


def vit_pass(image, model, resolution, progress: gr.Progress | None = None):
    """The visitor's pass from the server's shared, bounded store (`session.PASSES`): computed once
    per (image content, model, resolution), within the model allow-list and compute budget; a new
    forward reports to `progress` (the event's progress bar)."""
    report = None if progress is None else (lambda frac, desc: progress(frac, desc=desc))
    return vit_session.get_pass(image, model, resolution, progress=report, cache=vit_session.PASSES, shared=True)


def _vit_frame(p, qrow, qcol, layer, view, head, threshold, alpha, cmap, rollout=(), download=False):
    """One view of pass `p` as the tab shows it; `rollout`: (head fusion, discard ratio, discard rule)
    when set; `download`: also the .npz (made only when asked)."""
    query = vit_session.parse_query(qrow, qcol)
    opts = dict(zip(("head_fusion", "discard_ratio", "discard"), rollout))
    return vit_views.frame(
        p,
        query=query,
        layer=vit_session.parse_index(layer, "Layer"),
        view=view,
        head=vit_session.parse_index(head or 0, "Head"),
        threshold=threshold,
        alpha=alpha,
        cmap=cmap,
        with_query_image=not download,
        download=download,
        rollout_options=opts,
    )


def fit(p, st, lay, hd, qr, qc):
    """The visitor's layer, head and query fitted to pass `p`: a new model starts at its last
    layer, a new grid at CLS; otherwise (no state yet, as after an example) values are kept when
    they fit, so the first change after an example is not thrown away."""
    lay, hd = vit_session.parse_index(lay, "Layer"), vit_session.parse_index(hd or 0, "Head")
    if st is not None and p.key[1] != st.key[1]:
        lay = p.num_layers - 1
    if st is not None and p.base.grid != st.grid:
        qr = qc = None
    q = vit_session.parse_query(qr, qc)
    if isinstance(q, tuple) and not (0 <= q[0] < p.base.grid[0] and 0 <= q[1] < p.base.grid[1]) and st is None:
        qr = qc = None
    return min(lay, p.num_layers - 1) if lay >= 0 else lay, min(hd, p.num_heads - 1), qr, qc


def build(demo: gr.Blocks | None = None) -> None:
    """The ViT attention maps tab, inside the caller's `gr.Tab`; registers /attention_maps.
    `demo`: the app, whose page load shows the start example's maps at once."""
    # decided when the tab is built (after `python app.py --model PATH` registered the operator's model):
    # cheap, a cache lookup, no network under HF_HUB_OFFLINE=1
    s = vit_session.startup_model()
    first_image = start_image(s)
    (
        state,
        depth,
        image,
        examples_slot,
        model,
        resolution,
        view,
        fusion,
        discard_ratio,
        discard_rule,
        layer,
        head,
        threshold,
        alpha,
        cmap,
        details,
        qimg,
        legend,
        qlabel,
        qrow,
        qcol,
        cls_btn,
        gallery,
        scores_md,
        score_bars,
        weight_bars,
        scores_df,
        mv_btn,
        mv_img,
        feats,
        link_btn,
        link_box,
        page_url,
        dl_btn,
        download,
        cmp,
        live,
    ) = vit_layout.layout(s, vit_pass, fit)

    show = [
        qimg,
        gallery,
        details,
        qlabel,
        scores_md,
        score_bars,
        weight_bars,
        scores_df,
        download,
        legend,
        layer,
        head,
        qrow,
        qcol,
        live,
    ]
    style = [layer, view, head, threshold, alpha, cmap]

    def score_plots(rows) -> dict:
        """The top tokens of the scores table as two bar charts (drawn in the browser), in rank order
        ("#01 ..." names sort as ranks; plain values, so cached example outputs can hold them)."""
        data = pd.DataFrame(
            {
                "token": [f"#{r[0]:02d} {r[1]}" for r in rows],
                "raw score": [r[2] for r in rows],
                "softmax weight": [r[3] for r in rows],
                "token kind": ["patch" if r[1].startswith("patch") else "CLS / register" for r in rows],
            }
        )
        return {score_bars: data, weight_bars: data}

    def shown(f, p, style, plain=False) -> dict:
        """A Frame as the display outputs; `style`: (view, head, opacity, colormap) for the browser's
        copy (#vit-live). `plain`: values only, no gr.update and no browser copy (cached example
        outputs cannot hold updates in Gradio 6.31; `adopt` fits the sliders and sends the copy)."""
        q = None if isinstance(f.res.query, str) else f.res.query
        out = {
            qimg: f.query_png,
            gallery: list(zip(f.outputs.thumbs, f.outputs.captions)),
            details: f.details,
            qlabel: f.query_label,
            scores_md: f.scores_summary,
            **score_plots(f.scores_rows),
            scores_df: f.scores_rows,
            download: None,  # a new view: the last download no longer matches it
            legend: f.legend,
        }
        if plain:  # (Gradio 6.31 cannot read an empty File back from the examples cache: no download key)
            return {k: v for k, v in out.items() if k is not download} | {layer: f.res.layer, head: 0}
        return {
            **out,
            layer: gr.update(maximum=p.num_layers - 1, value=f.res.layer),
            head: gr.update(maximum=p.num_heads - 1),
            qrow: None if q is None else q[0],
            qcol: None if q is None else q[1],
            state: p.ref,
            live: vit_live.value(p, f.res, *style),
        }

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
    def update(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, fu, dr, du, progress=gr.Progress()):
        p = vit_pass(img, mdl, res, progress)
        lay, hd, qr, qc = fit(p, st, lay, hd, qr, qc)
        return shown(_vit_frame(p, qr, qc, lay, vw, hd, thr, al, cm, (fu, dr, du)), p, (vw, hd, al, cm))

    @user_errors
    def click(img, mdl, res, lay, vw, hd, thr, al, cm, st, fu, dr, du, evt: gr.SelectData):
        p = vit_pass(img, mdl, res)
        r, c = vit_views.patch_at(evt.index[0], evt.index[1], p.base)
        lay, hd, _, _ = fit(p, st, lay, hd, None, None)
        return shown(_vit_frame(p, r, c, lay, vw, hd, thr, al, cm, (fu, dr, du)), p, (vw, hd, al, cm))

    @user_errors
    def pick_head(img, mdl, res, qr, qc, lay, vw, thr, al, cm, st, fu, dr, du, evt: gr.SelectData):
        """A click on a head's tile shows that head large (the mean's tile shows the mean view)."""
        p = vit_pass(img, mdl, res)
        if evt.index >= p.num_heads:
            vw = "mean"
        lay, hd, qr, qc = fit(p, st, lay, min(evt.index, p.num_heads - 1), qr, qc)
        f = _vit_frame(p, qr, qc, lay, vw, hd, thr, al, cm, (fu, dr, du))
        return {**shown(f, p, (vw, hd, al, cm)), head: hd, view: vw}

    @user_errors
    def make_download(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, fu, dr, du):
        """The .npz of the view on screen (raw float32 maps, scores, weights, image, every picture)."""
        p = vit_pass(img, mdl, res)
        lay, hd, qr, qc = fit(p, st, lay, hd, qr, qc)
        f = _vit_frame(p, qr, qc, lay, vw, hd, thr, al, cm, (fu, dr, du), download=True)
        return gr.update(value=f.outputs.npz, visible=True)

    @user_errors
    def model_sheet(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, *ro):
        """Every layer x every head of the visitor's query, from their pass (no new forward)."""
        p = vit_pass(img, mdl, res)
        _, _, qr, qc = fit(p, st, lay, hd, qr, qc)
        return model_view(p, vit_session.parse_query(qr, qc), alpha=al, cmap=cm)

    @user_errors
    def first_screen(request: gr.Request, progress=gr.Progress()):
        """What a new visitor sees at once: the start example's maps (the pass is shared by all), or
        the view a permalink names (`?example=chelsea&layer=9&q=5,7`; a bad parameter is named in a
        warning and the start screen shown)."""
        d = VIT_DEFAULTS
        try:
            link = permalink.parse(dict(request.query_params) if request is not None else {})
        except AttentionError as e:
            gr.Warning(f"This link could not be opened as given: {e}")
            link = permalink.Link()
        img = str(permalink.examples()[link.example]) if link.example else first_image
        digit = link.example is not None and link.example.startswith("digit_")
        mdl = link.model or (vit_models.OFFLINE_MODEL if digit else s.model)
        res, vw = link.resolution or d["resolution"], link.view or d["view"]
        qr, qc = link.query if isinstance(link.query, tuple) else (None, None)
        p = vit_pass(img, mdl, res, progress)
        lay, hd, qr, qc = fit(p, None, -1 if link.layer is None else link.layer, link.head or 0, qr, qc)
        f = _vit_frame(p, qr, qc, lay, vw, hd, d["threshold"], d["alpha"], d["cmap"])
        head_up = gr.update(maximum=p.num_heads - 1, value=hd)
        return {
            **shown(f, p, (vw, hd, d["alpha"], d["cmap"])),
            image: img,
            model: mdl,
            resolution: res,
            view: vw,
            head: head_up,
        }

    @user_errors
    def make_link(img, mdl, res, qr, qc, lay, vw, hd, url):
        """The address of the view on screen (an uploaded image is not part of it: links name examples)."""
        q = vit_session.parse_query(qr, qc)
        link = permalink.Link(
            example=permalink.example_name(img),
            model=(mdl or "").strip() or None,
            resolution=str(res),
            layer=vit_session.parse_index(lay, "Layer"),
            head=vit_session.parse_index(hd or 0, "Head"),
            view=vit_views.check_view(vw),
            query=q,
        )
        if link.example is None and img is not None:
            gr.Info(
                "Uploaded images are not part of links (the server keeps no one's files): this link opens "
                "the same model, layer, head, view and query on the start image."
            )
        base = (url or "").split("?")[0].split("#")[0]
        return gr.update(value=f"{base}?{permalink.query_string(link)}", visible=True)

    @user_errors
    def example(img, mdl, res, vw, thr, al, cm):
        p = vit_pass(img, mdl, res)
        return shown(_vit_frame(p, None, None, -1, vw, 0, thr, al, cm), p, (vw, 0, al, cm), plain=True)

    @user_errors
    def adopt(img, mdl, res, vw, al, cm):
        """After an example is shown (from the examples cache): the visitor's pass (computed now if no
        longer kept, so the next change is instant), sliders fitted to the model, query CLS, and the
        browser's copy of the view."""
        p = vit_pass(img, mdl, res)
        return {
            live: vit_live.value(p, p.at(None, -1), vw, 0, al, cm),
            layer: gr.update(maximum=p.num_layers - 1, value=p.num_layers - 1),
            head: gr.update(maximum=p.num_heads - 1, value=0),
            qrow: None,
            qcol: None,
            state: p.ref,
        }

    ropts = [fusion, discard_ratio, discard_rule]
    inputs = [image, model, resolution, qrow, qcol, *style, state, *ropts]
    fast = dict(show_progress="minimal", api_visibility="private")
    # one listener, one job per change: a dropdown's `input` fires twice for one pick (on the pick and
    # again on blur), its `change` once; "always_last" runs the latest change after a running one
    changes = [
        gr.on(
            [
                image.upload,
                model.change,
                resolution.change,
                view.input,
                fusion.input,
                discard_ratio.release,
                discard_rule.input,
                cmap.input,
                layer.release,
                head.release,
                threshold.release,
                alpha.release,
            ],
            update,
            inputs,
            [*show, state],
            trigger_mode="always_last",
            js=vit_live.AFTER_DRAWING,
            **fast,
        ),
        gr.on(  # typed query fields: checked first, so only the field at fault is marked
            [qrow.submit, qcol.submit], update, inputs, [*show, state], validator=check_query, **fast
        ),
        # clicks as changes: the latest runs after a running one (the browser has drawn it already)
        qimg.select(
            click,
            [image, model, resolution, *style, state, *ropts],
            [*show, state],
            trigger_mode="always_last",
            js=vit_live.AFTER_DRAWING,
            **fast,
        ),
        gallery.select(
            pick_head,
            [image, model, resolution, qrow, qcol, layer, view, threshold, alpha, cmap, state, *ropts],
            [*show, state, view],
            trigger_mode="always_last",
            **fast,
        ),
        cls_btn.click(lambda: (None, None), None, [qrow, qcol], api_visibility="private", queue=False).then(
            update, inputs, [*show, state], **fast
        ),
    ]
    dl_btn.click(make_download, inputs, download, **fast)
    mv_btn.click(model_sheet, inputs, mv_img, **fast)
    link_btn.click(
        make_link,
        [image, model, resolution, qrow, qcol, layer, view, head, page_url],
        link_box,
        js="(...args) => [...args.slice(0, -1), window.location.href]",
        **fast,
    )
    if demo is not None:
        demo.load(first_screen, None, [*show, state, image, model, resolution, view], **fast)
    main = Main(image, resolution, qrow, qcol, layer, view, head, threshold, alpha, cmap, state, qimg, model)
    cmp.follow(changes, main)
    feats.follow(changes, main)

    ex_in = [image, model, resolution, view, threshold, alpha, cmap]
    d = VIT_DEFAULTS
    row = [d["resolution"], d["view"], d["threshold"], d["alpha"], d["cmap"]]
    digits = [[str(EXAMPLES_DIR / "digits" / f"digit_{i}.png"), vit_models.OFFLINE_MODEL, *row] for i in range(10)]
    photos = [[str(EXAMPLES_DIR / "photos" / f"{n}.jpg"), vit_models.DEFAULT_MODEL, *row] for n in VIT_PHOTOS]
    sets = [("Digits · mnist_vit (ships with the app)", digits, "vit_digit_examples")]
    if s.default_available:
        sets.insert(0, (f"Photos · {vit_models.DEFAULT_MODEL}", photos, "vit_photo_examples"))
    with examples_slot:
        for label, rows, api in sets:
            ex = gr.Examples(
                rows,
                ex_in,
                [c for c in show if c not in (download, qrow, qcol, live)],
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
            ex.load_input_event.then(
                adopt, [image, model, resolution, view, alpha, cmap], [layer, head, qrow, qcol, state, live], **fast
            )
    vit_api.build(s.model, VIT_DEFAULTS)
