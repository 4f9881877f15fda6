"""What the MNIST retrieval tab shows, one function per section (no Gradio here).

Each `*_view` takes its section's raw inputs, as a form or an API client sends them (the
package checks them and raises InputError / ImageError naming what is accepted), and
returns the section's outputs in display order: uint8 pictures (plots come rendered, see
`plots`) and JSON-ready `info` dicts. Databases are drawn from `lookup.pools(full=True)`: full
MNIST when it is cached or reachable, else the shipped subset. `first_screen` is every section
at its defaults, computed once per process when the tab is first opened. (The API's answers,
one picture and one JSON each, are in `answers`.)

A visitor's retrained models live in their own state, `Retrained`: {model name: (config,
state_dict)}; `models_for` picks them over the shipped ones for that visitor only.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import torch

from attention import mnist
from attention.errors import ImageError, check_int
from attention.render import upsample
from attention.retrieval import lookup, models, train
from attention.retrieval.plots import digit_grid, loss_figure, pixels, weights_figure

DIGIT_SCALE = 8  # a single digit (query, retrieved) is shown 224 x 224
MATCH_SCALE = 4  # top-10 tiles are 112 x 112
KEYS_WIDTH = 300  # the hard tab's key matrix is shown about this many pixels wide
LARGE_DB = 400  # above this many digits the database sheet is 40 a row at 1x, else DB_COLUMNS a row at 2x
DB_COLUMNS = 20  # a wide, low sheet: the default 100 digits are 5 rows, so each section's results stay in view
RETRAIN_MAX_EPOCHS = 5  # what a visitor may retrain in the app
SHIPPED, MINE = "shipped", "your retrained copy"  # where a model's weights come from

Retrained = dict[str, tuple[dict, dict[str, torch.Tensor]]]


def database(n: int, seed: int) -> lookup.Database:
    """The tab's database: N digits of the train part drawn with `seed` (full MNIST when reachable)."""
    return lookup.draw_database(n, seed, lookup.pools(full=True))


def heldout_count() -> int:
    """How many held-out query digits the trained section offers (indices 0 to count - 1)."""
    return len(lookup.pools(full=True).heldout)


def random_heldout_index(rng: random.Random | None = None) -> int:
    """A random held-out query index (the "Random held-out digit" button); `rng` to seed it."""
    return (rng or random).randrange(heldout_count())


def _digit(image: np.ndarray) -> np.ndarray:
    """uint8 (28, 28) -> (224, 224), crisp pixels."""
    return upsample(np.asarray(image), DIGIT_SCALE)


# ---- the database -----------------------------------------------------------------------
class DatabaseView(NamedTuple):
    grid: np.ndarray  # uint8 (H, W): item i at row i // ncols, column i % ncols (see `database_columns`)
    note: str  # Markdown: where the digits come from, N, seed, the split sizes


def database_columns(n: int) -> tuple[int, int]:
    """(digits a row, upscaling) of the database sheet of n digits: DB_COLUMNS at 2x, 40 at 1x above LARGE_DB."""
    return (40, 1) if n > LARGE_DB else (DB_COLUMNS, 2)


def database_note(db: lookup.Database, pool: lookup.Pools) -> str:
    """The data note shown beside the database (Markdown)."""
    ncols = database_columns(len(db))[0]
    return (
        f"**Data:** {db.source}. The database: **{len(db)}** digits drawn with seed {db.seed} from the "
        f"train part ({len(pool.train):,} digits); trained-retrieval queries come from the held-out part "
        f"({len(pool.heldout):,} digits), never in any database. Item *i* is row *i* // {ncols}, "
        f"column *i* % {ncols}."
    )


def database_view(n: int, seed: int) -> DatabaseView:
    """The database sheet (see `database_columns`) and its note."""
    db = database(n, seed)
    ncols, k = database_columns(len(db))
    return DatabaseView(digit_grid(db.images, nrow=ncols, k=k), database_note(db, lookup.pools(full=True)))


