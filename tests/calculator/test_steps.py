"""attention.calculator: attention step by step, checked against PyTorch, and its presets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention.calculator import Settings, attend, attend_from_x, causal_mask, merge_heads, softmax, split_heads
from attention.calculator.presets import PRESETS
from attention.calculator.reference import TOLERANCE, check_mha, check_sdpa, mha_output, sdpa_output
from attention.errors import InputError


def rand(rng, *shape):
    return rng.normal(size=shape)


# --- the steps ------------------------------------------------------------------------------
def test_steps_follow_the_formula_for_one_head():
    rng = np.random.default_rng(0)
    Q, K, V = rand(rng, 3, 4), rand(rng, 5, 4), rand(rng, 5, 2)
    s = attend(Q, K, V)
    np.testing.assert_allclose(s.scores[0], Q @ K.T)
    np.testing.assert_allclose(s.scaled[0], Q @ K.T / 2.0)  # 1/sqrt(d_head = 4)
    e = np.exp(s.scaled[0])
    np.testing.assert_allclose(s.weights[0], e / e.sum(1, keepdims=True))
    np.testing.assert_allclose(s.output, s.weights[0] @ V)
    assert s.scores.shape == s.weights.shape == (1, 3, 5) and s.output.shape == (3, 2)


def test_heads_split_columns_evenly_and_concatenate_back():
    rng = np.random.default_rng(1)
    Q, K, V = rand(rng, 3, 6), rand(rng, 4, 6), rand(rng, 4, 4)
    s = attend(Q, K, V, Settings(heads=2))
    assert s.weights.shape == (2, 3, 4)
    np.testing.assert_allclose(s.scores[1], Q[:, 3:] @ K[:, 3:].T)
    one_head = Settings(scale_mode="custom", scale=1 / np.sqrt(3))  # head 1's own d_head
    np.testing.assert_allclose(s.output[:, 2:], attend(Q[:, 3:], K[:, 3:], V[:, 2:], one_head).output)
    np.testing.assert_array_equal(merge_heads(split_heads(Q, 3)), Q)


def test_scale_none_means_one_over_sqrt_d_head_and_custom_scale_is_used():
    rng = np.random.default_rng(2)
    Q, K, V = rand(rng, 2, 8), rand(rng, 3, 8), rand(rng, 3, 2)
    assert attend(Q, K, V, Settings(heads=2)).scale == pytest.approx(0.5)
    custom = attend(Q, K, V, Settings(scale_mode="custom", scale=0.25))
    np.testing.assert_allclose(custom.scaled, 0.25 * custom.scores)
    np.testing.assert_allclose(attend(Q, K, V, Settings(scale_mode="none")).scaled, custom.scores)


def test_causal_mask_puts_minus_inf_on_future_positions_and_rows_sum_to_one():
    rng = np.random.default_rng(3)
    s = attend(rand(rng, 4, 2), rand(rng, 4, 2), rand(rng, 4, 3), Settings(mask_mode="causal"))
    future = np.triu(np.ones((4, 4), bool), 1)
    assert np.isneginf(s.masked[0][future]).all() and np.isfinite(s.masked[0][~future]).all()
    assert (s.weights[0][future] == 0).all()
    np.testing.assert_allclose(s.weights.sum(-1), 1.0)
    assert s.weights[0, 0, 0] == 1.0  # the first query sees only the first key


def test_custom_mask_zero_blocks_one_allows():
    rng = np.random.default_rng(4)
    mask = np.array([[1, 0, 1], [0, 1, 1]])
    s = attend(rand(rng, 2, 2), rand(rng, 3, 2), rand(rng, 3, 2), Settings(mask_mode="custom", mask=mask))
    assert (s.weights[0][mask == 0] == 0).all() and (s.weights[0][mask == 1] > 0).all()


def test_fully_masked_row_is_zero_with_a_note_not_nan():
    rng = np.random.default_rng(5)
    mask = np.array([[1, 1, 1], [0, 0, 0]])
    s = attend(rand(rng, 2, 2), rand(rng, 3, 2), rand(rng, 3, 2), Settings(mask_mode="custom", mask=mask))
    assert np.isfinite(s.weights).all() and np.isfinite(s.output).all()
    assert (s.weights[0, 1] == 0).all() and (s.output[1] == 0).all()
    assert list(s.empty_rows) == [1]
    assert any("row 1" in n and "no key" in n for n in s.notes)
    assert check_sdpa(s).ok  # torch defines the same result


def test_softmax_is_stable_for_huge_scores():
    w = softmax(np.array([[1000.0, 1001.0, -np.inf], [-1e308, 0.0, 5.0]]))
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w.sum(-1), 1.0)
    np.testing.assert_allclose(w[0, :2], [1 / (1 + np.e), np.e / (1 + np.e)])


def test_dropout_is_seeded_and_off_by_default():
    rng = np.random.default_rng(6)
    Q, K, V = rand(rng, 6, 4), rand(rng, 6, 4), rand(rng, 6, 4)
    plain = attend(Q, K, V)
    assert plain.dropped is plain.weights and plain.dropout == 0
    a, b = attend(Q, K, V, Settings(dropout=0.5, seed=7)), attend(Q, K, V, Settings(dropout=0.5, seed=7))
    np.testing.assert_array_equal(a.dropped, b.dropped)
    assert not np.array_equal(a.dropped, attend(Q, K, V, Settings(dropout=0.5, seed=8)).dropped)
    kept = a.dropped != 0
    np.testing.assert_allclose(a.dropped[kept], 2 * a.weights[kept])
    assert 0 < kept.mean() < 1
    assert any("Dropout" in n for n in a.notes)


def test_equal_scores_with_causal_mask_give_running_means():
    V = np.array([[6.0, 0.0], [0.0, 6.0], [3.0, 3.0], [9.0, 0.0]])
    s = attend(np.zeros((4, 3)), np.ones((4, 3)), V, Settings(mask_mode="causal"))
    np.testing.assert_allclose(s.output, np.cumsum(V, 0) / np.arange(1, 5)[:, None])
    assert any("running mean" in n for n in s.notes)


def custom_mask(m) -> dict:
    return {"mask_mode": "custom", "mask": m}


# --- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, kwargs, words",
    [
        ((np.ones((5, 3)), np.ones((4, 2)), np.ones((4, 2))), {}, ["5 x 3", "4 x 2", "same number of columns"]),
        ((np.ones((2, 2)), np.ones((4, 2)), np.ones((3, 2))), {}, ["4 x 2", "3 x 2", "same number of rows"]),
        ((np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2))), {"heads": 2}, ["2 heads", "d = 3", "evenly"]),
        ((np.ones((2, 2)), np.ones((4, 2)), np.ones((4, 2))), custom_mask(np.ones((4, 2))), ["4 x 2", "2 x 4"]),
        ((np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2))), custom_mask([[1, 2], [0, 1]]), ["0", "1"]),
        ((np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2))), {"mask_mode": "sideways"}, ["causal"]),
        ((np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2))), {"heads": 0}, ["heads"]),
        ((np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2))), {"dropout": 1.0}, ["dropout"]),
        ((np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2))), dict(scale_mode="custom", scale=np.nan), ["scale"]),
        ((np.array([[1.0, np.nan]]), np.ones((2, 2)), np.ones((2, 2))), {}, ["Q", "finite"]),
        ((np.ones((65, 2)), np.ones((2, 2)), np.ones((2, 2))), {}, ["65 x 2", "64 x 64"]),
        ((np.ones((0, 2)), np.ones((2, 2)), np.ones((2, 2))), {}, ["empty"]),
    ],
)
def test_bad_input_raises_input_error_naming_the_problem(args, kwargs, words):
    with pytest.raises(InputError) as e:
        attend(*args, Settings(**kwargs))  # a setting is refused where Settings is built
    for w in words:
        assert w in str(e.value)


def test_projection_shape_errors_name_both_shapes():
    X = np.ones((3, 4))
    with pytest.raises(InputError, match=r"X is 3 x 4 and W_k is 3 x 4"):
        attend_from_x(X, np.ones((4, 4)), np.ones((3, 4)), np.ones((4, 4)))
    with pytest.raises(InputError, match=r"W_o is 3 x 4.*3 x 2"):
        attend_from_x(X, np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 2)), np.ones((3, 4)))


# --- against PyTorch ---------------------------------------------------------------------------
@st.composite
def problems(draw):
    heads = draw(st.integers(1, 4))
    n, m = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    d, dv = heads * draw(st.integers(1, 4)), heads * draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["none", "causal", "random"]))
    mask = (rng.random((n, m)) < 0.6).astype(float) if kind == "random" else None
    scale = draw(st.one_of(st.none(), st.floats(0.01, 3.0)))
    scale_mode, mask_mode = "default" if scale is None else "custom", "custom" if kind == "random" else kind
    s = Settings(heads=heads, scale_mode=scale_mode, scale=scale, mask_mode=mask_mode, mask=mask)
    return rng.normal(size=(n, d)) * 3, rng.normal(size=(m, d)) * 3, rng.normal(size=(m, dv)), s


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_attend_matches_torch_sdpa(problem):
    Q, K, V, s = problem
    s = attend(Q, K, V, s)
    np.testing.assert_allclose(s.output, sdpa_output(s), atol=TOLERANCE, rtol=0)
    rows_seen = s.mask.any(1) if s.mask is not None else np.ones(len(Q), bool)
    np.testing.assert_allclose(s.weights.sum(-1)[:, rows_seen], 1.0)
    assert check_sdpa(s).ok


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 3), st.booleans(), st.booleans(), st.integers(0, 10**6))
def test_attend_from_x_matches_torch_multihead_attention(heads, n, per_head, with_wo, causal, seed):
    rng = np.random.default_rng(seed)
    e = heads * per_head
    X, *W = rng.normal(size=(n, e)), *(rng.normal(size=(e, e)) for _ in range(4))
    s = Settings(heads=heads, mask_mode="causal" if causal else "none")
    p = attend_from_x(X, *W[:3], W[3] if with_wo else None, s)
    np.testing.assert_allclose(p.output, mha_output(p), atol=TOLERANCE, rtol=0)
    assert check_mha(p).ok


def test_mha_check_says_when_it_does_not_apply():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(3, 4))
    p = attend_from_x(X, rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 4)))
    c = check_mha(p)
    assert c.ok is None and "does not apply" in c.message and "4 x 4" in c.message
    assert check_sdpa(p.attention).ok


def test_causal_mask_helper_is_lower_triangular_top_left():
    np.testing.assert_array_equal(causal_mask(2, 3), [[1, 0, 0], [1, 1, 0]])


# --- presets ---------------------------------------------------------------------------------
def run_preset(p):
    m = p.matrices
    if p.mode == "direct":
        return attend(m["Q"], m["K"], m["V"], p.settings), None
    x = attend_from_x(m["X"], m["W_q"], m["W_k"], m["W_v"], m.get("W_o"), p.settings)
    return x.attention, x


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_runs_and_matches_torch(name):
    s, x = run_preset(PRESETS[name])
    assert check_sdpa(s).ok
    if x is not None:
        assert check_mha(x).ok


def test_binary_preset_has_the_documented_shapes():
    p = PRESETS["Binary queries, identity keys"]
    Q, K, V = p.matrices["Q"], p.matrices["K"], p.matrices["V"]
    assert Q.shape == (5, 3) and K.shape == (4, 3) and V.shape == (4, 3)
    assert set(np.unique(Q)) <= {0.0, 1.0}
    np.testing.assert_array_equal(K, np.eye(4, 3))
    np.testing.assert_array_equal(V.ravel(), 4.5 * np.arange(12))
    s, _ = run_preset(p)
    assert s.weights[0, 0].argmax() == 0 and s.weights[0, 2].argmax() == 2  # e_i finds key i


def test_bag_of_words_preset_outputs_running_means():
    p = PRESETS["Causal bag of words (running mean)"]
    s, _ = run_preset(p)
    V = p.matrices["V"]
    np.testing.assert_allclose(s.output, np.cumsum(V, 0) / np.arange(1, len(V) + 1)[:, None])


def test_two_head_preset_uses_two_heads_and_w_o():
    p = PRESETS["Two heads with an output projection"]
    _, x = run_preset(p)
    assert x.attention.heads == 2 and x.w_o is not None
    np.testing.assert_allclose(x.output, x.concat @ p.matrices["W_o"])
