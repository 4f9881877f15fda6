"""Attention Explorer: a Gradio app that makes attention visible.

Thin by design: this file builds the UI, one tab per section, and wires it to the
`attention` package, which holds all the logic and knows nothing of Gradio.
`demo` is built at module level (tests import it); it is launched only under __main__.
"""

from __future__ import annotations

import functools
import inspect
import os

import gradio as gr

from attention.config import SETTINGS
from attention.errors import AttentionError
from attention import models as vit_models, outputs as vit_outputs, render as vit_render, session as vit_session, views as vit_views
from attention import retrieval as mnist_retrieval, retrieval_views as mnist_views
from attention import calculator_form as qkv_form, calculator_presets as qkv_presets, calculator_view as qkv, matrices as qkv_matrices, patches as qkv_patches


def user_errors(fn):
    """Show the package's typed errors as a `gr.Error` with their message (never a traceback).

    Works for plain handlers and for generator handlers (streamed outputs)."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except AttentionError as e:
                raise gr.Error(str(e), print_exception=False) from None

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AttentionError as e:
            raise gr.Error(str(e), print_exception=False) from None

    return wrapper


def _as_sent(self, payload):
    """Hand the function the value exactly as sent (no rounding, no bounds left by the last answer):
    the package's checks judge it and say what is accepted. Gradio's own conversion would fail
    first with its generic error, or round 7.5 to 8."""
    return payload


class Number(gr.Number):
    """A number box whose value reaches the function as sent."""

    is_template = True  # drawn by the frontend's own Number
    preprocess = _as_sent


class Slider(gr.Slider):
    """A slider whose value reaches the function as sent (API callers may send any number)."""

    is_template = True
    preprocess = _as_sent


class Sketchpad(gr.Sketchpad):
    """A sketchpad that names a file it cannot read instead of failing inside Gradio."""

    def get_block_name(self) -> str:  # drawn by the frontend's ImageEditor, as gr.Sketchpad is
        return gr.Sketchpad.__base__.__name__.lower()

    get_block_class = get_block_name

    def preprocess(self, payload):
        try:
            return super().preprocess(payload)
        except Exception:  # noqa: BLE001 - any decoding failure is the sender's file
            raise gr.Error("The sketch is not an image that can be read; accepted: a PNG, JPEG or WebP drawing "
                           "(an ImageEditor value whose composite is an image file).", print_exception=False) from None


# ----- ViT attention tab -----------------------------------------------------------------
VIT_STARTUP = vit_session.startup_model()  # cheap: cache lookup, no network under HF_HUB_OFFLINE=1
VIT_DIR = os.path.dirname(os.path.abspath(__file__))
VIT_DEFAULTS = {"resolution": "auto", "view": "heads", "threshold": 0.6, "alpha": 0.6, "cmap": "inferno"}
VIT_NONE = "(none)"
VIT_PHOTOS = ["chelsea", "astronaut", "coffee", "rocket", "grace_hopper", "china", "flower", "camera", "coins", "hubble_deep_field", "retina"]


class VitImagePath(gr.Image):
    """An image input that hands the function the uploaded file's path without opening it, so
    the package's guarded decoder (`attention.images.load_image`) judges every file and its
    message reaches the visitor or API client (Gradio's own decoding would swallow it)."""

    is_template = True  # drawn by the frontend's Image component

    def preprocess(self, payload):
        if payload is not None and payload.path and not (payload.url or "").startswith("data:"):
            return str(payload.path)
        return super().preprocess(payload)


def vit_pass(image, model, resolution, progress=None):
    """The visitor's pass from the server's shared, bounded store (`session.PASSES`): computed once
    per (image content, model, resolution), within the model allow-list and compute budget."""
    return vit_session.run(image, model, resolution, progress=progress, cache=vit_session.PASSES, shared=True)


def _vit_frame(p, qrow, qcol, layer, view, head, threshold, alpha, cmap):
    query = vit_session.parse_query(qrow, qcol)
    return vit_views.frame(p, query=query, layer=vit_session.parse_index(layer, "Layer"), view=view,
                           head=vit_session.parse_index(head or 0, "Head"),
                           threshold=threshold, alpha=alpha, cmap=cmap)


def _vit_show(f, p, cmap, plain=False):
    """A Frame -> the display outputs, in the order of `show` in vit_tab. `plain`: no gr.update
    (cached example outputs cannot hold updates in Gradio 6.31; `_vit_limits` follows them)."""
    q = f.res.query
    return (
        f.query_png, list(zip(f.outputs.pngs, f.outputs.captions)), f.details, f.query_label,
        f.scores_summary, f.scores_rows, f.outputs.npz, vit_views.legend_html(cmap),
        f.res.layer if plain else gr.update(maximum=p.num_layers - 1, value=f.res.layer),
        0 if plain else gr.update(maximum=p.num_heads - 1),
        None if isinstance(q, str) else q[0], None if isinstance(q, str) else q[1],
    )


VIT_CSS = """
#vit-image img, #vit-query-image img { image-rendering: pixelated; }
#vit-image img { width: 100%; height: 100%; object-fit: contain; }
#vit-query-image img { width: auto; height: auto; max-width: 100%; max-height: 100%; }  /* never upscaled:
   Gradio 6.31 maps clicks to natural pixels assuming an image is shown at most at its natural size */
#vit-gallery .caption-label { white-space: normal; }
#vit-details { font-size: 0.92em; }
"""


def vit_tab() -> None:
    s = VIT_STARTUP
    gr.Markdown(
        "Upload an image or pick an example: every head's attention from the **query token** (the CLS token, "
        "or any patch you click) is laid over the image. Changing layer, view, head, threshold, opacity or "
        "colours reuses your last forward pass, so it answers at once."
    )
    if s.notice:
        gr.HTML(f'<div style="border:1px solid #e0b000;background:#fff8e1;color:#5d4300;border-radius:6px;'
                f'padding:8px 12px">⚠️ {s.notice}</div>', elem_id="vit-notice")
    state, cstate = gr.State(None, time_to_live=1800), gr.State(None, time_to_live=1800)
    with gr.Row(equal_height=False):
        with gr.Column(scale=4, min_width=320):
            image = VitImagePath(type="filepath", image_mode=None, label="Image", format="png",
                                 sources=["upload", "clipboard"], height=260, elem_id="vit-image")
            examples_slot = gr.Column()
            with gr.Row():
                model = gr.Dropdown([(f"{a} · {sp.description}", a) for a, sp in vit_models.REGISTRY.items()],
                                    value=s.model, allow_custom_value=True, label="Model", scale=3,
                                    info="an alias, a timm ViT name, or hf-hub:org/repo", elem_id="vit-model")
                resolution = gr.Dropdown(["auto", "native", "224", "320", "480", "640", "800"], value=VIT_DEFAULTS["resolution"],
                                         allow_custom_value=True, label="Resolution", scale=1,
                                         info="shorter side, px", elem_id="vit-resolution")
            view = gr.Radio([(label, key) for key, label in vit_views.VIEWS.items()], value=VIT_DEFAULTS["view"],
                            label="View", elem_id="vit-view")
            layer = Slider(0, 11, value=11, step=1, label="Layer", info="0 = first; starts at the last",
                              elem_id="vit-layer")
            with gr.Row():
                threshold = Slider(0.05, 1.0, value=VIT_DEFAULTS["threshold"], step=0.05, label="Mask threshold",
                                      info="share of attention each mask keeps", elem_id="vit-threshold")
                alpha = Slider(0.0, 1.0, value=VIT_DEFAULTS["alpha"], step=0.05, label="Overlay opacity",
                                  info="0 = image only", elem_id="vit-alpha")
            cmap = gr.Dropdown(list(vit_render.COLORMAPS), value=VIT_DEFAULTS["cmap"], label="Colormap", elem_id="vit-cmap")
        with gr.Column(scale=7, min_width=480):
            details = gr.Markdown("Pick an example or upload an image to start.", elem_id="vit-details")
            with gr.Row(equal_height=False):
                with gr.Column(scale=4, min_width=240):
                    qimg = gr.Image(label="Click a patch to make it the query", format="png",
                                    interactive=False, height=300, elem_id="vit-query-image",
                                    buttons=["download", "fullscreen"])
                    qlabel = gr.Markdown("**Query: the CLS token.**", elem_id="vit-query-label")
                    with gr.Row(equal_height=False):
                        qrow = Number(None, label="Query row", precision=0, minimum=0, min_width=70, elem_id="vit-qrow")
                        qcol = Number(None, label="Query col", precision=0, minimum=0, min_width=70, elem_id="vit-qcol")
                        cls_btn = gr.Button("Back to CLS", size="sm", min_width=90, elem_id="vit-cls")
                with gr.Column(scale=5, min_width=300):
                    gallery = gr.Gallery(label="Attention maps", format="png", columns=3, height="auto",
                                         object_fit="contain", interactive=False, elem_id="vit-gallery")
                    legend = gr.HTML(vit_views.legend_html(VIT_DEFAULTS["cmap"]), elem_id="vit-legend",
                                     head=f"<style>{VIT_CSS}</style>")  # tab-local CSS (css= needs launch())
            with gr.Accordion("Scores vs weights: the query row of one head, before and after softmax", open=True):
                head = Slider(0, 5, value=0, step=1, label="Head", elem_id="vit-head")
                scores_md = gr.Markdown("", elem_id="vit-scores-summary")
                scores_df = gr.Dataframe(headers=vit_views.SCORE_HEADERS, interactive=False, elem_id="vit-scores",
                                         max_height=260)
            download = gr.File(label="Download: raw float32 maps + the PNGs, one .npz (np.load it, or unzip it)",
                               interactive=False, elem_id="vit-download")
    with gr.Accordion("Compare with a second model (same image, same query)", open=False):
        gr.Markdown("For instance DINOv2 with and without registers (`dinov2_vits14` vs `dinov2_vits14_reg`): "
                    "registers soak up the attention that DINOv2 otherwise spends on a few background patches.")
        compare = gr.Dropdown([VIT_NONE] + list(vit_models.REGISTRY), value=VIT_NONE, allow_custom_value=True,
                              label="Second model", elem_id="vit-compare")
        cdetails = gr.Markdown("", elem_id="vit-compare-details")
        cgallery = gr.Gallery(label="Second model", format="png", columns=5, height="auto", object_fit="contain",
                              interactive=False, elem_id="vit-compare-gallery")

    show = [qimg, gallery, details, qlabel, scores_md, scores_df, download, legend, layer, head, qrow, qcol]
    style = [layer, view, head, threshold, alpha, cmap]

    def progress_cb(progress):
        return lambda frac, desc: progress(frac, desc=desc)

    @user_errors
    def update(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, progress=gr.Progress()):
        p = vit_pass(img, mdl, res, progress_cb(progress))
        if st is None or p.key[1] != st.key[1]:
            lay = p.num_layers - 1  # a new model starts at its last layer
        if st is None or p.base.grid != st.grid:
            qr = qc = None  # a new grid: back to CLS
        hd = min(vit_session.parse_index(hd or 0, "Head"), p.num_heads - 1)
        f = _vit_frame(p, qr, qc, lay, vw, hd, thr, al, cm)
        return (*_vit_show(f, p, cm), p.ref)

    @user_errors
    def click(img, mdl, res, lay, vw, hd, thr, al, cm, st, evt: gr.SelectData):
        p = vit_pass(img, mdl, res)
        r, c = vit_views.patch_at(evt.index[0], evt.index[1], p.base)
        lay, hd = vit_session.parse_index(lay, "Layer"), vit_session.parse_index(hd or 0, "Head")
        f = _vit_frame(p, r, c, min(lay, p.num_layers - 1), vw, min(hd, p.num_heads - 1), thr, al, cm)
        return (*_vit_show(f, p, cm), p.ref)

    @user_errors
    def example(img, mdl, res, vw, thr, al, cm):
        p = vit_pass(img, mdl, res)
        return _vit_show(_vit_frame(p, None, None, -1, vw, 0, thr, al, cm), p, cm, plain=True)[:-2]

    @user_errors
    def limits(mdl):
        """Layer and head sliders fitted to a model (loaded once, cached; no forward pass); query: CLS."""
        L, H = vit_session.depth(mdl)
        return gr.update(maximum=L - 1, value=L - 1), gr.update(maximum=H - 1, value=0), None, None

    def compare_update(img, cmp, res, qr, qc, lay, vw, thr, al, cm, st, cst, progress=gr.Progress()):
        if not cmp or cmp == VIT_NONE or st is None:
            return "", [], None
        try:
            c = vit_pass(img, cmp, res, progress_cb(progress))
            q = vit_session.map_query(vit_session.parse_query(qr, qc), st.grid, c.base.grid)
            lay_c = vit_session.map_layer(int(lay), st.num_layers, c.num_layers)
            f = vit_views.frame(c, query=q, layer=lay_c, view=vw, threshold=thr, alpha=al, cmap=cm, with_query_image=False)
        except AttentionError as e:
            return f"⚠️ {e}", [], cst
        return f.details, list(zip(f.outputs.pngs, f.outputs.captions)), c.ref

    inputs = [image, model, resolution, qrow, qcol, *style, state]
    cmp_in = [image, compare, resolution, qrow, qcol, layer, view, threshold, alpha, cmap, state, cstate]
    cmp_out = [cdetails, cgallery, cstate]
    fast = dict(show_progress="minimal", api_visibility="private")
    # one listener, one job per change: a dropdown's `input` fires twice for one pick (on the pick and
    # again on blur), its `change` once; "always_last" runs the latest change after a running one
    gr.on([image.upload, model.change, resolution.change, view.input, cmap.input, qrow.submit, qcol.submit,
           layer.release, head.release, threshold.release, alpha.release], update, inputs, [*show, state],
          trigger_mode="always_last", **fast).success(compare_update, cmp_in, cmp_out, **fast)
    qimg.select(click, [image, model, resolution, *style, state], [*show, state], **fast).success(
        compare_update, cmp_in, cmp_out, **fast)
    cls_btn.click(lambda: (None, None), None, [qrow, qcol], api_visibility="private", queue=False).then(
        update, inputs, [*show, state], **fast).success(compare_update, cmp_in, cmp_out, **fast)
    compare.input(user_errors(compare_update), cmp_in, cmp_out, **fast)

    ex_in = [image, model, resolution, view, threshold, alpha, cmap]
    d = VIT_DEFAULTS
    row = [d["resolution"], d["view"], d["threshold"], d["alpha"], d["cmap"]]
    digits = [[os.path.join(VIT_DIR, "examples", "digits", f"digit_{i}.png"), vit_models.OFFLINE_MODEL, *row] for i in range(10)]
    photos = [[os.path.join(VIT_DIR, "examples", "photos", f"{n}.jpg"), vit_models.DEFAULT_MODEL, *row] for n in VIT_PHOTOS]
    sets = [("Digits · mnist_vit (ships with the app)", digits, "vit_digit_examples")]
    if s.default_available:
        sets.insert(0, (f"Photos · {vit_models.DEFAULT_MODEL}", photos, "vit_photo_examples"))
    with examples_slot:
        for label, rows, api in sets:
            ex = gr.Examples(rows, ex_in, show[:-2], fn=example, cache_examples=True, cache_mode="lazy", label=label,
                        visible_columns=[0], examples_per_page=11, api_name=api, api_visibility="private",
                        elem_id=api.replace("_", "-"))
            ex.load_input_event.then(limits, [model], [layer, head, qrow, qcol], **fast)

    # API: /attention_maps (stateless; hidden inputs so every parameter after `image` has a default)
    with gr.Row(visible=False):
        a_img = VitImagePath(type="filepath", image_mode=None, label="image")
        a_model = gr.Textbox(s.model, label="model")
        a_layer = Number(-1, label="layer")
        a_res = gr.Textbox(VIT_DEFAULTS["resolution"], label="resolution")
        a_view = gr.Textbox(VIT_DEFAULTS["view"], label="view")
        a_thr = Number(VIT_DEFAULTS["threshold"], label="threshold")
        a_qr = Number(None, label="query_row")
        a_qc = Number(None, label="query_col")
        a_sheet = gr.Image(format="png", type="filepath", label="overlays")
        a_file = gr.File(label="maps")
        a_info = gr.JSON(label="info")
        a_btn = gr.Button("attention_maps")

    @user_errors
    def attention_maps(image, model=s.model, layer=-1, resolution=VIT_DEFAULTS["resolution"], view=VIT_DEFAULTS["view"],
                       threshold=VIT_DEFAULTS["threshold"], query_row=None, query_col=None):
        """Attention maps of one image. Returns (overlays, maps, info): one PNG sheet of the captioned
        overlays (one per head then their mean, or the chosen view); one .npz of the raw float32
        maps, scores, weights and the image they were computed on; a dict of the facts (model,
        grid, layer, query, tiles with captions). query_row/query_col both empty = the CLS token."""
        query = vit_session.parse_query(query_row, query_col)
        view = vit_views.check_view(view)
        threshold = VIT_DEFAULTS["threshold"] if threshold is None else threshold
        vit_views.check_style(threshold, VIT_DEFAULTS["alpha"], VIT_DEFAULTS["cmap"])
        layer = vit_session.parse_index(-1 if layer is None else layer, "Layer")
        # one request, one query: the forward records that query's rows and keeps q/k only for rollout
        p = vit_session.run(image, model, resolution, query=query, keep_qk=view == "rollout",
                            cache=vit_session.PASSES, shared=True)
        f = vit_views.frame(p, query=query, layer=layer, view=view, threshold=threshold,
                            with_query_image=False, sheet_only=True)
        info = vit_outputs.describe(f.res, f.outputs, model=p.model, device=p.device, view=view, threshold=threshold,
                                 render_seconds=f.seconds)
        return f.outputs.sheet, f.outputs.npz, info

    a_btn.click(attention_maps, [a_img, a_model, a_layer, a_res, a_view, a_thr, a_qr, a_qc], [a_sheet, a_file, a_info],
                api_name="attention_maps", api_visibility="public")


# ----- end ViT attention tab -------------------------------------------------------------


# ----- MNIST retrieval tab ---------------------------------------------------------------
@user_errors
def retrieval_database(n, seed):
    return mnist_views.database_view(n, seed)


@user_errors
def retrieval_hard(n, seed, index, shuffle_seed):
    return mnist_views.hard_view(n, seed, index, shuffle_seed)


@user_errors
def retrieval_soft(n, seed, d, key_seed, scale):
    return mnist_views.soft_view(n, seed, d, key_seed, scale)


@user_errors
def retrieval_many(n, seed, d, key_seed, scale, num_q):
    return mnist_views.many_view(n, seed, d, key_seed, scale, num_q)


@user_errors
def retrieval_trained(n, seed, query_index, state=None):
    return mnist_views.trained_view(n, seed, query_index, state)


@user_errors
def retrieval_sketch(n, seed, sketch, state=None):
    return mnist_views.sketch_view(n, seed, sketch, state)


@user_errors
def retrieval_retrain(model_name, epochs, seed, state, progress=gr.Progress()):
    """Streams (status, loss plot, state); None from the package = leave that output as it is."""
    steps = mnist_views.retrain(model_name, epochs, seed, state,
                                on_step=lambda step, total: progress((step, total), desc=f"training {model_name}"))
    for msg, fig, new_state in steps:
        yield msg, gr.skip() if fig is None else fig, gr.skip() if new_state is None else new_state


def retrieval_tab() -> None:
    db0 = (mnist_retrieval.DEFAULT_N, mnist_retrieval.DEFAULT_SEED)
    grid0, note0 = retrieval_database(*db0)  # the page opens with every section filled in
    hard0 = retrieval_hard(*db0, 7, 0)
    soft0 = retrieval_soft(*db0, 16, 0, 1.0)
    many0 = retrieval_many(*db0, 16, 0, 1.0, 16)
    trained0 = retrieval_trained(*db0, 0)
    gr.Markdown("Attention is a soft database lookup: a query is scored against keys, the scores become "
                "weights, and the answer is the weighted sum of the values. Here the values are MNIST digits.")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=220):
            n = Number(mnist_retrieval.DEFAULT_N, precision=0, label="database size N")
            seed = Number(mnist_retrieval.DEFAULT_SEED, precision=0, label="database seed")
            draw = gr.Button("Draw database", variant="secondary")
            source = gr.Markdown(note0)
        db_img = gr.Image(grid0, label="database (values V)", format="png", elem_id="retrieval-db", scale=3,
                          show_label=True, buttons=["download"], height=320)
    db_inputs = [n, seed]
    with gr.Tabs():
        with gr.Tab("1 · Hard attention", id="retrieval-hard"):
            gr.Markdown("Every item *i* gets the one-hot key e_i; keys and values are shuffled together. The query "
                        "is e_index, so QK^T is 1 at the one row holding item *index* and 0 elsewhere. That vector is "
                        "already a valid weighting (non-negative, sums to 1), so **no softmax is needed**: softmax "
                        "would give that row only e/(e+N-1) of the weight and blur the answer. The retrieved image "
                        "equals the database image exactly.")
            with gr.Row():
                index = Number(7, precision=0, label="query index (database item)")
                shuffle_seed = Number(0, precision=0, label="shuffle seed")
                hard_btn = gr.Button("Retrieve", variant="primary")
            with gr.Row(equal_height=False):
                keys_img = gr.Image(hard0[0], label="keys K (shuffled one-hot rows)", format="png", height=260)
                hard_plot = gr.Plot(hard0[1], show_label=False, format="png")
                hard_img = gr.Image(hard0[2], label="retrieved = QK^T V", format="png", height=260, elem_id="retrieval-hard-out")
            with gr.Accordion("details (scores, shuffle order, exactness check, as JSON)", open=False):
                hard_json = gr.JSON(hard0[3], show_label=False)
        with gr.Tab("2 · Soft attention", id="retrieval-soft"):
            gr.Markdown("A random query (1 × d) and random keys (N × d): weights = softmax(scale · QK^T), retrieved = "
                        "weights · V, a blurry average of many digits. Raise the scale: the softmax sharpens toward "
                        "hard attention (one digit); scale 0 averages all of them equally.")
            with gr.Row():
                d = Number(16, precision=0, label="key dimension d")
                key_seed = Number(0, precision=0, label="query/key seed")
                scale = Slider(0, 20, value=1, step=0.1, label="scale (inverse temperature)")
                soft_btn = gr.Button("Retrieve", variant="primary")
            with gr.Row(equal_height=False):
                soft_plot = gr.Plot(soft0[0], show_label=False, format="png", scale=3)
                soft_img = gr.Image(soft0[1], label="retrieved = softmax(scale·QK^T) V", format="png", height=260, scale=1)
            with gr.Accordion("details (all weights, as JSON)", open=False):
                soft_json = gr.JSON(soft0[2], show_label=False)
        with gr.Tab("3 · Many queries", id="retrieval-many"):
            gr.Markdown("num_q random queries at once (Q is num_q × d, same keys, d, seed and scale as in the soft "
                        "tab): one softmax per row of QK^T, one retrieval per query.")
            with gr.Row():
                num_q = Number(16, precision=0, label=f"number of queries num_q (1 to {mnist_retrieval.MAX_QUERIES})")
                many_btn = gr.Button("Retrieve all", variant="primary")
            many_img = gr.Image(many0[0], label="retrievals, one per query", format="png", height=320)
            with gr.Accordion("details (largest weight of each query, as JSON)", open=False):
                many_json = gr.JSON(many0[1], show_label=False)
        with gr.Tab("4 · Trained retrieval", id="retrieval-trained"):
            gr.Markdown("Two trained models look up the query digit in the database above, side by side. **lab**: the "
                        "lab's Linear(784, 32) embedding with one attention head, trained to reproduce the query "
                        "image (MSE). **cnn**: a small CNN embedding with 4 heads, also rewarded when the weights, "
                        "summed per label, pick the query's class; trained on a fresh random database each step.")
            state = gr.State(None)
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=240):
                    q_index = Number(0, precision=0, label="held-out query digit "
                                        f"(0 to {mnist_views.heldout_count() - 1:,})")
                    pick_btn = gr.Button("Retrieve this digit", variant="primary", elem_id="retrieval-pick")
                    rand_btn = gr.Button("Random held-out digit")
                with gr.Column(scale=3, min_width=300):
                    sketch = Sketchpad(label="…or draw a digit (pick the brush, bottom left, first)",
                                          canvas_size=(280, 280), type="numpy",
                                          brush=gr.Brush(default_size=18, colors=["#000000"], color_mode="fixed"),
                                          elem_id="retrieval-sketch", height=330, layers=False)
                    sketch_btn = gr.Button("Retrieve my drawing", variant="primary", elem_id="retrieval-sketch-btn")
                q_img = gr.Image(trained0[0], label="query as the models see it (28 × 28)", format="png", height=240,
                                 scale=2, min_width=200, elem_id="retrieval-query")
            outs = []
            with gr.Row(equal_height=False):
                for i, (name, title) in enumerate((("lab", "lab model (Linear + 1 head, MSE)"),
                                                   ("cnn", "cnn model (CNN + 4 heads, class-aware)"))):
                    with gr.Column(min_width=420):
                        gr.Markdown(f"### {title}")
                        with gr.Row(equal_height=True):
                            r_img = gr.Image(trained0[1 + 3 * i], label="retrieved = weights · V", format="png",
                                             height=220, scale=1, min_width=140)
                            r_plot = gr.Plot(trained0[2 + 3 * i], show_label=False, format="png", scale=3)
                        r_gal = gr.Gallery(trained0[3 + 3 * i], label="top-10 matches (#rank · label · weight)",
                                           columns=5, rows=2, format="png", height=290, object_fit="contain",
                                           elem_id=f"retrieval-top10-{name}", allow_preview=False)
                        outs += [r_img, r_plot, r_gal]
            with gr.Accordion("details (top-10 with labels and weights, as JSON)", open=False):
                trained_json = gr.JSON(trained0[7], show_label=False)
            with gr.Accordion("Retrain your own copy (a few epochs, from scratch)", open=False):
                with gr.Row():
                    rt_model = gr.Radio(["lab", "cnn"], value="lab", label="model")
                    rt_epochs = Number(2, precision=0, label="epochs (1 to 5, ~3 s each for lab, ~6 s for cnn)")
                    rt_seed = Number(1, precision=0, label="training seed")
                    rt_btn = gr.Button("Retrain my copy", variant="primary")
                    reset_btn = gr.Button("Back to the shipped models")
                rt_msg = gr.Markdown()
                rt_plot = gr.Plot(label="loss", format="png")

    hard_args = (retrieval_hard, db_inputs + [index, shuffle_seed], [keys_img, hard_plot, hard_img, hard_json])
    soft_args = (retrieval_soft, db_inputs + [d, key_seed, scale], [soft_plot, soft_img, soft_json])
    many_args = (retrieval_many, db_inputs + [d, key_seed, scale, num_q], [many_img, many_json])
    trained_outs = [q_img] + outs + [trained_json]
    trained_args = (retrieval_trained, db_inputs + [q_index, state], trained_outs)
    # errors and progress show on one image per section, not as "Error" over every output
    quiet = dict(api_visibility="private", show_progress="minimal")
    hard_btn.click(*hard_args, api_name="retrieval_hard", show_progress_on=hard_img)
    soft_btn.click(*soft_args, api_name="retrieval_soft", show_progress_on=soft_img)
    scale.release(*soft_args, show_progress_on=soft_img, **quiet)
    many_btn.click(*many_args, api_name="retrieval_many", show_progress_on=many_img)
    pick_btn.click(*trained_args, api_name="retrieval_trained", show_progress_on=q_img)
    rand_btn.click(mnist_views.random_heldout_index, None, q_index,
                   api_visibility="private").then(*trained_args, show_progress_on=q_img, **quiet)
    sketch_btn.click(retrieval_sketch, db_inputs + [sketch, state], trained_outs, api_name="retrieval_sketch",
                     show_progress_on=q_img)
    (rt_btn.click(retrieval_retrain, [rt_model, rt_epochs, rt_seed, state], [rt_msg, rt_plot, state],
                  api_name="retrieval_retrain", concurrency_limit=1, concurrency_id="retrieval_retrain",
                  show_progress_on=rt_plot)
     .success(*trained_args, show_progress_on=q_img, **quiet))
    (reset_btn.click(lambda: (None, "Back to the shipped models."), None, [state, rt_msg], api_visibility="private")
     .then(*trained_args, show_progress_on=q_img, **quiet))
    (draw.click(retrieval_database, db_inputs, [db_img, source], api_name="retrieval_database",
                show_progress_on=db_img)  # refresh every section
    # (registered last: the public endpoints above keep their plain api_names)
     .success(*hard_args, show_progress_on=hard_img, **quiet).success(*soft_args, show_progress_on=soft_img, **quiet)
     .success(*many_args, show_progress_on=many_img, **quiet)
     .success(*trained_args, show_progress_on=q_img, **quiet))

