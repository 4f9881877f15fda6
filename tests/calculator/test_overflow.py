"""attention.calculator on numbers near float64's limits: exact (checked against an oracle in Python's
arbitrary-precision `decimal`), or the overflowing step and entries named in `notes`, never a silent
wrong answer; the torch cross-check never reports a NaN difference."""

from __future__ import annotations

import json
from decimal import Decimal, getcontext

import numpy as np
import pytest

from attention.calculator import Settings, attend, attend_from_x
from attention.calculator.arithmetic import WIDE
from attention.calculator.report import compute, report, to_json
from attention.errors import InputError

needs_wide = pytest.mark.skipif(WIDE is None, reason="no extended-precision float type on this machine")


def decimal_attention(Q, K, V, scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Oracle: one-head attention with every product, sum, exp and division in 60-digit decimals
    (exponents to 1e999999, so nothing overflows): weights (n, m), output (n, d_v) as float64."""
    getcontext().prec = 60
    Q, K, V = ([[Decimal(float(x)) for x in row] for row in np.asarray(a, float)] for a in (Q, K, V))
    s = Decimal(1) / Decimal(len(Q[0])).sqrt() if scale is None else Decimal(scale)
    weights = []
    for q in Q:
        row = [s * sum(a * b for a, b in zip(q, k)) for k in K]
        top = max(row)
        e = [(x - top).exp() for x in row]
        weights.append([x / sum(e) for x in e])
    out = [[sum(w * v[j] for w, v in zip(wr, V)) for j in range(len(V[0]))] for wr in weights]
    return np.array([[float(x) for x in r] for r in weights]), np.array([[float(x) for x in r] for r in out])


@needs_wide
@pytest.mark.parametrize(
    "Q, K, V",
    [
        ([[1e200, 1], [1, 1]], [[1e200, 1], [1, 1]], np.eye(2)),  # float64: weights [0, 1]; exact [1, 0]
        (np.full((2, 2), 1e308), np.full((2, 2), 1e308), np.eye(2)),  # float64: a row summing to 0
        (np.full((64, 64), 1e300), np.full((64, 64), 1e300), np.ones((64, 64))),  # float64: output all 0
        ([[1e200, -1e200], [3, 1]], [[1e200, 1e200], [-1e200, 2e200]], [[1, 2], [3, 4]]),  # mixed signs
        ([[1e160, 0], [0, 1e160]], [[1e160, 1], [1e160, 2]], [[5, 0], [0, 5]]),  # ties differ by a few
    ],
)
def test_overflowing_scores_give_the_exact_weights_and_output_and_a_note(Q, K, V):
    s = attend(Q, K, V)
    w, out = decimal_attention(Q, K, V)
    np.testing.assert_allclose(s.weights[0], w, atol=1e-12)
    np.testing.assert_allclose(s.output, out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.weights.sum(-1), 1.0)
    assert any("exceed float64's largest number" in n and "query 0, key " in n for n in s.notes)


@needs_wide
def test_64_by_64_of_1e300_averages_v_exactly():
    big = np.full((64, 64), 1e300)
    assert np.all(attend(big, big, np.ones((64, 64))).output == 1.0)
    np.testing.assert_allclose(attend(big, big, big, Settings(heads=4)).output, 1e300)


@needs_wide
def test_an_output_beyond_float64_is_named_with_its_size():
    zero = Settings(scale_mode="custom", scale=0.0)
    s = attend(np.ones((1, 1)), np.ones((2, 1)), [[1.5e308], [1.5e308]], zero)  # exact 1.5e308
    assert np.all(s.output == 1.5e308) and s.notes[0].startswith("Every row")
    s = attend([[1.0], [0.0]], [[1.0], [0.0]], [[1.7e308], [1.7e308]], Settings(scale_mode="none"))
    assert np.isfinite(s.output).all()  # a weighted mean of two equal values stays in range
    s = attend([[1.0]], [[1.0]], [[1e308, 1e308]], Settings(scale_mode="none"))
    assert np.all(s.output == 1e308)


def test_a_projection_beyond_float64_is_refused_naming_it():
    with pytest.raises(InputError, match=r"Q = X W_q exceeds float64's largest number .* row 0, column 0"):
        attend_from_x(np.full((2, 2), 1e200), np.full((2, 2), 1e200), np.eye(2), np.eye(2))


@needs_wide
def test_the_torch_check_names_the_rows_it_skips_and_is_never_nan():
    r = compute({"Q": "1e200 1; 1 1", "K": "1e200 1; 1 1", "V": "1 0; 0 1"})
    checks, notes, html = report(r)
    assert "= nan" not in checks.lower() and "row 0 skipped" in checks and "overflows" in checks
    assert r.checks[0].ok  # row 1 compared, and equal
    assert "query 0, key 0 (about 1.0e+400)" in notes
    r = compute({"Q": "1e200 1; 1e200 1", "K": "1e200 1; 1 1", "V": "1 0; 0 1"})
    assert r.checks[0].ok is None and "does not apply" in r.checks[0].message
    text = json.dumps(to_json(r), allow_nan=False)  # strict JSON: "inf" as text, named in the legend
    assert '"inf"' in text and "beyond float64" in to_json(r)["legend"]


def test_ordinary_inputs_stay_in_float64_and_have_no_overflow_note():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    s = attend(Q, K, V)
    assert s.weights.dtype == np.float64 and not any("float64" in n for n in s.notes)
    np.testing.assert_allclose(s.weights[0], decimal_attention(Q, K, V)[0], atol=1e-14)


def test_huge_entries_are_written_in_e_notation_and_read_back():
    from attention.calculator.matrices import format_matrix, format_number, parse_matrix

    assert format_number(1e200) == "1e+200" and format_number(-2.5e7) == "-2.5e+07" and format_number(0.5) == "0.5"
    np.testing.assert_allclose(parse_matrix(format_matrix(np.array([[1e200, 1.0]]))), [[1e200, 1.0]])


def test_a_score_beyond_float64_is_drawn_at_the_bright_end():
    from attention.calculator.plots import heatmap

    img = heatmap(np.array([[np.inf, 1e200], [1e200, 2.0]]), target=40, max_cell=20)
    assert (img[5, 5] == img[5, 25]).all() and not (img[5, 5] == img[25, 25]).all()  # inf as the max, not the min
