"""Attention as a lookup: exact where the maths is exact, measured where the model is trained."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import retrieval
from attention.errors import InputError

POOL = retrieval.pools()


# ---- the database and the protocol ----------------------------------------------------
def test_database_is_the_labs_seeded_randperm_of_the_train_part():
    db = retrieval.draw_database(100, 42)
    torch.manual_seed(42)  # the lab's recipe, on the global generator
    expected = POOL.train[torch.randperm(len(POOL.train))[:100].numpy()]
    np.testing.assert_array_equal(db.indices, expected)
    np.testing.assert_array_equal(db.images, POOL.digits.images[expected])
    assert len(set(db.labels.tolist())) == 10
    assert not np.array_equal(retrieval.draw_database(100, 43).indices, db.indices)


def test_queries_never_meet_training_or_databases():
    assert len(POOL.train) == 4000 and len(POOL.heldout) == 1000
    assert not set(POOL.train) & set(POOL.heldout)
    for seed in (0, 1, 42, 12345):
        assert not set(retrieval.draw_database(500, seed).indices) & set(POOL.heldout)
    # held-out digits are in a random order: the first ones mix classes
    assert len(set(POOL.digits.labels[POOL.heldout[:50]].tolist())) == 10


def test_with_the_full_set_heldout_digits_seen_in_training_are_dropped(monkeypatch):
    from attention import mnist

    sub = POOL.digits
    extra = np.random.default_rng(0).integers(0, 256, (2000, 28, 28), dtype=np.uint8)
    full = mnist.Digits(np.concatenate([extra, sub.images]), np.concatenate([sub.labels[:2000], sub.labels]), "full")
    monkeypatch.setattr(mnist, "load_digits", lambda prefer_full=True: full)
    retrieval.pools.cache_clear()
    try:
        p = retrieval.pools(full=True)
        seen = {img.tobytes() for img in sub.images[POOL.train]}
        assert len(p.heldout) > 200 and not any(full.images[i].tobytes() in seen for i in p.heldout)
        assert not set(p.train) & set(p.heldout)
    finally:
        retrieval.pools.cache_clear()


# ---- hard attention --------------------------------------------------------------------
def test_shuffled_keys_are_unique_one_hots():
    keys, order = retrieval.shuffled_one_hot_keys(50, seed=3)
    assert sorted(order.tolist()) == list(range(50)) and not np.array_equal(order, np.arange(50))
    np.testing.assert_array_equal(keys.numpy(), np.eye(50)[order])  # row r is the key e_order[r]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 200), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_shuffling_keeps_keys_and_values_aligned_so_hard_lookup_is_exact(n, seed, data):
    db = retrieval.draw_database(n, 7)
    index = data.draw(st.integers(0, n - 1))
    lk = retrieval.hard_lookup(db, index, seed)
    row = int(np.argmax(lk.scores[0]))
    assert lk.order[row] == index and lk.keys[row, index] == 1
    np.testing.assert_array_equal(lk.scores[0], np.eye(n)[row])  # one-hot: no softmax needed
    np.testing.assert_array_equal(lk.retrieved_images()[0], db.images[index])


# ---- soft attention --------------------------------------------------------------------
@pytest.mark.parametrize("scale", [0.0, 0.5, 1.0, 20.0])
def test_soft_weights_are_a_softmax_over_the_database(scale):
    db = retrieval.draw_database(60, 1)
    lk = retrieval.soft_lookup(db, d=8, seed=4, scale=scale)
    assert lk.query.shape == (1, 8) and lk.keys.shape == (60, 8) and lk.weights.shape == (1, 60)
    assert lk.weights.sum() == pytest.approx(1.0, abs=1e-12) and (lk.weights >= 0).all()
    s = scale * lk.query @ lk.keys.T
    np.testing.assert_allclose(lk.weights, np.exp(s - s.max()) / np.exp(s - s.max()).sum(), rtol=1e-10)
    np.testing.assert_allclose(lk.retrieved, lk.weights @ (db.images.reshape(60, -1) / 255.0), atol=1e-12)


def test_scale_sharpens_soft_toward_hard_and_zero_averages():
    db = retrieval.draw_database(40, 2)
    flat = retrieval.soft_lookup(db, 8, 5, scale=0.0)
    np.testing.assert_allclose(flat.weights, 1 / 40)
    lookups = [retrieval.soft_lookup(db, 8, 5, scale=s) for s in (0.1, 1, 5, 50, 500)]
    maxima = [lk.weights.max() for lk in lookups]
    assert maxima == sorted(maxima) and maxima[-1] > 0.9
    best = db.images[int(np.argmax(lookups[0].scores))].astype(float)  # the same item at every scale > 0
    errors = [np.abs(lk.retrieved_images()[0] - best).mean() for lk in lookups]
    assert errors == sorted(errors, reverse=True) and errors[-1] < 0.2 * errors[0]


def test_many_queries_are_independent_rows():
    db = retrieval.draw_database(30, 3)
    many = retrieval.multi_lookup(db, num_q=5, d=6, seed=9, scale=2.0)
    assert many.weights.shape == (5, 30) and many.retrieved_images().shape == (5, 28, 28)
    np.testing.assert_allclose(many.weights.sum(1), 1.0)
    assert len({tuple(np.round(w, 6)) for w in many.weights}) == 5
    one = retrieval.multi_lookup(db, num_q=1, d=6, seed=9, scale=2.0)
    np.testing.assert_allclose(one.weights, retrieval.soft_lookup(db, 6, 9, 2.0).weights)


# ---- trained retrieval and its metric -------------------------------------------------
@pytest.mark.parametrize("model", ["lab", "cnn"])
def test_trained_lookup_ranks_the_database_by_weight(model):
    db = retrieval.draw_database(100, 42)
    query, _ = retrieval.heldout_query(0)
    lk, top = retrieval.trained_lookup(model, query, db, k=10)
    assert lk.weights.shape == (1, 100) and lk.weights.sum() == pytest.approx(1.0, abs=1e-5)
    assert [m.weight for m in top] == sorted(lk.weights[0], reverse=True)[:10]
    assert all(m.label == db.labels[m.position] for m in top)


def test_class_agreement_counts_the_label_of_the_largest_weight():
    weights = np.array([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3], [0.3, 0.3, 0.4]])
    assert retrieval.class_agreement(weights, np.array([4, 5, 6]), np.array([5, 5, 6])) == pytest.approx(2 / 3)


def test_evaluate_on_a_small_run_matches_an_independent_computation():
    m = retrieval.evaluate(n=30, seed=5, max_queries=60, unseen_seeds=(6, 7, 8))
    db = retrieval.draw_database(30, 5)
    q = POOL.heldout[:60]
    d2 = ((POOL.digits.images[q].reshape(60, 1, -1).astype(float) - db.images.reshape(1, 30, -1)) ** 2).sum(-1)
    assert m["pixel_nn_top1"] == pytest.approx(np.mean(db.labels[d2.argmin(1)] == POOL.digits.labels[q]))
    for key in (
        "lab_top1_class_agreement",
        "top1_class_agreement",
        "unseen_db_top1_class_agreement",
        "unseen_digits_db_top1_class_agreement",
    ):
        assert 0.0 <= m[key] <= 1.0
    assert 0 < m["lab_mse"] < 0.2 and 0 < m["mse"] < 0.2
    assert m["top1_class_agreement"] > m["pixel_nn_top1"]  # the class-aware model beats pixel matching


# ---- bad input -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call,words",
    [
        (lambda: retrieval.draw_database(0), "database size N"),
        (lambda: retrieval.draw_database(4001), "1 to 4000"),
        (lambda: retrieval.draw_database(2.5), "whole number"),
        (lambda: retrieval.draw_database(None), "whole number"),
        (lambda: retrieval.hard_lookup(retrieval.draw_database(10), 10), "0 to 9"),
        (lambda: retrieval.soft_lookup(retrieval.draw_database(10), d=0), "key dimension d"),
        (lambda: retrieval.soft_lookup(retrieval.draw_database(10), scale=-1), "scale"),
        (lambda: retrieval.multi_lookup(retrieval.draw_database(10), num_q=0), "num_q"),
        (lambda: retrieval.multi_lookup(retrieval.draw_database(10), num_q=10**6), "num_q"),
        (lambda: retrieval.heldout_query(1000), "0 to 999"),
        (
            lambda: retrieval.trained_lookup("lab", np.zeros((28, 27), np.uint8), retrieval.draw_database(10)),
            "(28, 28)",
        ),
        (
            lambda: retrieval.trained_lookup("transformer", np.zeros((28, 28), np.uint8), retrieval.draw_database(10)),
            "lab, cnn",
        ),
    ],
)
def test_bad_input_raises_a_typed_error_naming_what_is_accepted(call, words):
    with pytest.raises(InputError) as e:
        call()
    assert words in str(e.value)
