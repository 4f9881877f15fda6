"""The MNIST retrieval tab's endpoints, for `gradio_client` and MCP callers: /retrieval_*.

Each answers with at most one picture (a PNG file) and one JSON of every number (`answers`): an
API call downloads one file, not the tab's twenty. Inputs are hidden components, so every
parameter has a default; /retrieval_trained, /retrieval_sketch and /retrieval_retrain share the
tab's per-visitor state (a client's retrained copy answers that client's later queries). The
docstrings' `Args:` describe each parameter to MCP clients.
"""

from __future__ import annotations

import gradio as gr

from attention.retrieval import answers, trained_panels
from attention.retrieval import lookup as mnist_lookup
from attention.ui.common.components import number, sketchpad, user_errors

N, SEED = mnist_lookup.DEFAULT_N, mnist_lookup.DEFAULT_SEED


@user_errors
def retrieval_database(n=N, seed=SEED):
    """The database of MNIST digits that every /retrieval_* endpoint looks up (the values V).

    Returns (database, info): a PNG sheet of the N digits, `info["columns"]` a row; a dict with n,
    seed, source, columns, labels (item i's label; item i is at row i // columns, column i % columns),
    the sizes of the train and held-out pools, and a note.

    Args:
        n: the database size N: how many digits are drawn from the train part (1 to its size, 4,000 offline).
        seed: the database seed (0 to 2**31 - 1): the same seed draws the same digits.
    """
    grid, info = answers.database(n, seed)
    return answers.save_png(grid, "database"), info


@user_errors
def retrieval_hard(n=N, seed=SEED, index=7, shuffle_seed=0):
    """Hard attention: one-hot keys, shuffled with the values; the query e_index retrieves item `index` exactly.

    Returns (retrieved, info): the retrieved digit as a PNG (224 x 224, 8x the 28 x 28 pixels); a dict
    with index, row_in_shuffled_store, label, retrieved_equals_database_image, scores (N) and order (N:
    the database item in each row of the shuffled store; the keys are its one-hot rows).

    Args:
        n: the database size N (see /retrieval_database).
        seed: the database seed.
        index: the database item to retrieve, 0 to N - 1.
        shuffle_seed: the seed of the shuffle of keys and values (0 to 2**31 - 1).
    """
    digit, info = answers.hard(n, seed, index, shuffle_seed)
    return answers.save_png(digit, "hard"), info


@user_errors
def retrieval_soft(n=N, seed=SEED, d=16, key_seed=0, scale=1.0):
    """Soft attention: a random query (1 x d) and random keys (N x d); weights = softmax(scale * QK^T).

    Returns (retrieved, info): the retrieved weighted average of the digits as a PNG (224 x 224); a dict
    with weights (N, summing to 1), sum, max_weight, argmax and effective_items (1 / sum of squared weights).

    Args:
        n: the database size N (see /retrieval_database).
        seed: the database seed.
        d: the key dimension d, 1 to 4096.
        key_seed: the seed of the random query and keys (0 to 2**31 - 1).
        scale: the inverse temperature, 0 to 1000: 0 averages all digits, large values pick one.
    """
    digit, info = answers.soft(n, seed, d, key_seed, scale)
    return answers.save_png(digit, "soft"), info


@user_errors
def retrieval_many(n=N, seed=SEED, d=16, key_seed=0, scale=1.0, num_q=16):
    """Many queries at once: num_q random queries over the same random keys, one softmax and one retrieval each.

    Returns (retrievals, info): a PNG sheet of the num_q retrieved digits, 8 a row; a dict with num_q and,
    per query, max_weights, argmax and sums.

    Args:
        n: the database size N (see /retrieval_database).
        seed: the database seed.
        d: the key dimension d, 1 to 4096.
        key_seed: the seed of the random queries and keys (0 to 2**31 - 1).
        scale: the inverse temperature, 0 to 1000.
        num_q: the number of queries, 1 to 256.
    """
    grid, info = answers.many(n, seed, d, key_seed, scale, num_q)
    return answers.save_png(grid, "many"), info


