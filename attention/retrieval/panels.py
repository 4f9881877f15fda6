"""What the MNIST retrieval tab shows, one function per section (no Gradio here): the lookup sections.

Each `*_view` takes its section's raw inputs, as a form or an API client sends them (the
package checks them and raises InputError / ImageError naming what is accepted), and
returns the section's outputs in display order: uint8 pictures (plots come rendered, see
`plots`) and JSON-ready `info` dicts. Databases are drawn from `lookup.pools(full=True)`: full
MNIST when it is cached or reachable, else the shipped subset. Here: the database and the
hard, soft and many-query sections; the trained models' sections and retraining are in
`trained_panels`, every section at its defaults in `first_screen`. (The API's answers, one
picture and one JSON each, are in `answers`.)
"""

from __future__ import annotations

import random
from typing import NamedTuple

import numpy as np

from attention.render import upsample
from attention.retrieval import lookup
from attention.retrieval.plots import digit_grid, pixels, weights_figure

DIGIT_SCALE = 8  # a single digit (query, retrieved) is shown 224 x 224
MATCH_SCALE = 4  # top-10 tiles are 112 x 112
KEYS_WIDTH = 300  # the hard tab's key matrix is shown about this many pixels wide
LARGE_DB = 400  # above this many digits the database sheet is 40 a row at 1x, else DB_COLUMNS a row at 2x
DB_COLUMNS = 20  # a wide, low sheet: the default 100 digits are 5 rows, so each section's results stay in view


def database(n: int, seed: int) -> lookup.Database:
    """The tab's database: N digits of the train part drawn with `seed` (full MNIST when reachable)."""
    return lookup.draw_database(n, seed, lookup.pools(full=True))


def heldout_count() -> int:
    """How many held-out query digits the trained section offers (indices 0 to count - 1)."""
    return len(lookup.pools(full=True).heldout)


def random_heldout_index(rng: random.Random | None = None) -> int:
    """A random held-out query index (the "Random held-out digit" button); `rng` to seed it."""
    return (rng or random).randrange(heldout_count())


def digit_picture(image: np.ndarray) -> np.ndarray:
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
    return HardView(keys, pixels(fig), digit_picture(retrieved), info)


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
    return SoftView(pixels(fig), digit_picture(lk.retrieved_images()[0]), info)


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
