"""Attention Explorer: a Gradio app that makes attention visible.

Thin by design: this file builds the UI, one tab per section, and wires it to the
`attention` package, which holds all the logic and knows nothing of Gradio.
`demo` is built at module level (tests import it); it is launched only under __main__.
"""

from __future__ import annotations

import functools
import os

import gradio as gr

import attention
from attention.errors import AttentionError


def user_errors(fn):
    """Show the package's typed errors as a `gr.Error` with their message (never a traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AttentionError as e:
            raise gr.Error(str(e), print_exception=False) from None

    return wrapper


# ----- ViT attention tab -----------------------------------------------------------------
def vit_tab() -> None:
    gr.Markdown("ViT attention maps: coming in the ViT tab issue.")


# ----- end ViT attention tab -------------------------------------------------------------


# ----- MNIST retrieval tab ---------------------------------------------------------------
def _retrieval_db(n, seed):
    from attention import retrieval

    return retrieval.draw_database(n, seed)


def _retrieval_image(image, k: int = 8):
    from attention.retrieval_plots import upscale

    return upscale(image, k)


@user_errors
def retrieval_database(n, seed):
    from attention import retrieval
    from attention.retrieval_plots import grid

    db = _retrieval_db(n, seed)
    pool = retrieval.pools()
    k = 3 if len(db) <= 400 else 1
    note = (f"**Data:** {db.source}. The database: **{len(db)}** digits drawn with seed {db.seed} from the "
            f"train part ({len(pool.train):,} digits); trained-retrieval queries come from the held-out part "
            f"({len(pool.heldout):,} digits), never in any database. Item *i* is row *i* // 10, column *i* % 10.")
    return grid(db.images, nrow=10 if len(db) <= 400 else 40, k=k), note


@user_errors
def retrieval_hard(n, seed, index, shuffle_seed):
    import numpy as np

    from attention import retrieval
    from attention.retrieval_plots import upscale, weights_figure

    db = _retrieval_db(n, seed)
    lk = retrieval.hard_lookup(db, index, shuffle_seed)
    row = int(np.argmax(lk.scores[0]))
    index = int(lk.order[row])
    retrieved = lk.retrieved_images()[0]
    exact = bool(np.array_equal(retrieved, db.images[index]))
    fig = weights_figure(lk.scores[0], title=f"scores QK^T over the shuffled store: 1 at row {row}",
                         xlabel="row of the shuffled store", highlight=row)
    keys = upscale((lk.keys * 255).astype(np.uint8), max(1, 300 // len(db)))
    info = {"index": index, "row_in_shuffled_store": row, "label": int(db.labels[index]),
            "retrieved_equals_database_image": exact, "scores": lk.scores[0].tolist(), "order": lk.order.tolist()}
    return keys, fig, _retrieval_image(retrieved), info


@user_errors
def retrieval_soft(n, seed, d, key_seed, scale):
    import numpy as np

    from attention import retrieval
    from attention.retrieval_plots import weights_figure

    db = _retrieval_db(n, seed)
    lk = retrieval.soft_lookup(db, d, key_seed, scale)
    w = lk.weights[0]
    fig = weights_figure(w, db.labels, title=f"softmax({scale:g} · QK^T): largest weight {w.max():.2f}, "
                                              f"effective items {1 / np.sum(w ** 2):.1f}", highlight=int(np.argmax(w)))
    info = {"weights": w.tolist(), "sum": float(w.sum()), "max_weight": float(w.max()),
            "argmax": int(np.argmax(w)), "effective_items": float(1 / np.sum(w ** 2))}
    return fig, _retrieval_image(lk.retrieved_images()[0]), info


@user_errors
def retrieval_many(n, seed, d, key_seed, scale, num_q):
    from attention import retrieval
    from attention.retrieval_plots import grid

    db = _retrieval_db(n, seed)
    lk = retrieval.multi_lookup(db, num_q, d, key_seed, scale)
    info = {"num_q": len(lk.weights), "max_weights": lk.weights.max(1).tolist(), "sums": lk.weights.sum(1).tolist()}
    return grid(lk.retrieved_images(), nrow=8, k=3), info


def _retrieval_models(state):
    """The shipped models, or this visitor's retrained copies (state: {name: (config, state_dict)})."""
    from attention import retrieval_models

    out = {}
    for name in retrieval_models.MODEL_NAMES:
        if state and name in state:
            config, weights = state[name]
            model = retrieval_models.build(config)
            model.load_state_dict(weights)
            out[name] = (model.eval(), "your retrained copy")
        else:
            out[name] = (retrieval_models.load(name)[0], "shipped")
    return out


