"""MNIST retrieval by attention: a database of digits queried with hard (one-hot) attention,
soft attention with random Q/K, many queries at once, and trained `nn.MultiheadAttention`
retrievers.

    lookup   the lookups themselves (hard, soft, many, trained) and their metrics
    models   the trained retrievers (shipped weights in weights/)
    train    retraining them (`python -m attention.retrieval train`)
    panels   each mode's result ready to show: images, plots, JSON facts (database, hard, soft, many)
    trained_panels  the trained models' sections (held-out digit, sketch) and a visitor's retraining
    first_screen    every section at the tab's defaults, once per process
    answers  the API's answers: one picture and one JSON per call
    plots    digit grids, weight bars, loss curves (rendered to pixels)
"""

from attention.retrieval.lookup import (
    DEFAULT_N,
    DEFAULT_SEED,
    MAX_D,
    MAX_QUERIES,
    MAX_SCALE,
    Database,
    Lookup,
    Match,
    Pools,
    class_agreement,
    draw_database,
    evaluate,
    hard_lookup,
    heldout_query,
    mse,
    multi_lookup,
    pixel_nn_weights,
    pools,
    shuffled_one_hot_keys,
    soft_lookup,
    trained_lookup,
)

__all__ = [
    "DEFAULT_N",
    "DEFAULT_SEED",
    "MAX_D",
    "MAX_QUERIES",
    "MAX_SCALE",
    "Database",
    "Lookup",
    "Match",
    "Pools",
    "class_agreement",
    "draw_database",
    "evaluate",
    "hard_lookup",
    "heldout_query",
    "mse",
    "multi_lookup",
    "pixel_nn_weights",
    "pools",
    "shuffled_one_hot_keys",
    "soft_lookup",
    "trained_lookup",
]
