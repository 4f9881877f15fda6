"""Attention as a database lookup on MNIST: hard, soft, many-query and trained retrieval.

A database holds N digits (the values V). Attention scores a query Q against keys K,
turns the scores into weights, and retrieves `weights @ V`:

- hard: every item gets a unique one-hot key; the query is the one-hot of one item, so
  QK^T is already a one-hot vector and retrieves that item exactly (`hard_lookup`);
- soft: random Q (1 x d) and K (N x d); softmax(scale * QK^T) V is a blurry weighted
  average, which sharpens toward hard attention as the scale grows (`soft_lookup`);
- many queries: the same with `num_q` random queries at once (`multi_lookup`);
- trained: learned embeddings make the weights pick the digits that match a query
  digit (`trained_lookup`, models in `attention.retrieval.models`).

Evaluation protocol (no leakage). The 5,000 shipped digits are split once by
`mnist.split(5000)` (seed 0) into a train part (4,000) and a held-out part (1,000).
Every database is drawn from the train part only (`draw_database`: a
`torch.Generator` seeded with `seed`, then `randperm`, as the lab did with
`torch.manual_seed(42)`); every query in `evaluate` comes from the held-out part, so
no query was ever seen in training or sits in any database. The lab's model was
trained on the default database (seed 42, N = 100) with train-part queries outside
it; the CNN model on a fresh random database from the train part at every step.
`unseen_db_*` uses databases drawn with seeds 1, 2, 3 (compositions never trained on);
`unseen_digits_db_*` goes further: a database made of held-out digits (the first 100
of the held-out part), queried by the other 900 held-out digits, so neither queries nor
database images were ever seen in training. (The held-out part is kept in a fixed random
order, as the shipped digits are sorted by class.)
Top-1 class agreement: the label of the database image with the largest weight equals
the query's label. MSE: mean squared pixel error in [0, 1] between the retrieved image
and the query. `pixel_nn_top1`: nearest neighbour in pixel space on the same database.

Command line: `python -m attention.retrieval evaluate [--n 100] [--seed 42] [--queries K]` prints
`evaluate`'s dictionary, the table in docs/retrieval.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from attention import mnist
from attention.errors import InputError, check_int
from attention.retrieval.models import MODEL_NAMES, Retriever, as_pixels, attention_weights, load

DEFAULT_N, DEFAULT_SEED = 100, 42
MAX_D, MAX_QUERIES, MAX_SCALE = 4096, 256, 1000.0


@dataclass(frozen=True)
class Pools:
    """Digits split into a pool for databases (`train`, sorted) and one for queries (`heldout`, in a
    fixed random order): int index arrays into `digits`."""

    digits: mnist.Digits
    train: np.ndarray
    heldout: np.ndarray


@lru_cache(maxsize=2)
def pools(full: bool = False) -> Pools:
    """The shipped subset split by `mnist.split` (full=False), or whatever `mnist.load_digits` gives.

    With the full set, held-out digits that are also in the subset's train part (the trained
    models saw them) are dropped, so "held-out" keeps meaning "never seen in training".
    """
    digits = mnist.load_digits() if full else mnist.load_subset()
    train, heldout = mnist.split(len(digits))
    if len(digits) != len(mnist.load_subset()):
        sub = pools(False)
        seen = {img.tobytes() for img in sub.digits.images[sub.train]}
        heldout = np.array([i for i in heldout if digits.images[i].tobytes() not in seen], dtype=np.int64)
    # the shipped digits are ordered by class: put the held-out ones in a fixed random order,
    # so "the first K held-out queries" (and held-out index 0, 1, 2, ... in the app) mix classes
    heldout = heldout[np.random.default_rng(1).permutation(len(heldout))]
    return Pools(digits, train, heldout)


@dataclass(frozen=True)
class Database:
    """N digits drawn from a train pool. images: uint8 (N, 28, 28); labels, indices: int64 (N,)."""

    images: np.ndarray
    labels: np.ndarray
    indices: np.ndarray  # into pools().digits
    seed: int
    source: str

    def __len__(self) -> int:
        return len(self.labels)


def draw_database(n: int = DEFAULT_N, seed: int = DEFAULT_SEED, pool: Pools | None = None) -> Database:
    """N digits of the pool's train part, chosen by `randperm` under a generator seeded with `seed`."""
    pool = pool or pools()
    n = check_int(n, "the database size N", 1, len(pool.train))
    seed = check_int(seed, "the database seed", 0, 2**31 - 1)
    g = torch.Generator().manual_seed(seed)
    idx = pool.train[torch.randperm(len(pool.train), generator=g)[:n].numpy()]
    return Database(pool.digits.images[idx], pool.digits.labels[idx], idx, seed, pool.digits.source)