@user_errors
def retrieval_trained(n=N, seed=SEED, query_index=0, state=None):
    """Two trained nn.MultiheadAttention retrievers (lab: Linear + 1 head; cnn: CNN + 4 heads) look up a held-out digit.

    Returns (sheet, info): one PNG with the query, each model's retrieved digit, weights plot and top-10
    matches; a dict with query_label, query (the 28 x 28 pixels) and per model (lab, cnn): origin
    (shipped, or this client's retrained copy), top10 [{position, label, weight}], top1_label and
    weights (N).

    Args:
        n: the database size N (see /retrieval_database).
        seed: the database seed.
        query_index: which held-out digit is the query (0 to 999 offline); held-out digits are never in a database.
    """
    sheet, info = answers.trained(n, seed, query_index, state)
    return answers.save_png(sheet, "trained"), info


@user_errors
def retrieval_sketch(n=N, seed=SEED, sketch=None, state=None):
    """As /retrieval_trained, for a drawn digit (made to look like MNIST: cropped, scaled to 20 px, centred).

    Returns (sheet, info) as /retrieval_trained, with query_label None and query the normalised drawing.

    Args:
        n: the database size N (see /retrieval_database).
        seed: the database seed.
        sketch: an ImageEditor value {"background", "layers", "composite"} whose composite is an image of one digit.
    """
    sheet, info = answers.sketch(n, seed, sketch, state)
    return answers.save_png(sheet, "sketch"), info


@user_errors
def retrieval_retrain(model_name="lab", epochs=2, seed=1, state=None):
    """Retrain this client's own copy of a retriever from scratch; its later /retrieval_trained calls use it
    (a gradio_client session; an MCP tool call has no session, so the copy is not kept).

    Streams (status, progress): a Markdown line, and a dict with model, epochs, seed, step, total and
    losses (every step's loss so far), every 10 steps, and once more with the final status.

    Args:
        model_name: which model to retrain: 'lab' or 'cnn'.
        epochs: 1 to 5 (about 3 s each for lab, 6 s for cnn on a CPU).
        seed: the training seed (0 to 2**31 - 1).
    """
    last = None  # the streamed updates every 10 steps are the progress (no per-step progress messages)
    for msg, losses, new_state in trained_panels.retrain(model_name, epochs, seed, state):
        last = losses or last
        yield msg, last, gr.skip() if new_state is None else new_state


def build(state: gr.State) -> None:
    """Register the /retrieval_* endpoints on hidden components; `state` is the tab's per-visitor state."""
    with gr.Row(visible=False):
        n, seed = number(N, label="n"), number(SEED, label="seed")
        index, shuffle_seed = number(7, label="index"), number(0, label="shuffle_seed")
        d, key_seed, scale, num_q = (
            number(16, label="d"),
            number(0, label="key_seed"),
            number(1.0, label="scale"),
            number(16, label="num_q"),
        )
        query_index = number(0, label="query_index")
        sketch = sketchpad(type="numpy", label="sketch", layers=False)
        model_name, epochs, train_seed = (
            gr.Textbox("lab", label="model_name"),
            number(2, label="epochs"),
            number(1, label="seed"),
        )
        picture = gr.Image(format="png", type="filepath", label="picture")
        info = gr.JSON(label="info")
        status = gr.Markdown(label="status")
        button = gr.Button("retrieval")
    public = dict(api_visibility="public")
    button.click(retrieval_database, [n, seed], [picture, info], api_name="retrieval_database", **public)
    button.click(retrieval_hard, [n, seed, index, shuffle_seed], [picture, info], api_name="retrieval_hard", **public)
    button.click(retrieval_soft, [n, seed, d, key_seed, scale], [picture, info], api_name="retrieval_soft", **public)
    button.click(
        retrieval_many, [n, seed, d, key_seed, scale, num_q], [picture, info], api_name="retrieval_many", **public
    )
    button.click(
        retrieval_trained, [n, seed, query_index, state], [picture, info], api_name="retrieval_trained", **public
    )
    button.click(retrieval_sketch, [n, seed, sketch, state], [picture, info], api_name="retrieval_sketch", **public)
    button.click(
        retrieval_retrain,
        [model_name, epochs, train_seed, state],
        [status, info, state],
        api_name="retrieval_retrain",
        concurrency_limit=1,
        concurrency_id="retrieval_retrain",
        **public,
    )
