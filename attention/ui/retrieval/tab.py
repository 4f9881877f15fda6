"""The MNIST retrieval tab: a database of digits looked up by hard, soft, many-query and trained attention.

The tab opens empty and is filled the first time a visitor selects it, from `first_screen.first_screen`
(computed once per process), so the app's start-up pays nothing for it. Its events are the UI's
own (private); API clients use the /retrieval_* endpoints of `retrieval.api`, which answer with
one picture and one JSON each.
"""

from __future__ import annotations

import gradio as gr

from attention.retrieval import first_screen as screen
from attention.retrieval import lookup as mnist_lookup
from attention.retrieval import panels as mnist_views
from attention.retrieval import trained_panels
from attention.ui.common.components import number, slider, user_errors
from attention.ui.retrieval import api as retrieval_api
from attention.ui.retrieval.layout import (
    HARD_INTRO,
    MANY_INTRO,
    SOFT_INTRO,
    TrainedSection,
    details,
    picture,
    plot,
    section,
)


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
    steps = trained_panels.retrain(
        model_name,
        epochs,
        seed,
        state,
        on_step=lambda step, total: progress((step, total), desc=f"training {model_name}"),
    )
    for msg, losses, new_state in steps:
        plot = gr.skip() if losses is None else trained_panels.loss_plot(losses)
        yield msg, plot, gr.skip() if new_state is None else new_state


def build(tab: gr.Tab | None = None, demo: gr.Blocks | None = None) -> None:
    """The MNIST retrieval tab, inside the caller's `gr.Tab`; registers the /retrieval_* API endpoints
    (`retrieval.api`). Its content is computed when `tab` is first selected (else on `demo`'s page load),
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
        db_img = picture("database (values V)", elem_id="retrieval-db", scale=3, height=170)
    source = gr.Markdown()
    db_inputs = [n, seed]
    with gr.Tabs():
        with section("1 · Hard", "retrieval-hard", HARD_INTRO):
            with gr.Row():
                index = number(7, precision=0, label="query index (database item)")
                shuffle_seed = number(0, precision=0, label="shuffle seed")
                hard_btn = gr.Button("Retrieve", variant="primary")
            with gr.Row(equal_height=False):
                keys_img = picture("keys K (shuffled one-hot rows)", height=240, min_width=200)
                hard_plot = plot("scores QK^T", height=260, scale=2, min_width=300)
                hard_img = picture("retrieved = QK^T V", height=240, elem_id="retrieval-hard-out", min_width=200)
            hard_json = details("details (scores, shuffle order, exactness check, as JSON)")
        with section("2 · Soft", "retrieval-soft", SOFT_INTRO):
            with gr.Row():
                d = number(16, precision=0, label="key dimension d")
                key_seed = number(0, precision=0, label="query/key seed")
                scale = slider(0, 20, value=1, step=0.1, label="scale (inverse temperature)")
                soft_btn = gr.Button("Retrieve", variant="primary")
            with gr.Row(equal_height=False):
                soft_plot = plot("weights", height=260, scale=3, min_width=300)
                soft_img = picture("retrieved = softmax(scale·QK^T) V", height=240, scale=1, min_width=200)
            soft_json = details("details (all weights, as JSON)")
        with section("3 · Many", "retrieval-many", MANY_INTRO):
            with gr.Row():
                num_q = number(16, precision=0, label=f"number of queries num_q (1 to {mnist_lookup.MAX_QUERIES})")
                many_scale = slider(
                    0, 20, value=1, step=0.1, label="scale (inverse temperature)", elem_id="retrieval-many-scale"
                )
                many_btn = gr.Button("Retrieve all", variant="primary")
            many_img = picture("retrievals, one per query", height=300)
            many_json = details("details (largest weight of each query, as JSON)")
        with gr.Tab("4 · Trained", id="retrieval-trained"):
            tr = TrainedSection()
    q_index, q_img, state, answers, trained_json = tr.q_index, tr.q_img, tr.state, tr.answers, tr.trained_json

    hard_outs, soft_outs, many_outs = (
        [keys_img, hard_plot, hard_img, hard_json],
        [soft_plot, soft_img, soft_json],
        [
            many_img,
            many_json,
        ],
    )
    trained_outs = [q_img, *(c for boxes in answers.values() for c in boxes), trained_json]

    def show(v: trained_panels.TrainedView) -> dict:
        out = {q_img: v.query, trained_json: v.info}
        for name, (img, chart, gallery) in answers.items():
            out.update({img: v.models[name].retrieved, chart: v.models[name].plot, gallery: v.models[name].top10})
        return out

    @user_errors
    def show_trained(n, seed, query_index, state=None):
        return show(trained_panels.trained_view(n, seed, query_index, state))

    @user_errors
    def show_sketch(n, seed, sketch, state=None):
        return show(trained_panels.sketch_view(n, seed, sketch, state))

    retrieval_api.build(state)  # registered first: the endpoints keep their plain names
    filled = gr.State(False)  # has this visitor's tab been filled with the first screen yet?

    def first_screen(done: bool) -> dict:
        if done:
            return {filled: True}
        f = screen.first_screen()
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
    # private: API clients use retrieval.api's endpoints. Errors and progress show on one picture per
    # section, not as "Error" over every output.
    quiet = dict(api_visibility="private", show_progress="minimal")
    hard_btn.click(*hard_args, show_progress_on=hard_img, **quiet)
    soft_btn.click(*soft_args, show_progress_on=soft_img, **quiet)
    scale.release(*soft_args, show_progress_on=soft_img, **quiet)
    many_btn.click(*many_args, show_progress_on=many_img, **quiet)
    many_scale.release(*many_args, show_progress_on=many_img, **quiet)
    tr.pick_btn.click(*trained_args, show_progress_on=q_img, **quiet)
    tr.rand_btn.click(mnist_views.random_heldout_index, None, q_index, api_visibility="private").then(
        *trained_args, show_progress_on=q_img, **quiet
    )
    tr.sketch_btn.click(show_sketch, db_inputs + [tr.sketch, state], trained_outs, show_progress_on=q_img, **quiet)
    tr.rt_btn.click(
        show_retrain,
        [tr.rt_model, tr.rt_epochs, tr.rt_seed, state],
        [tr.rt_msg, tr.rt_plot, state],
        concurrency_limit=1,
        concurrency_id="retrieval_retrain",
        show_progress_on=tr.rt_progress,
        **(quiet | dict(show_progress="full")),
    ).success(*trained_args, show_progress_on=q_img, **quiet)
    tr.reset_btn.click(
        lambda: (None, "Back to the shipped models."), None, [state, tr.rt_msg], api_visibility="private"
    ).then(*trained_args, show_progress_on=q_img, **quiet)
    (
        draw.click(show_database, db_inputs, [db_img, source], show_progress_on=db_img, **quiet)
        .success(*hard_args, show_progress_on=hard_img, **quiet)  # refresh every section
        .success(*soft_args, show_progress_on=soft_img, **quiet)
        .success(*many_args, show_progress_on=many_img, **quiet)
        .success(*trained_args, show_progress_on=q_img, **quiet)
    )