# ----- end MNIST retrieval tab -----------------------------------------------------------


# ----- Q/K/V calculator tab --------------------------------------------------------------
QKV_DIRECT, QKV_X = qkv_form.MATRICES[qkv.DIRECT], qkv_form.MATRICES[qkv.FROM_X]
QKV_TABLES, QKV_TEXT = "Tables", "Text"
QKV_PHOTOS_DIR = os.path.join(VIT_DIR, "examples", "photos")
QKV_PHOTOS = sorted(os.path.join(QKV_PHOTOS_DIR, f) for f in (os.listdir(QKV_PHOTOS_DIR) if os.path.isdir(QKV_PHOTOS_DIR)
                                                             else []) if f.lower().endswith((".jpg", ".png")))
QKV_IMAGE = next((p for p in QKV_PHOTOS if p.endswith("chelsea.jpg")), QKV_PHOTOS[0] if QKV_PHOTOS else
                 os.path.join(VIT_DIR, "examples", "digits", "digit_3.png"))


def _qkv_table(a):
    """A Dataframe update showing matrix `a` (rows, cols) as editable text cells."""
    return gr.Dataframe(**qkv_form.table(a))


@user_errors
def qkv_calculate(Q: str, K: str, V: str, heads: int = 1, scale_mode: str = "default", scale: float = 1.0,
                  mask_mode: str = "none", mask: str = "", dropout: float = 0.0, seed: int = 0) -> dict:
    """Scaled dot-product attention step by step from text matrices (rows by newline or ';',
    numbers by spaces or commas, or [[1, 0], [0, 1]]). scale_mode: default (1/sqrt(d_head)),
    none or custom (uses `scale`); mask_mode: none, causal or custom (`mask`: n x m 0/1, 1 = may
    attend). Returns scores, scaled, masked, weights as [head][query][key] (null = masked),
    output (n x d_v), notes and the check against torch's scaled_dot_product_attention."""
    return qkv.to_json(qkv.run({"Q": Q, "K": K, "V": V}, mode="direct", heads=heads, scale_mode=scale_mode,
                               scale=scale, mask_mode=mask_mode, mask=mask, dropout=dropout, seed=seed))