def _retrieval_trained(db, query, label, state):
    from attention import retrieval
    from attention.retrieval_plots import upscale, weights_figure

    outs, info = [], {"query_label": label}
    for name, (model, origin) in _retrieval_models(state).items():
        lk, top = retrieval.trained_lookup(model, query, db)
        w = lk.weights[0]
        fig = weights_figure(w, db.labels, title=f"{name} ({origin}): top match label {top[0].label}",
                             highlight=top[0].position)
        gallery = [(upscale(db.images[m.position], 4), f"#{r + 1} · {m.label} · {m.weight:.2f}")
                   for r, m in enumerate(top)]
        outs += [_retrieval_image(lk.retrieved_images()[0]), fig, gallery]
        info[name] = {"origin": origin, "top10": [m.__dict__ for m in top], "top1_label": top[0].label}
    return [_retrieval_image(query)] + outs + [info]


@user_errors
def retrieval_trained(n, seed, query_index, state=None):
    from attention import retrieval

    query, label = retrieval.heldout_query(query_index)
    return _retrieval_trained(_retrieval_db(n, seed), query, label, state)


@user_errors
def retrieval_sketch(n, seed, sketch, state=None):
    from attention import mnist
    from attention.errors import ImageError

    image = sketch.get("composite") if isinstance(sketch, dict) else sketch
    if image is None:
        raise ImageError("the sketch is empty: draw one digit on the sketchpad, then press the button")
    return _retrieval_trained(_retrieval_db(n, seed), mnist.normalise_sketch(image), None, state)


