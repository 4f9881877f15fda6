"""The MNIST retrieval tab: a database of digits looked up by hard, soft, many-query and trained attention.

The tab opens empty and is filled the first time a visitor selects it, from `panels.first_screen`
(computed once per process), so the app's start-up pays nothing for it. Its events are the UI's
own (private); API clients use the /retrieval_* endpoints of `retrieval_api`, which answer with
one picture and one JSON each.
"""

from __future__ import annotations

import gradio as gr

from attention.retrieval import lookup as mnist_lookup
from attention.retrieval import panels as mnist_views
from attention.ui import retrieval_api
from attention.ui.components import kept_state, number, sketchpad, slider, user_errors

# Gradio's sketchpad opens on its image tool: a drag then selects the "select the draw tool" text
# instead of drawing, and "Clear canvas" puts it back there. When the trained section first shows and
# after every clear, pick the brush for the visitor (no Gradio parameter sets the starting tool; "Brush"
# and "Clear canvas" are the tool buttons' labels) and keep text unselectable.
BRUSH_FIRST = """
let tries = 0;
const pick = () => {
  const brush = document.querySelector('#retrieval-sketch button[aria-label="Brush"]');
  if (brush) {
    brush.click();
    window.retrievalBrushPicks = (window.retrievalBrushPicks || 0) + 1;  // the brush is ready (tests wait on it)
  } else if (tries++ < 100) setTimeout(pick, 100);
};
pick();
if (!window.retrievalBrush) {  // once per page: the clear button is re-rendered, the document is not
  window.retrievalBrush = true;
  document.addEventListener("click", (e) => {
    if (e.target.closest?.('#retrieval-sketch button[aria-label="Clear canvas"]')) setTimeout(pick, 150);
  }, true);
}
"""
# The top-10 galleries: 5 a row where they fit, else 3 (Gradio's fixed 100 px columns would overflow a
# phone and hide #4 and #5), and on a phone as tall as their rows.
TRAINED_CSS = """<style>
#retrieval-sketch, #retrieval-sketch * { user-select: none; -webkit-user-select: none; }
#retrieval-top10-lab .grid-container, #retrieval-top10-cnn .grid-container {
  grid-template-columns: repeat(auto-fill, minmax(max(84px, 18%), 1fr)) !important;
}
@media (max-width: 640px) {
  #retrieval-top10-lab, #retrieval-top10-cnn, #retrieval-top10-lab .grid-wrap, #retrieval-top10-cnn .grid-wrap {
    height: auto !important;
  }
}
</style>"""
TRAINED_INTRO = (
    "Two trained models look up a query digit in the database above. <b>lab</b>: the lab's Linear(784, 32) "
    "embedding and one attention head, trained to reproduce the query (MSE). <b>cnn</b>: a small CNN and 4 heads, "
    "also rewarded when the weights, summed per label, pick the query's class, on a fresh database each step."
)
PICTURE = dict(format="png", buttons=["download", "fullscreen"])  # every picture: crisp pixels, no share button
PLOT = dict(format="png", buttons=[], show_label=False)  # a plot: its title is its label, no buttons over it


@user_errors
def show_database(n, seed):
    return mnist_views.database_view(n, seed)


@user_errors
def show_hard(n, seed, index, shuffle_seed):
    return mnist_views.hard_view(n, seed, index, shuffle_seed)


@user_errors
def show_soft(n, seed, d, key_seed, scale):
    return mnist_views.soft_view(n, seed, d, key_seed, scale)


@user_errors
def show_many(n, seed, d, key_seed, scale, num_q):
    return mnist_views.many_view(n, seed, d, key_seed, scale, num_q)


@user_errors
def show_retrain(model_name, epochs, seed, state, progress=gr.Progress()):
    """Streams (status, loss plot, state); the plot and state only when the package has them."""
    steps = mnist_views.retrain(
        model_name,
        epochs,
        seed,
        state,
        on_step=lambda step, total: progress((step, total), desc=f"training {model_name}"),
    )
    for msg, losses, new_state in steps:
        plot = gr.skip() if losses is None else mnist_views.loss_plot(losses)
        yield msg, plot, gr.skip() if new_state is None else new_state