@user_errors
def qkv_calculate_from_x(X: str, W_q: str, W_k: str, W_v: str, W_o: str = "", heads: int = 1,
                         scale_mode: str = "default", scale: float = 1.0, mask_mode: str = "none", mask: str = "",
                         dropout: float = 0.0, seed: int = 0) -> dict:
    """Self-attention of X with Q = X W_q, K = X W_k, V = X W_v (W_o optional: blank = none); the
    other parameters as in /calculate. Also returns Q, K, V, the concatenated heads and the
    check against torch.nn.MultiheadAttention with the same weights."""
    return qkv.to_json(qkv.run({"X": X, "W_q": W_q, "W_k": W_k, "W_v": W_v, "W_o": W_o}, mode="x", heads=heads,
                               scale_mode=scale_mode, scale=scale, mask_mode=mask_mode, mask=mask,
                               dropout=dropout, seed=seed))


def _qkv_patches(image, patch, heads, seed, index=None, click=None):
    v = qkv_patches.patch_view(image, patch, heads, seed, index, click)
    return v.grid, v.maps, v.matrices, v.info, gr.update(maximum=v.count - 1, value=v.index)


@user_errors
def qkv_patch_attention(image, patch=16, heads=4, seed=0, index=None):
    """Image -> patches -> + sinusoidal positions -> random Q, K, V -> attention. Returns the patch grid
    with the chosen patch (raster index; empty or out of range = the centre) outlined, its attention on
    the image per head, the N x N attention matrices per head, a description of the shapes, and the index."""
    return _qkv_patches(image, patch, heads, seed, index)