# ---- the lookups ---------------------------------------------------------------------
@dataclass(frozen=True)
class Lookup:
    """One or more attention lookups over a database of N items (B queries).

    query: (B, d); keys: (N, d); scores = scale * query @ keys.T: (B, N);
    weights: (B, N), rows sum to 1; retrieved = weights @ values: float (B, 784) in [0, 1];
    order: (N,) the database index of each key/value row (the shuffle for hard attention).
    """

    query: np.ndarray
    keys: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    retrieved: np.ndarray
    order: np.ndarray

    def retrieved_images(self) -> np.ndarray:
        """uint8 (B, 28, 28)."""
        return np.round(np.clip(self.retrieved, 0, 1) * 255).reshape(-1, 28, 28).astype(np.uint8)


def shuffled_one_hot_keys(n: int, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    """Unique one-hot keys for N items, shuffled: keys (N, N) with keys[i] = e_order[i], and order (N,)."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return torch.eye(n, dtype=torch.float64)[order], order.numpy()


def hard_lookup(db: Database, index: int, shuffle_seed: int = 0) -> Lookup:
    """Hard attention: retrieve database item `index` exactly.

    Item i gets the one-hot key e_i; keys and values are shuffled together (row r holds
    key e_order[r] and value db[order[r]]), so the store's layout is irrelevant. The query
    is e_index, so the scores QK^T are 1 at the row holding item `index` and 0 elsewhere:
    already a one-hot weight vector (non-negative, sums to 1). No softmax is needed: a
    softmax of these scores would give that row only e / (e + N - 1) of the weight and
    blur the answer; `scores @ V` selects the value exactly.
    """
    n = len(db)
    index = check_int(index, "the query index", 0, n - 1)
    keys, order = shuffled_one_hot_keys(n, check_int(shuffle_seed, "the shuffle seed", 0, 2**31 - 1))
    values = as_pixels(db.images).double()[torch.as_tensor(order)]  # shuffled together with the keys
    query = torch.zeros(1, n, dtype=torch.float64)
    query[0, index] = 1.0
    scores = query @ keys.T
    return Lookup(query.numpy(), keys.numpy(), scores.numpy(), scores.numpy(), (scores @ values).numpy(), order)


def _random_qk(num_q: int, n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    d = check_int(d, "the key dimension d", 1, MAX_D)
    g = torch.Generator().manual_seed(check_int(seed, "the key seed", 0, 2**31 - 1))
    return torch.randn(num_q, d, generator=g, dtype=torch.float64), torch.randn(n, d, generator=g, dtype=torch.float64)


def multi_lookup(db: Database, num_q: int = 16, d: int = 16, seed: int = 0, scale: float = 1.0) -> Lookup:
    """Soft attention with `num_q` random queries (num_q, d) and random keys (N, d).

    weights = softmax(scale * QK^T) over the N items; retrieved = weights @ V. scale = 1
    is the plain softmax(QK^T); large scales sharpen toward hard attention (argmax),
    scale = 0 gives the plain average. The transformer's scaling is scale = 1 / sqrt(d).
    """
    num_q = check_int(num_q, "the number of queries num_q", 1, MAX_QUERIES)
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise InputError(f"the scale must be a number from 0 to {MAX_SCALE:g}, got {scale!r}") from None
    if not 0 <= scale <= MAX_SCALE:
        raise InputError(f"the scale = {scale:g} is out of range: expected 0 to {MAX_SCALE:g}")
    q, k = _random_qk(num_q, len(db), d, seed)
    scores = scale * (q @ k.T)
    weights = torch.softmax(scores, dim=1)
    values = as_pixels(db.images).double()
    return Lookup(q.numpy(), k.numpy(), scores.numpy(), weights.numpy(), (weights @ values).numpy(), np.arange(len(db)))


def soft_lookup(db: Database, d: int = 16, seed: int = 0, scale: float = 1.0) -> Lookup:
    """Soft attention with one random query (1, d): `multi_lookup` with num_q = 1."""
    return multi_lookup(db, 1, d, seed, scale)


# ---- trained retrieval ----------------------------------------------------------------
def heldout_query(index: int, pool: Pools | None = None) -> tuple[np.ndarray, int]:
    """Held-out digit number `index` (0-based within the held-out part): uint8 (28, 28) and its label."""
    pool = pool or pools()
    i = pool.heldout[check_int(index, "the held-out query index", 0, len(pool.heldout) - 1)]
    return pool.digits.images[i], int(pool.digits.labels[i])


@dataclass(frozen=True)
class Match:
    """One database item in a ranking: its position in the database, label and weight."""

    position: int
    label: int
    weight: float


def trained_lookup(model: Retriever | str, query: np.ndarray, db: Database, k: int = 10) -> tuple[Lookup, list[Match]]:
    """Retrieve a uint8 (28, 28) query digit from `db` with a trained model ("lab", "cnn" or a module).

    Returns the lookup (weights (1, N), retrieved (1, 784)) and the top-k matches by weight.
    """
    if isinstance(model, str):
        model = load(model)[0]
    query = np.asarray(query)
    if query.shape != (28, 28):
        raise InputError(f"the query digit has shape {query.shape}: expected (28, 28) (see mnist.normalise_sketch)")
    w = attention_weights(model, query[None], db.images).astype(np.float64)
    retrieved = w @ as_pixels(db.images).double().numpy()
    top = np.argsort(-w[0], kind="stable")[:k]
    matches = [Match(int(j), int(db.labels[j]), float(w[0, j])) for j in top]
    return Lookup(np.empty((1, 0)), np.empty((len(db), 0)), w, w, retrieved, np.arange(len(db))), matches


# ---- evaluation -----------------------------------------------------------------------
def class_agreement(weights: np.ndarray, db_labels: np.ndarray, query_labels: np.ndarray) -> float:
    """Share of queries whose highest-weight database item has their label. weights: (B, N)."""
    return float(np.mean(db_labels[np.argmax(weights, axis=1)] == query_labels))


def pixel_nn_weights(queries: np.ndarray, database: np.ndarray) -> np.ndarray:
    """One-hot (B, N) weights on each query's nearest database image in pixel space (L2)."""
    q, db = as_pixels(queries).double(), as_pixels(database).double()
    nearest = torch.cdist(q, db).argmin(1)
    return torch.nn.functional.one_hot(nearest, len(db)).numpy().astype(np.float64)


def mse(weights: np.ndarray, queries: np.ndarray, database: np.ndarray) -> float:
    """Mean squared pixel error ([0, 1] scale) between `weights @ database` and the queries."""
    retrieved = weights @ as_pixels(database).double().numpy()
    return float(np.mean((retrieved - as_pixels(queries).double().numpy()) ** 2))


def evaluate(
    n: int = DEFAULT_N,
    seed: int = DEFAULT_SEED,
    max_queries: int | None = None,
    unseen_seeds: tuple[int, ...] = (1, 2, 3),
    models: dict[str, Retriever] | None = None,
) -> dict[str, float]:
    """The metrics of the module docstring, on held-out queries (the first `max_queries` of them)."""
    pool = pools()
    models = models or {name: load(name)[0] for name in MODEL_NAMES}
    q_idx = pool.heldout[:max_queries] if max_queries else pool.heldout
    queries, q_labels = pool.digits.images[q_idx], pool.digits.labels[q_idx]
    db = draw_database(n, seed, pool)
    out: dict[str, float] = {
        "pixel_nn_top1": class_agreement(pixel_nn_weights(queries, db.images), db.labels, q_labels)
    }
    for prefix, name in (("lab_", "lab"), ("", "cnn")):
        w = attention_weights(models[name], queries, db.images)
        out[f"{prefix}top1_class_agreement"] = class_agreement(w, db.labels, q_labels)
        out[f"{prefix}mse"] = mse(w, queries, db.images)
    unseen = [draw_database(n, s, pool) for s in unseen_seeds if s != seed]
    for prefix, name in (("lab_", "lab"), ("", "cnn")):  # the lab model was trained on one database: seed 42
        out[f"{prefix}unseen_db_top1_class_agreement"] = float(
            np.mean(
                [
                    class_agreement(attention_weights(models[name], queries, u.images), u.labels, q_labels)
                    for u in unseen
                ]
            )
        )
    # a database of held-out digits, queried by the remaining held-out digits
    h_db, h_q = pool.heldout[:n], pool.heldout[n:][:max_queries] if max_queries else pool.heldout[n:]
    if len(h_q):
        out["unseen_digits_db_top1_class_agreement"] = class_agreement(
            attention_weights(models["cnn"], pool.digits.images[h_q], pool.digits.images[h_db]),
            pool.digits.labels[h_db],
            pool.digits.labels[h_q],
        )
    out["queries"] = float(len(q_idx))
    return out