def _picture(label: str, **kwargs) -> gr.Image:
    return gr.Image(None, label=label, **{**PICTURE, **kwargs})


def _plot(label: str, **kwargs) -> gr.Image:
    """A rendered plot (uint8 pixels from `plots`), scaled to fit its box: its text stays legible."""
    return gr.Image(None, label=label, **{**PLOT, **kwargs})


def build(tab: gr.Tab | None = None, demo: gr.Blocks | None = None) -> None:
    """The MNIST retrieval tab, inside the caller's `gr.Tab`; registers the /retrieval_* API endpoints
    (`retrieval_api`). Its content is computed when `tab` is first selected (else on `demo`'s page load),
    so start-up imports neither matplotlib nor torchvision."""
    gr.Markdown(
        "Attention is a soft database lookup: a query is scored against keys, the scores become "
        "weights, and the answer is the weighted sum of the values. Here the values are MNIST digits."
    )
    with gr.Row(equal_height=False):  # low: each section's results stay in view below it
        with gr.Column(scale=1, min_width=220):
            with gr.Row():
                n = number(mnist_lookup.DEFAULT_N, precision=0, label="database size N", min_width=100)
                seed = number(mnist_lookup.DEFAULT_SEED, precision=0, label="database seed", min_width=100)
            draw = gr.Button("Draw database", variant="secondary")
        db_img = _picture("database (values V)", elem_id="retrieval-db", scale=3, height=170)
    source = gr.Markdown()
    db_inputs = [n, seed]
    with gr.Tabs():
        with gr.Tab("1 · Hard", id="retrieval-hard"):
            gr.Markdown(
                "Every item *i* gets the one-hot key e_i; keys and values are shuffled together. The query "
                "is e_index, so QK^T is 1 at the one row holding item *index* and 0 elsewhere. That vector is "
                "already a valid weighting (non-negative, sums to 1), so **no softmax is needed**: softmax "
                "would give that row only e/(e+N-1) of the weight and blur the answer. The retrieved image "
                "equals the database image exactly."
            )
            with gr.Row():
                index = number(7, precision=0, label="query index (database item)")
                shuffle_seed = number(0, precision=0, label="shuffle seed")
                hard_btn = gr.Button("Retrieve", variant="primary")
            with gr.Row(equal_height=False):
                keys_img = _picture("keys K (shuffled one-hot rows)", height=240, min_width=200)
                hard_plot = _plot("scores QK^T", height=260, scale=2, min_width=300)
                hard_img = _picture("retrieved = QK^T V", height=240, elem_id="retrieval-hard-out", min_width=200)
            with gr.Accordion("details (scores, shuffle order, exactness check, as JSON)", open=False):
                hard_json = gr.JSON(show_label=False)
        with gr.Tab("2 · Soft", id="retrieval-soft"):
            gr.Markdown(
                "A random query (1 × d) and random keys (N × d): weights = softmax(scale · QK^T), retrieved = "
                "weights · V, a blurry average of many digits. Raise the scale: the softmax sharpens toward "
                "hard attention (one digit); scale 0 averages all of them equally."
            )
            with gr.Row():
                d = number(16, precision=0, label="key dimension d")
                key_seed = number(0, precision=0, label="query/key seed")
                scale = slider(0, 20, value=1, step=0.1, label="scale (inverse temperature)")
                soft_btn = gr.Button("Retrieve", variant="primary")
            with gr.Row(equal_height=False):
                soft_plot = _plot("weights", height=260, scale=3, min_width=300)
                soft_img = _picture("retrieved = softmax(scale·QK^T) V", height=240, scale=1, min_width=200)
            with gr.Accordion("details (all weights, as JSON)", open=False):
                soft_json = gr.JSON(show_label=False)
        with gr.Tab("3 · Many", id="retrieval-many"):
            gr.Markdown(
                "num_q random queries at once (Q is num_q × d; the keys, d and seed of the soft tab): one "
                "softmax per row of scale · QK^T, one retrieval per query. At scale 0 every query gets the same "
                "uniform weights, so every retrieval is the same blur."
            )
            with gr.Row():
                num_q = number(16, precision=0, label=f"number of queries num_q (1 to {mnist_lookup.MAX_QUERIES})")
                many_scale = slider(
                    0, 20, value=1, step=0.1, label="scale (inverse temperature)", elem_id="retrieval-many-scale"
                )
                many_btn = gr.Button("Retrieve all", variant="primary")
            many_img = _picture("retrievals, one per query", height=300)
            with gr.Accordion("details (largest weight of each query, as JSON)", open=False):
                many_json = gr.JSON(show_label=False)
        with gr.Tab("4 · Trained", id="retrieval-trained"):
            gr.HTML(
                f"<p>{TRAINED_INTRO}</p>", js_on_load=BRUSH_FIRST, head=TRAINED_CSS, elem_id="retrieval-trained-intro"
            )
            state = kept_state()  # the visitor's retrained copies (about 0.5 MB)
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=240):
                    q_index = number(0, precision=0, label="held-out query digit")  # its range: on first_screen
                    pick_btn = gr.Button("Retrieve this digit", variant="primary", elem_id="retrieval-pick")
                    rand_btn = gr.Button("Random held-out digit")
                with gr.Column(scale=3, min_width=300):
                    sketch = sketchpad(
                        label="…or draw a digit",
                        canvas_size=(280, 280),
                        type="numpy",
                        brush=gr.Brush(default_size=18, colors=["#000000"], color_mode="fixed"),
                        elem_id="retrieval-sketch",
                        height=290,
                        layers=False,
                    )
                    sketch_btn = gr.Button("Retrieve my drawing", variant="primary", elem_id="retrieval-sketch-btn")
                q_img = _picture(
                    "query as the models see it (28 × 28)",
                    height=220,
                    scale=2,
                    min_width=200,
                    elem_id="retrieval-query",
                )
            answers = {}  # model name -> its (retrieved, weights plot, top-10 gallery) components
            with gr.Row(equal_height=False):
                for name, title in (
                    ("lab", "lab model (Linear + 1 head, MSE)"),
                    ("cnn", "cnn model (CNN + 4 heads, class-aware)"),
                ):
                    with gr.Column(min_width=320):
                        gr.Markdown(f"### {title}")
                        with gr.Row(equal_height=True):
                            r_img = _picture("retrieved", height=200, scale=1, min_width=140)
                            r_plot = _plot("weights", height=200, scale=3, min_width=260)
                        r_gal = gr.Gallery(
                            label="top-10 matches (#rank · label · weight)",
                            columns=5,
                            rows=2,
                            format="png",
                            height=280,
                            object_fit="contain",
                            elem_id=f"retrieval-top10-{name}",
                            allow_preview=False,
                        )
                        answers[name] = (r_img, r_plot, r_gal)
            with gr.Accordion("details (top-10 with labels and weights, as JSON)", open=False):
                trained_json = gr.JSON(show_label=False)
            with gr.Accordion("Retrain your own copy (a few epochs, from scratch)", open=False):
                with gr.Row():
                    rt_model = gr.Radio(["lab", "cnn"], value="lab", label="model")
                    rt_epochs = number(2, precision=0, label="epochs (1 to 5, ~3 s each for lab, ~6 s for cnn)")
                    rt_seed = number(1, precision=0, label="training seed")
                    rt_btn = gr.Button("Retrain my copy", variant="primary")
                    reset_btn = gr.Button("Back to the shipped models")
                rt_msg = gr.Markdown()
                # the run's progress bar here, above the live loss curve, not over it
                rt_progress = gr.Markdown("", elem_id="retrieval-rt-progress", min_height=48)
                rt_plot = _plot("loss", height=260, elem_id="retrieval-rt-plot")

    hard_outs, soft_outs, many_outs = (
        [keys_img, hard_plot, hard_img, hard_json],
        [soft_plot, soft_img, soft_json],
        [
            many_img,
            many_json,
        ],
    )
    trained_outs = [q_img, *(c for boxes in answers.values() for c in boxes), trained_json]

    def show(v: mnist_views.TrainedView) -> dict:
        out = {q_img: v.query, trained_json: v.info}
        for name, (img, plot, gallery) in answers.items():
            out.update({img: v.models[name].retrieved, plot: v.models[name].plot, gallery: v.models[name].top10})
        return out

    @user_errors
    def show_trained(n, seed, query_index, state=None):
        return show(mnist_views.trained_view(n, seed, query_index, state))

    @user_errors
    def show_sketch(n, seed, sketch, state=None):
        return show(mnist_views.sketch_view(n, seed, sketch, state))

    retrieval_api.build(state)  # registered first: the endpoints keep their plain names
    filled = gr.State(False)  # has this visitor's tab been filled with the first screen yet?

    def first_screen(done: bool) -> dict:
        if done:
            return {filled: True}
        f = mnist_views.first_screen()
        return {
            filled: True,
            q_index: gr.Number(label=f"held-out query digit (0 to {mnist_views.heldout_count() - 1:,})"),
            db_img: f.database.grid,
            source: f.database.note,
            **dict(zip(hard_outs, f.hard)),
            **dict(zip(soft_outs, f.soft)),
            **dict(zip(many_outs, f.many)),
            **show(f.trained),
        }

    first_outs = [filled, q_index, db_img, source, *hard_outs, *soft_outs, *many_outs, *trained_outs]
    first = dict(fn=first_screen, inputs=filled, outputs=first_outs, show_progress="minimal", api_visibility="private")
    if tab is not None:
        tab.select(**first)
    elif demo is not None:  # built outside a tab: fill on page load
        demo.load(**first)

    hard_args = (show_hard, db_inputs + [index, shuffle_seed], hard_outs)
    soft_args = (show_soft, db_inputs + [d, key_seed, scale], soft_outs)
    many_args = (show_many, db_inputs + [d, key_seed, many_scale, num_q], many_outs)
    trained_args = (show_trained, db_inputs + [q_index, state], trained_outs)
    # private: API clients use retrieval_api's endpoints. Errors and progress show on one picture per
    # section, not as "Error" over every output.
    quiet = dict(api_visibility="private", show_progress="minimal")
    hard_btn.click(*hard_args, show_progress_on=hard_img, **quiet)
    soft_btn.click(*soft_args, show_progress_on=soft_img, **quiet)
    scale.release(*soft_args, show_progress_on=soft_img, **quiet)
    many_btn.click(*many_args, show_progress_on=many_img, **quiet)
    many_scale.release(*many_args, show_progress_on=many_img, **quiet)
    pick_btn.click(*trained_args, show_progress_on=q_img, **quiet)
    rand_btn.click(mnist_views.random_heldout_index, None, q_index, api_visibility="private").then(
        *trained_args, show_progress_on=q_img, **quiet
    )
    sketch_btn.click(show_sketch, db_inputs + [sketch, state], trained_outs, show_progress_on=q_img, **quiet)
    rt_btn.click(
        show_retrain,
        [rt_model, rt_epochs, rt_seed, state],
        [rt_msg, rt_plot, state],
        concurrency_limit=1,
        concurrency_id="retrieval_retrain",
        show_progress_on=rt_progress,
        **(quiet | dict(show_progress="full")),
    ).success(*trained_args, show_progress_on=q_img, **quiet)
    reset_btn.click(
        lambda: (None, "Back to the shipped models."), None, [state, rt_msg], api_visibility="private"
    ).then(*trained_args, show_progress_on=q_img, **quiet)
    (
        draw.click(show_database, db_inputs, [db_img, source], show_progress_on=db_img, **quiet)
        .success(*hard_args, show_progress_on=hard_img, **quiet)  # refresh every section
        .success(*soft_args, show_progress_on=soft_img, **quiet)
        .success(*many_args, show_progress_on=many_img, **quiet)
        .success(*trained_args, show_progress_on=q_img, **quiet)
    )