def calculator_tab() -> None:
    gr.Markdown("Type small matrices and follow **softmax(Q Kᵀ / √d) V** step by step, per head, checked "
                "against PyTorch. Matrices: rows by newline or `;`, numbers by spaces or commas, or "
                "`[[1, 0], [0, 1]]`; up to 64 x 64.")
    presets = qkv_presets.PRESETS
    first = next(iter(presets.values()))
    start = qkv_form.first_matrices(presets)
    start_checks, start_notes, start_report = qkv.report(qkv.run(first.matrices, mode=first.mode))
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=460):
            with gr.Row():
                preset = gr.Dropdown(list(presets), value=first.name, label="Preset", scale=3, elem_id="qkv-preset")
                edit_as = gr.Radio([QKV_TABLES, QKV_TEXT], value=QKV_TABLES, label="Enter matrices as", scale=2,
                                   elem_id="qkv-edit-as")
            about = gr.Markdown(first.description, elem_id="qkv-about")
            mode = gr.Radio(list(qkv_form.MODE_LABELS), value=next(iter(qkv_form.MODE_LABELS)), label="Mode",
                            elem_id="qkv-mode")
            tables, texts, boxes = {}, {}, {}
            for group in (QKV_DIRECT, QKV_X):
                visible = group == QKV_DIRECT
                with gr.Row(visible=visible) as boxes[group, QKV_TABLES]:
                    for n in group:
                        tables[n] = gr.Dataframe(**qkv_form.table(start[n]), label=n, type="array", datatype="str", interactive=True,
                                                 min_width=110, max_height=260,
                                                 elem_id=f"qkv-table-{n.lower()}")
                with gr.Row(visible=False) as boxes[group, QKV_TEXT]:
                    for n in group:
                        texts[n] = gr.Textbox(qkv_matrices.format_matrix(start[n]), label=n, lines=4, min_width=110, elem_id=f"qkv-text-{n.lower()}")
            use_wo = gr.Checkbox(False, label="Output projection W_o (concatenated heads × W_o)", visible=False,
                                 elem_id="qkv-use-wo")
            with gr.Row():
                heads = Number(1, label="Heads", precision=0, minimum=1, maximum=64, min_width=80, elem_id="qkv-heads")
                scale_mode = gr.Radio(list(qkv_form.SCALE_LABELS), value="1/√d_head", label="Scale", min_width=200,
                                      elem_id="qkv-scale-mode")
                scale = Number(1.0, label="Custom scale", min_width=90, elem_id="qkv-scale")
            with gr.Row():
                mask_mode = gr.Radio(list(qkv_form.MASK_LABELS), value="none", label="Mask", min_width=200, elem_id="qkv-mask-mode")
                mask = gr.Textbox("", label="Custom mask (n x m, 1 = may attend, 0 = blocked)", lines=2,
                                  elem_id="qkv-mask")
            with gr.Row():
                dropout = Slider(0.0, 0.9, value=0.0, step=0.05, label="Dropout on the weights (training only)",
                                    elem_id="qkv-dropout")
                seed = Number(0, label="Dropout seed", precision=0, min_width=90, elem_id="qkv-seed")
            go = gr.Button("Calculate", variant="primary", elem_id="qkv-go")
        with gr.Column(scale=1, min_width=480):
            checks = gr.Markdown(start_checks, elem_id="qkv-checks")
            notes = gr.Markdown(start_notes, elem_id="qkv-notes")
            report = gr.HTML(start_report, elem_id="qkv-report")

    settings = {"mode_label": mode, "use_wo": use_wo, "heads": heads, "scale_label": scale_mode, "scale": scale,
                "mask_label": mask_mode, "mask": mask, "dropout": dropout, "seed": seed}
    calc_inputs = {edit_as, *tables.values(), *texts.values(), *settings.values()}

    def matrices(d, to=None):  # name -> value of the editors in use (or of the `to` ones)
        return {n: d[c] for n, c in (tables if (to or d[edit_as]) == QKV_TABLES else texts).items()}

    @user_errors
    def qkv_ui_calculate(d):
        return qkv.report(qkv_form.run_form(matrices(d), **{k: d[c] for k, c in settings.items()}))

    def fill_mask(d):  # "custom" chosen with no mask yet: start from the causal pattern of the current shape
        m = qkv_form.custom_mask_start(d[mask_mode], d[mask], d[mode], matrices(d))
        return gr.update() if m is None else m

    def layout(m, how):
        m = qkv_form.MODE_LABELS[m]
        return [gr.Row(visible=(group == QKV_DIRECT) == (m == qkv.DIRECT) and h == how)
                for group in (QKV_DIRECT, QKV_X) for h in (QKV_TABLES, QKV_TEXT)] + [gr.Checkbox(visible=m == qkv.FROM_X)]

    def switch(d):  # carry the values over: tables -> text or text -> tables (unreadable ones stay as they were)
        to_text = d[edit_as] == QKV_TEXT
        read = qkv_form.readable(matrices(d, QKV_TABLES if to_text else QKV_TEXT))
        return {texts[n]: qkv_matrices.format_matrix(a) for n, a in read.items()} if to_text else \
            {tables[n]: _qkv_table(a) for n, a in read.items()}

    def load(name):
        f = qkv_form.preset_form(presets[name])
        out = {about: f["description"], **{c: f[k] for k, c in settings.items() if k in f}}
        for n, a in f["matrices"].items():
            out[tables[n]], out[texts[n]] = _qkv_table(a), qkv_matrices.format_matrix(a)
        return out

    gr.api(qkv_calculate, api_name="calculate")  # registered first: they keep their plain names
    gr.api(qkv_calculate_from_x, api_name="calculate_from_x")
    box_list = [boxes[g, h] for g in (QKV_DIRECT, QKV_X) for h in (QKV_TABLES, QKV_TEXT)] + [use_wo]
    outs = [checks, notes, report]
    quiet = dict(api_visibility="private")
    filled = [about, mode, heads, scale_mode, scale, mask_mode, mask, dropout, use_wo, *tables.values(), *texts.values()]
    preset.change(load, preset, filled, **quiet).then(layout, [mode, edit_as], box_list, **quiet) \
        .then(qkv_ui_calculate, calc_inputs, outs, **quiet)
    mode.change(layout, [mode, edit_as], box_list, **quiet)
    edit_as.change(switch, {edit_as, *tables.values(), *texts.values()}, [*tables.values(), *texts.values()], **quiet) \
        .then(layout, [mode, edit_as], box_list, **quiet)
    go.click(qkv_ui_calculate, calc_inputs, outs, **quiet)
    for t in tables.values():
        t.input(qkv_ui_calculate, calc_inputs, outs, trigger_mode="always_last", **quiet)
    mask_mode.input(fill_mask, {mask_mode, mask, mode, edit_as, *tables.values(), *texts.values()}, mask, **quiet) \
        .then(qkv_ui_calculate, calc_inputs, outs, **quiet)
    for c in (heads, scale_mode, dropout, use_wo):
        c.input(qkv_ui_calculate, calc_inputs, outs, trigger_mode="always_last", **quiet)

    p_start = qkv_patches.patch_view(QKV_IMAGE, 16, 4, 0)
    gr.Markdown("### From an image to Q, K and V\nThe image is cut into patches, each flattened to a vector, a "
                "sinusoidal position added, then multiplied by random (seeded) W_q, W_k, W_v: untrained, so the "
                "maps show the mechanism, not learned meaning: nearby positions and similar colours attend to each other.")
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=320):
            p_img = VitImagePath(QKV_IMAGE, type="filepath", image_mode=None, label="Image",
                                 sources=["upload", "clipboard"], height=260, elem_id="qkv-image")
            if QKV_PHOTOS:
                gr.Examples(QKV_PHOTOS, [p_img], label="Example photos", examples_per_page=12)
            with gr.Row():
                p_size = gr.Dropdown(list(qkv_patches.PATCH_SIZES), value=16, label="Patch size (px)", min_width=90,
                                     elem_id="qkv-patch-size")
                p_heads = Slider(1, qkv_patches.MAX_HEADS, value=4, step=1, label="Heads", elem_id="qkv-patch-heads")
                p_seed = Number(0, label="Weights seed", precision=0, min_width=90, elem_id="qkv-patch-seed")
            p_index = Slider(0, p_start.count - 1, value=p_start.index, step=1, label="Chosen patch (raster index)", elem_id="qkv-patch-index")
            p_go = gr.Button("Cut into patches and attend", variant="primary", elem_id="qkv-patch-go")
        with gr.Column(scale=3, min_width=480):
            p_info = gr.Markdown(p_start.info, elem_id="qkv-patch-info")
            with gr.Row():
                p_grid = gr.Image(p_start.grid, label="Patch grid (click a patch)", format="png", interactive=False, height=300,
                                  elem_id="qkv-patch-grid")
                p_maps = gr.Image(p_start.maps, label="Attention of the chosen patch, per head", format="png", interactive=False,
                                  height=300, elem_id="qkv-patch-maps")
            p_mats = gr.Image(p_start.matrices, label="N x N attention weights per head (row = query patch, column = key patch)",
                              format="png", interactive=False, elem_id="qkv-patch-matrices")
    p_in = [p_img, p_size, p_heads, p_seed, p_index]
    p_out = [p_grid, p_maps, p_mats, p_info, p_index]
    p_go.click(qkv_patch_attention, p_in, p_out, api_name="patch_attention")
    @user_errors
    def regrid(image, patch, h, s):  # a new image or patch size: a new grid, so the centre patch
        return _qkv_patches(image, patch, h, s)

    for c in (p_img, p_size):
        c.change(regrid, p_in[:4], p_out, **quiet)
    p_heads.change(qkv_patch_attention, p_in, p_out, **quiet)
    p_seed.submit(qkv_patch_attention, p_in, p_out, **quiet)
    p_index.release(qkv_patch_attention, p_in, p_out, **quiet)

    @user_errors
    def pick(image, patch, h, s, evt: gr.SelectData):
        return _qkv_patches(image, patch, h, s, click=evt.index)

    p_grid.select(pick, p_in[:4], p_out, **quiet)


