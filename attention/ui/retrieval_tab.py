"""The MNIST retrieval tab: a database of digits looked up by hard, soft, many-query and trained attention."""

from __future__ import annotations

import gradio as gr

from attention import retrieval as mnist_retrieval
from attention.retrieval import panels as mnist_views
from attention.ui.components import number, sketchpad, slider, user_errors


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
def retrieval_retrain(model_name, epochs, seed, state, progress=gr.Progress()):
    """Streams (status, loss plot, state); None from the package = leave that output as it is."""
    steps = mnist_views.retrain(
        model_name,
        epochs,
        seed,
        state,
        on_step=lambda step, total: progress((step, total), desc=f"training {model_name}"),
    )
    for msg, fig, new_state in steps:
        yield msg, gr.skip() if fig is None else fig, gr.skip() if new_state is None else new_state


def build() -> None:
    """The MNIST retrieval tab, inside the caller's `gr.Tab`; registers the /retrieval_* endpoints."""
    db0 = (mnist_retrieval.DEFAULT_N, mnist_retrieval.DEFAULT_SEED)
    grid0, note0 = retrieval_database(*db0)  # the page opens with every section filled in
    hard0 = retrieval_hard(*db0, 7, 0)
    soft0 = retrieval_soft(*db0, 16, 0, 1.0)
    many0 = retrieval_many(*db0, 16, 0, 1.0, 16)
    trained0 = mnist_views.trained_view(*db0, 0)
    gr.Markdown(
        "Attention is a soft database lookup: a query is scored against keys, the scores become "
        "weights, and the answer is the weighted sum of the values. Here the values are MNIST digits."
    )
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=220):
            n = number(mnist_retrieval.DEFAULT_N, precision=0, label="database size N")
            seed = number(mnist_retrieval.DEFAULT_SEED, precision=0, label="database seed")
            draw = gr.Button("Draw database", variant="secondary")
            source = gr.Markdown(note0)
        db_img = gr.Image(
            grid0,
            label="database (values V)",
            format="png",
            elem_id="retrieval-db",
            scale=3,
            show_label=True,
            buttons=["download"],
            height=320,
        )
    db_inputs = [n, seed]
    with gr.Tabs():
        with gr.Tab("1 · Hard attention", id="retrieval-hard"):
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
                keys_img = gr.Image(hard0[0], label="keys K (shuffled one-hot rows)", format="png", height=260)
                hard_plot = gr.Plot(hard0[1], show_label=False, format="png")
                hard_img = gr.Image(
                    hard0[2], label="retrieved = QK^T V", format="png", height=260, elem_id="retrieval-hard-out"
                )
            with gr.Accordion("details (scores, shuffle order, exactness check, as JSON)", open=False):
                hard_json = gr.JSON(hard0[3], show_label=False)
        with gr.Tab("2 · Soft attention", id="retrieval-soft"):
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
                soft_plot = gr.Plot(soft0[0], show_label=False, format="png", scale=3)
                soft_img = gr.Image(
                    soft0[1], label="retrieved = softmax(scale·QK^T) V", format="png", height=260, scale=1
                )
            with gr.Accordion("details (all weights, as JSON)", open=False):
                soft_json = gr.JSON(soft0[2], show_label=False)
        with gr.Tab("3 · Many queries", id="retrieval-many"):
            gr.Markdown(
                "num_q random queries at once (Q is num_q × d, same keys, d, seed and scale as in the soft "
                "tab): one softmax per row of QK^T, one retrieval per query."
            )
            with gr.Row():
                num_q = number(16, precision=0, label=f"number of queries num_q (1 to {mnist_retrieval.MAX_QUERIES})")
                many_btn = gr.Button("Retrieve all", variant="primary")
            many_img = gr.Image(many0[0], label="retrievals, one per query", format="png", height=320)
            with gr.Accordion("details (largest weight of each query, as JSON)", open=False):
                many_json = gr.JSON(many0[1], show_label=False)
        with gr.Tab("4 · Trained retrieval", id="retrieval-trained"):
            gr.Markdown(
                "Two trained models look up the query digit in the database above, side by side. **lab**: the "
                "lab's Linear(784, 32) embedding with one attention head, trained to reproduce the query "
                "image (MSE). **cnn**: a small CNN embedding with 4 heads, also rewarded when the weights, "
                "summed per label, pick the query's class; trained on a fresh random database each step."
            )
            state = gr.State(None, time_to_live=1800)  # the visitor's retrained copies (about 0.5 MB)
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=240):
                    q_index = number(
                        0, precision=0, label=f"held-out query digit (0 to {mnist_views.heldout_count() - 1:,})"
                    )
                    pick_btn = gr.Button("Retrieve this digit", variant="primary", elem_id="retrieval-pick")
                    rand_btn = gr.Button("Random held-out digit")
                with gr.Column(scale=3, min_width=300):
                    sketch = sketchpad(
                        label="…or draw a digit (pick the brush, bottom left, first)",
                        canvas_size=(280, 280),
                        type="numpy",
                        brush=gr.Brush(default_size=18, colors=["#000000"], color_mode="fixed"),
                        elem_id="retrieval-sketch",
                        height=330,
                        layers=False,
                    )
                    sketch_btn = gr.Button("Retrieve my drawing", variant="primary", elem_id="retrieval-sketch-btn")
                q_img = gr.Image(
                    trained0.query,
                    label="query as the models see it (28 × 28)",
                    format="png",
                    height=240,
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
                    first = trained0.models[name]
                    with gr.Column(min_width=420):
                        gr.Markdown(f"### {title}")
                        with gr.Row(equal_height=True):
                            r_img = gr.Image(
                                first.retrieved,
                                label="retrieved = weights · V",
                                format="png",
                                height=220,
                                scale=1,
                                min_width=140,
                            )
                            r_plot = gr.Plot(first.weights, show_label=False, format="png", scale=3)
                        r_gal = gr.Gallery(
                            first.top10,
                            label="top-10 matches (#rank · label · weight)",
                            columns=5,
                            rows=2,
                            format="png",
                            height=290,
                            object_fit="contain",
                            elem_id=f"retrieval-top10-{name}",
                            allow_preview=False,
                        )
                        answers[name] = (r_img, r_plot, r_gal)
            with gr.Accordion("details (top-10 with labels and weights, as JSON)", open=False):
                trained_json = gr.JSON(trained0.info, show_label=False)
            with gr.Accordion("Retrain your own copy (a few epochs, from scratch)", open=False):
                with gr.Row():
                    rt_model = gr.Radio(["lab", "cnn"], value="lab", label="model")
                    rt_epochs = number(2, precision=0, label="epochs (1 to 5, ~3 s each for lab, ~6 s for cnn)")
                    rt_seed = number(1, precision=0, label="training seed")
                    rt_btn = gr.Button("Retrain my copy", variant="primary")
                    reset_btn = gr.Button("Back to the shipped models")
                rt_msg = gr.Markdown()
                rt_plot = gr.Plot(label="loss", format="png")

    hard_args = (retrieval_hard, db_inputs + [index, shuffle_seed], [keys_img, hard_plot, hard_img, hard_json])
    soft_args = (retrieval_soft, db_inputs + [d, key_seed, scale], [soft_plot, soft_img, soft_json])
    many_args = (retrieval_many, db_inputs + [d, key_seed, scale, num_q], [many_img, many_json])
    trained_outs = [q_img, *(c for boxes in answers.values() for c in boxes), trained_json]

    def show(v: mnist_views.TrainedView) -> dict:
        out = {q_img: v.query, trained_json: v.info}
        for name, (img, plot, gallery) in answers.items():
            out.update({img: v.models[name].retrieved, plot: v.models[name].weights, gallery: v.models[name].top10})
        return out

    @user_errors
    def retrieval_trained(n, seed, query_index, state=None):
        """Both trained models look up held-out digit `query_index` in the database of n digits drawn with
        `seed`: the query, then per model (lab, cnn) the retrieved image, the weights plot and the top 10."""
        return show(mnist_views.trained_view(n, seed, query_index, state))

    @user_errors
    def retrieval_sketch(n, seed, sketch, state=None):
        """As /retrieval_trained, for a drawing (an ImageEditor value; dark ink on white or the reverse)."""
        return show(mnist_views.sketch_view(n, seed, sketch, state))

    trained_args = (retrieval_trained, db_inputs + [q_index, state], trained_outs)
    # errors and progress show on one image per section, not as "Error" over every output
    quiet = dict(api_visibility="private", show_progress="minimal")
    hard_btn.click(*hard_args, api_name="retrieval_hard", show_progress_on=hard_img)
    soft_btn.click(*soft_args, api_name="retrieval_soft", show_progress_on=soft_img)
    scale.release(*soft_args, show_progress_on=soft_img, **quiet)
    many_btn.click(*many_args, api_name="retrieval_many", show_progress_on=many_img)
    pick_btn.click(*trained_args, api_name="retrieval_trained", show_progress_on=q_img)
    rand_btn.click(mnist_views.random_heldout_index, None, q_index, api_visibility="private").then(
        *trained_args, show_progress_on=q_img, **quiet
    )
    sketch_btn.click(
        retrieval_sketch, db_inputs + [sketch, state], trained_outs, api_name="retrieval_sketch", show_progress_on=q_img
    )
    (
        rt_btn.click(
            retrieval_retrain,
            [rt_model, rt_epochs, rt_seed, state],
            [rt_msg, rt_plot, state],
            api_name="retrieval_retrain",
            concurrency_limit=1,
            concurrency_id="retrieval_retrain",
            show_progress_on=rt_plot,
        ).success(*trained_args, show_progress_on=q_img, **quiet)
    )
    (
        reset_btn.click(
            lambda: (None, "Back to the shipped models."), None, [state, rt_msg], api_visibility="private"
        ).then(*trained_args, show_progress_on=q_img, **quiet)
    )
    (
        draw.click(
            retrieval_database, db_inputs, [db_img, source], api_name="retrieval_database", show_progress_on=db_img
        )  # refresh every section
        # (registered last: the public endpoints above keep their plain api_names)
        .success(*hard_args, show_progress_on=hard_img, **quiet)
        .success(*soft_args, show_progress_on=soft_img, **quiet)
        .success(*many_args, show_progress_on=many_img, **quiet)
        .success(*trained_args, show_progress_on=q_img, **quiet)
    )