# ---- hard, soft and many-query attention ------------------------------------------------
def hard_facts(n: int, seed: int, index: int, shuffle_seed: int) -> tuple[lookup.Lookup, np.ndarray, dict]:
    """Hard attention on the database (no pictures): the lookup, the retrieved digit uint8 (28, 28) and
    info {index, row_in_shuffled_store, label, retrieved_equals_database_image, scores (N,), order (N,)}."""
    db = database(n, seed)
    lk = lookup.hard_lookup(db, index, shuffle_seed)
    row = int(np.argmax(lk.scores[0]))
    index = int(lk.order[row])
    retrieved = lk.retrieved_images()[0]
    info = {
        "index": index,
        "row_in_shuffled_store": row,
        "label": int(db.labels[index]),
        "retrieved_equals_database_image": bool(np.array_equal(retrieved, db.images[index])),
        "scores": lk.scores[0].tolist(),
        "order": lk.order.tolist(),
    }
    return lk, retrieved, info


class HardView(NamedTuple):
    keys: np.ndarray  # uint8 (k N, k N): the shuffled one-hot keys, white = 1, k = max(1, KEYS_WIDTH // N)
    plot: np.ndarray  # uint8 (H, W, 3): the scores QK^T over the shuffled store's rows
    retrieved: np.ndarray  # uint8 (224, 224): QK^T V, upscaled
    info: dict  # see `hard_facts`