# ----- end Q/K/V calculator tab ----------------------------------------------------------


# Temporary files Gradio serves (sheets, .npz, plots) are deleted every 5 minutes once older
# than ATTENTION_FILE_TTL seconds (default 15 minutes), so the temp dir is bounded by traffic x age.
with gr.Blocks(title="Attention Explorer", delete_cache=(300, int(SETTINGS.cache_age))) as demo:
    gr.Markdown("# Attention Explorer\nSee what attention looks at: in vision transformers, in a digit database, and step by step.")
    with gr.Tab("ViT attention maps", id="vit"):
        vit_tab()
    with gr.Tab("MNIST retrieval", id="retrieval"):
        retrieval_tab()
    with gr.Tab("Q/K/V calculator", id="calculator"):
        calculator_tab()

demo.queue(default_concurrency_limit=SETTINGS.concurrency)  # 2 cores: two requests compute at once, the rest wait
# Gradio's queue looks for new jobs every 1 ms, which keeps an idle server busy on a small CPU
# (bench/bench_app_roundtrip.py --idle-cpu). Every 10 ms costs a job at most 10 ms of waiting.
# ATTENTION_QUEUE_POLL sets the seconds (Gradio's own value: 0.001).
QUEUE_POLL = SETTINGS.queue_poll
if hasattr(demo._queue, "sleep_when_free"):  # a private attribute of Gradio 6's Queue: set only if there
    demo._queue.sleep_when_free = QUEUE_POLL

# What launch() must be given wherever the app is served (here, tests, benches): the upload cap and
# how many sessions' state Gradio keeps (the oldest forgotten first).
LAUNCH = dict(max_file_size=int(SETTINGS.max_upload_mb * 2**20), state_session_capacity=SETTINGS.max_sessions)


if __name__ == "__main__":
    demo.launch(server_name=SETTINGS.server_name, **LAUNCH)