def retrieval_retrain(model_name, epochs, seed, state, progress=gr.Progress()):
    """A generator (live loss curve), so it reports typed errors itself: `user_errors` wraps calls only."""
    import copy

    from attention import retrieval, retrieval_models, retrieval_train
    from attention.retrieval_plots import loss_figure

    try:
        config = retrieval_models.load(model_name)[1]
        epochs = retrieval.check_int(epochs, "the number of epochs", 1, 5)
        seed = retrieval.check_int(seed, "the training seed", 0, 2**31 - 1)
        config = {**config, "seed": seed, "epochs": epochs}
        model = retrieval_train.fresh_model(config, seed)  # from scratch: the shipped model is untouched
        losses = []
        for step, total, loss in retrieval_train.train_steps(model, config["kind"], epochs, seed, config["lr"],
                                                             config.get("class_loss_weight", 1.0)):
            losses.append(loss)
            progress((step, total), desc=f"training {model_name}")
            if step % 10 == 0 or step == total:
                msg = f"Training your copy of **{model_name}**: step {step}/{total}, loss {loss:.4f}"
                yield msg, loss_figure(losses, f"{model_name}: training loss", total // epochs), gr.skip()
    except AttentionError as e:
        raise gr.Error(str(e), print_exception=False) from None
    state = dict(state or {})
    state[model_name] = (config, copy.deepcopy(model.state_dict()))
    yield (f"Done: your copy of **{model_name}** ({epochs} epochs, seed {seed}) now answers your queries "
           "above; the shipped model and other visitors are unaffected."), gr.skip(), state


def retrieval_tab() -> None:
    from attention import retrieval

    db0 = (retrieval.DEFAULT_N, retrieval.DEFAULT_SEED)
    grid0, note0 = retrieval_database(*db0)  # the page opens with every section filled in
    hard0 = retrieval_hard(*db0, 7, 0)
    soft0 = retrieval_soft(*db0, 16, 0, 1.0)
    many0 = retrieval_many(*db0, 16, 0, 1.0, 16)
    trained0 = retrieval_trained(*db0, 0)
    gr.Markdown("Attention is a soft database lookup: a query is scored against keys, the scores become "
                "weights, and the answer is the weighted sum of the values. Here the values are MNIST digits.")
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=220):
            n = gr.Number(retrieval.DEFAULT_N, precision=0, label="database size N")
            seed = gr.Number(retrieval.DEFAULT_SEED, precision=0, label="database seed")
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
                index = gr.Number(7, precision=0, label="query index (database item)")
                shuffle_seed = gr.Number(0, precision=0, label="shuffle seed")
                hard_btn = gr.Button("Retrieve", variant="primary")
            with gr.Row(equal_height=False):
                keys_img = gr.Image(hard0[0], label="keys K (shuffled one-hot rows)", format="png", height=260)
                hard_plot = gr.Plot(hard0[1], label="alignment scores QK^T", format="png")
                hard_img = gr.Image(hard0[2], label="retrieved = QK^T V", format="png", height=260, elem_id="retrieval-hard-out")
            hard_json = gr.JSON(hard0[3], label="details", open=False)
        with gr.Tab("2 · Soft attention", id="retrieval-soft"):
            gr.Markdown("A random query (1 × d) and random keys (N × d): weights = softmax(scale · QK^T), retrieved = "
                        "weights · V, a blurry average of many digits. Raise the scale: the softmax sharpens toward "
                        "hard attention (one digit); scale 0 averages all of them equally.")
            with gr.Row():
                d = gr.Number(16, precision=0, label="key dimension d")
                key_seed = gr.Number(0, precision=0, label="query/key seed")
                scale = gr.Slider(0, 20, value=1, step=0.1, label="scale (inverse temperature)")
                soft_btn = gr.Button("Retrieve", variant="primary")
            with gr.Row(equal_height=False):
                soft_plot = gr.Plot(soft0[0], label="weights over the database", format="png", scale=3)
                soft_img = gr.Image(soft0[1], label="retrieved = softmax(scale·QK^T) V", format="png", height=260, scale=1)
            soft_json = gr.JSON(soft0[2], label="details", open=False)
        with gr.Tab("3 · Many queries", id="retrieval-many"):
            gr.Markdown("num_q random queries at once (Q is num_q × d, same keys, d, seed and scale as in the soft "
                        "tab): one softmax per row of QK^T, one retrieval per query.")
            with gr.Row():
                num_q = gr.Number(16, precision=0, label=f"number of queries num_q (1 to {retrieval.MAX_QUERIES})")
                many_btn = gr.Button("Retrieve all", variant="primary")
            many_img = gr.Image(many0[0], label="retrievals, one per query", format="png", height=320)
            many_json = gr.JSON(many0[1], label="details", open=False)
        with gr.Tab("4 · Trained retrieval", id="retrieval-trained"):
            gr.Markdown("Two trained models look up the query digit in the database above, side by side. **lab**: the "
                        "lab's Linear(784, 32) embedding with one attention head, trained to reproduce the query "
                        "image (MSE). **cnn**: a small CNN embedding with 4 heads, also rewarded when the weights, "
                        "summed per label, pick the query's class; trained on a fresh random database each step.")
            state = gr.State(None)
            with gr.Row(equal_height=False):
                with gr.Column(scale=1, min_width=240):
                    q_index = gr.Number(0, precision=0, label="held-out query digit (0 to 999)")
                    with gr.Row():
                        pick_btn = gr.Button("Retrieve", variant="primary", elem_id="retrieval-pick")
                        rand_btn = gr.Button("Random digit")
                    sketch = gr.Sketchpad(label="…or draw a digit", canvas_size=(280, 280), type="numpy",
                                          brush=gr.Brush(default_size=18, colors=["#000000"], color_mode="fixed"),
                                          elem_id="retrieval-sketch", height=320)
                    sketch_btn = gr.Button("Retrieve my drawing", variant="primary", elem_id="retrieval-sketch-btn")
                    q_img = gr.Image(trained0[0], label="query as the models see it (28 × 28)", format="png", height=160)
                outs = []
                for i, (name, title) in enumerate((("lab", "lab model (Linear + 1 head, MSE)"),
                                    ("cnn", "cnn model (CNN + 4 heads, class-aware)"))):
                    with gr.Column(scale=2, min_width=320):
                        gr.Markdown(f"### {title}")
                        r_img = gr.Image(trained0[1 + 3 * i], label="retrieved = weights · V", format="png", height=160)
                        r_plot = gr.Plot(trained0[2 + 3 * i], label="weights over the database (colour = label)", format="png")
                        r_gal = gr.Gallery(trained0[3 + 3 * i], label="top-10 matches (#rank · label · weight)", columns=5, rows=2,
                                           format="png", height="auto", elem_id=f"retrieval-top10-{name}",
                                           allow_preview=False)
                        outs += [r_img, r_plot, r_gal]
            trained_json = gr.JSON(trained0[7], label="details (top-10 with labels and weights)", open=False)
            with gr.Accordion("Retrain your own copy (a few epochs, from scratch)", open=False):
                with gr.Row():
                    rt_model = gr.Radio(["lab", "cnn"], value="lab", label="model")
                    rt_epochs = gr.Slider(1, 5, value=2, step=1, label="epochs")
                    rt_seed = gr.Number(1, precision=0, label="training seed")
                    rt_btn = gr.Button("Retrain my copy", variant="primary")
                    reset_btn = gr.Button("Back to the shipped models")
                rt_msg = gr.Markdown()
                rt_plot = gr.Plot(label="loss", format="png")

    draw.click(retrieval_database, db_inputs, [db_img, source], api_name="retrieval_database")
    hard_btn.click(retrieval_hard, db_inputs + [index, shuffle_seed], [keys_img, hard_plot, hard_img, hard_json],
                   api_name="retrieval_hard")
    soft_btn.click(retrieval_soft, db_inputs + [d, key_seed, scale], [soft_plot, soft_img, soft_json],
                   api_name="retrieval_soft")
    many_btn.click(retrieval_many, db_inputs + [d, key_seed, scale, num_q], [many_img, many_json],
                   api_name="retrieval_many")
    trained_outs = [q_img] + outs + [trained_json]
    pick_btn.click(retrieval_trained, db_inputs + [q_index, state], trained_outs, api_name="retrieval_trained")
    rand_btn.click(lambda: int(__import__("random").randrange(1000)), None, q_index,
                   api_visibility="private").then(retrieval_trained, db_inputs + [q_index, state], trained_outs,
                                                  api_visibility="private")
    sketch_btn.click(retrieval_sketch, db_inputs + [sketch, state], trained_outs, api_name="retrieval_sketch")
    rt_btn.click(retrieval_retrain, [rt_model, rt_epochs, rt_seed, state], [rt_msg, rt_plot, state],
                 api_name="retrieval_retrain", concurrency_limit=1, concurrency_id="retrieval_retrain")
    reset_btn.click(lambda: (None, "Back to the shipped models."), None, [state, rt_msg], api_visibility="private")


# ----- end MNIST retrieval tab -----------------------------------------------------------


# ----- Q/K/V calculator tab --------------------------------------------------------------
def calculator_tab() -> None:
    gr.Markdown("Q/K/V calculator: coming in the calculator issue.")


# ----- end Q/K/V calculator tab ----------------------------------------------------------


with gr.Blocks(title="Attention Explorer") as demo:
    gr.Markdown("# Attention Explorer\nSee what attention looks at: in vision transformers, in a digit database, and step by step.")
    with gr.Tab("ViT attention maps", id="vit"):
        vit_tab()
    with gr.Tab("MNIST retrieval", id="retrieval"):
        retrieval_tab()
    with gr.Tab("Q/K/V calculator", id="calculator"):
        calculator_tab()

demo.queue(default_concurrency_limit=2)  # 2 cores: two requests compute at once, the rest wait


if __name__ == "__main__":
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