def hard_view(n: int, seed: int, index: int, shuffle_seed: int) -> HardView:
    """Hard attention on the database: retrieve item `index` through shuffled one-hot keys."""
    lk, retrieved, info = hard_facts(n, seed, index, shuffle_seed)
    row = info["row_in_shuffled_store"]
    fig = weights_figure(
        lk.scores[0],
        title=f"scores QK^T: 1 at row {row}",
        xlabel="row of the shuffled store",
        highlight=row,
        highlight_label=f"item {info['index']}",  # the bar is at the shuffled row; it holds this item
    )
    keys = upsample((lk.keys * 255).astype(np.uint8), max(1, KEYS_WIDTH // len(lk.order)))
    return HardView(keys, pixels(fig), _digit(retrieved), info)


def soft_facts(n: int, seed: int, d: int, key_seed: int, scale: float) -> tuple[lookup.Database, lookup.Lookup, dict]:
    """Soft attention with one random query (1, d) and random keys (N, d) at inverse temperature `scale`
    (no pictures): the database, the lookup and info {weights (N,), sum, max_weight, argmax,
    effective_items = 1 / sum(w^2)}."""
    db = database(n, seed)
    lk = lookup.soft_lookup(db, d, key_seed, scale)
    w = lk.weights[0]
    info = {
        "weights": w.tolist(),
        "sum": float(w.sum()),
        "max_weight": float(w.max()),
        "argmax": int(np.argmax(w)),
        "effective_items": float(1 / np.sum(w**2)),
    }
    return db, lk, info


class SoftView(NamedTuple):
    plot: np.ndarray  # uint8 (H, W, 3): the weights over the database, coloured by label
    retrieved: np.ndarray  # uint8 (224, 224): softmax(scale QK^T) V, upscaled
    info: dict  # see `soft_facts`


def soft_view(n: int, seed: int, d: int, key_seed: int, scale: float) -> SoftView:
    """Soft attention with one random query (1, d) and random keys (N, d) at inverse temperature `scale`."""
    db, lk, info = soft_facts(n, seed, d, key_seed, scale)
    fig = weights_figure(
        lk.weights[0],
        db.labels,
        title=f"scale {float(scale):g}: max weight {info['max_weight']:.2f}, effective items "
        f"{info['effective_items']:.1f}",
        highlight=info["argmax"],
    )
    return SoftView(pixels(fig), _digit(lk.retrieved_images()[0]), info)


class ManyView(NamedTuple):
    grid: np.ndarray  # uint8 (H, W): the num_q retrievals, 8 a row, upscaled 3x
    info: dict  # num_q, max_weights (num_q,), argmax (num_q,), sums (num_q,)


def many_view(n: int, seed: int, d: int, key_seed: int, scale: float, num_q: int) -> ManyView:
    """`num_q` random queries at once over the same random keys: one softmax and one retrieval each."""
    db = database(n, seed)
    lk = lookup.multi_lookup(db, num_q, d, key_seed, scale)
    info = {
        "num_q": len(lk.weights),
        "max_weights": lk.weights.max(1).tolist(),
        "argmax": lk.weights.argmax(1).tolist(),
        "sums": lk.weights.sum(1).tolist(),
    }
    return ManyView(digit_grid(lk.retrieved_images(), nrow=8, k=3), info)


# ---- trained retrieval ------------------------------------------------------------------
def models_for(state: Retrained | None) -> dict[str, tuple[models.Retriever, str]]:
    """{name: (model in eval mode, origin)} for every model in MODEL_NAMES: the visitor's retrained
    copy where `state` holds one (origin MINE), else the shipped model (origin SHIPPED)."""
    out = {}
    for name in models.MODEL_NAMES:
        if state and name in state:
            config, weights = state[name]
            model = models.build(config)
            model.load_state_dict(weights)
            out[name] = (model.eval(), MINE)
        else:
            out[name] = (models.load(name)[0], SHIPPED)
    return out


class ModelAnswer(NamedTuple):
    """One trained model's answer: retrieved uint8 (224, 224), its weights plot uint8 (H, W, 3), and
    the top 10 as [(uint8 (112, 112), "#rank · label · weight")]."""

    retrieved: np.ndarray
    plot: np.ndarray
    top10: list


class TrainedView(NamedTuple):
    """Both models' answers to one query: query uint8 (224, 224); models {name: ModelAnswer} in
    MODEL_NAMES order; info {"query_label", "query": 28 x 28 pixels (lists of ints), name: {"origin",
    "top10": [{position, label, weight}], "top1_label", "weights": (N,)}}."""

    query: np.ndarray
    models: dict[str, ModelAnswer]
    info: dict


def _trained(
    db: lookup.Database, query: np.ndarray, label: int | None, state: Retrained | None, plot_height: int | None
) -> TrainedView:
    answers, info = {}, {"query_label": label, "query": np.asarray(query).tolist()}
    for name, (model, origin) in models_for(state).items():
        lk, top = lookup.trained_lookup(model, query, db)
        fig = weights_figure(
            lk.weights[0],
            db.labels,
            title=f"{name} ({origin}): top label {top[0].label}",
            highlight=top[0].position,
        )
        gallery = [
            (upsample(db.images[m.position], MATCH_SCALE), f"#{r + 1} · {m.label} · {m.weight:.2f}")
            for r, m in enumerate(top)
        ]
        dpi = plot_height / fig.get_figheight() if plot_height else None
        answers[name] = ModelAnswer(_digit(lk.retrieved_images()[0]), pixels(fig, dpi), gallery)
        info[name] = {
            "origin": origin,
            "top10": [m.__dict__ for m in top],
            "top1_label": top[0].label,
            "weights": lk.weights[0].tolist(),
        }
    return TrainedView(_digit(query), answers, info)


def trained_view(
    n: int, seed: int, query_index: int, state: Retrained | None = None, plot_height: int | None = None
) -> TrainedView:
    """Both trained models look up held-out digit `query_index` in the database (see TrainedView); the
    weights plots `plot_height` px tall (default: `plots.PLOT_DPI`)."""
    query, label = lookup.heldout_query(query_index, lookup.pools(full=True))
    return _trained(database(n, seed), query, label, state, plot_height)


def sketch_view(
    n: int, seed: int, sketch: np.ndarray | dict | None, state: Retrained | None = None, plot_height: int | None = None
) -> TrainedView:
    """As `trained_view`, for a drawing (see `mnist.normalise_sketch`; query_label None).

    sketch: an image array, or a layered drawing as a dict holding the flattened image under
    "composite". Raises ImageError when there is no drawing or it is blank.
    """
    image = sketch.get("composite") if isinstance(sketch, dict) else sketch
    if image is None:
        raise ImageError("the sketch is empty: draw one digit on the sketchpad, then press the button")
    db = database(n, seed)
    return _trained(db, mnist.normalise_sketch(image), None, state, plot_height)


# ---- the first screen ---------------------------------------------------------------------
class FirstScreen(NamedTuple):
    """Every section at the tab's defaults (database N = 100, seed 42; hard index 7; soft and many d = 16,
    key seed 0, scale 1, 16 queries; held-out query 0, shipped models)."""

    database: DatabaseView
    hard: HardView
    soft: SoftView
    many: ManyView
    trained: TrainedView


@lru_cache(maxsize=1)
def first_screen() -> FirstScreen:
    """The sections' default content, computed once per process (about 0.5 s) when first asked for."""
    db = (lookup.DEFAULT_N, lookup.DEFAULT_SEED)
    return FirstScreen(
        database_view(*db),
        hard_view(*db, 7, 0),
        soft_view(*db, 16, 0, 1.0),
        many_view(*db, 16, 0, 1.0, 16),
        trained_view(*db, 0),
    )


# ---- retraining a visitor's copy ----------------------------------------------------------
def loss_plot(progress: dict) -> np.ndarray:
    """The loss curve of a retrain's `progress` (see `retrain`): uint8 (H, W, 3)."""
    title = f"{progress['model']}: training loss"
    return pixels(loss_figure(progress["losses"], title, progress["total"] // progress["epochs"]))


def retrain(
    model_name: str, epochs: int, seed: int, state: Retrained | None, on_step: Callable[[int, int], None] | None = None
) -> Iterator[tuple[str, dict | None, Retrained | None]]:
    """Train a fresh copy of `model_name` ("lab" or "cnn") for 1 to RETRAIN_MAX_EPOCHS epochs from `seed`.

    Calls on_step(step, total) after every step; yields (Markdown status, progress, None) every
    10 steps and at the end, with progress = {"model", "epochs", "seed", "step", "total", "losses":
    every step's loss so far} (JSON-ready), then (final status, None, new state): a new dict holding
    `state`'s entries and this copy. Neither `state` nor the shipped model changes.
    """
    config = models.load(model_name)[1]
    epochs = check_int(epochs, "the number of epochs", 1, RETRAIN_MAX_EPOCHS)
    seed = check_int(seed, "the training seed", 0, 2**31 - 1)
    config = {**config, "seed": seed, "epochs": epochs}
    model = train.fresh_model(config, seed)  # from scratch: the shipped model is untouched
    losses = []
    for step, total, loss in train.train_steps(
        model, config["kind"], epochs, seed, config["lr"], config.get("class_loss_weight", 1.0)
    ):
        losses.append(float(loss))
        if on_step:
            on_step(step, total)
        if step % 10 == 0 or step == total:
            progress = {"model": model_name, "epochs": epochs, "seed": seed, "step": step, "total": total}
            yield (
                f"Training your copy of **{model_name}**: step {step}/{total}, loss {loss:.4f}",
                {**progress, "losses": list(losses)},
                None,
            )
    state = {**(state or {}), model_name: (config, copy.deepcopy(model.state_dict()))}
    yield (
        (
            f"Done: your copy of **{model_name}** ({epochs} epoch{'s' if epochs != 1 else ''}, seed {seed}) now "
            "answers your queries above; the shipped model and other visitors are unaffected."
        ),
        None,
        state,
    )
