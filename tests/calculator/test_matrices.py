"""attention.calculator.matrices: reading matrices as a learner types them, and writing them back."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attention.calculator.matrices import format_matrix, format_number, parse_matrix
from attention.errors import InputError


@pytest.mark.parametrize(
    "text",
    [
        "1 2\n3 4",
        "1 2; 3 4",
        "1,2;3,4",
        "1, 2\n3, 4",
        "[[1, 2], [3, 4]]",
        "[[1,2],[3,4]]",
        "  1   2 \n\n 3 4 \n",
        "1.0 2e0; 3 +4",
    ],
)
def test_accepted_text_forms_give_the_same_matrix(text):
    np.testing.assert_array_equal(parse_matrix(text), [[1, 2], [3, 4]])


def test_single_row_forms():
    np.testing.assert_array_equal(parse_matrix("1 -2 3.5"), [[1, -2, 3.5]])
    np.testing.assert_array_equal(parse_matrix("[1, -2, 3.5]"), [[1, -2, 3.5]])


def test_table_rows_with_blank_trailing_cells_are_accepted():
    np.testing.assert_array_equal(parse_matrix([["1", "2", ""], [3, "4", None], ["", "", ""]]), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(parse_matrix(np.array([[1.5, 2]])), [[1.5, 2]])


@pytest.mark.parametrize(
    "value, words",
    [
        ("1 2; 3 x", ["Q", "'x'", "row 1", "column 1", "not a number"]),
        ("1 2; 3", ["ragged", "row 0 has 2", "row 1 has 1"]),
        ("1 nan", ["nan", "finite"]),
        ("inf 1", ["inf", "finite"]),
        ("", ["empty"]),
        ("  ;\n ", ["empty"]),
        (None, ["empty"]),
        ([["1", ""], ["3", "4"]], ["blank", "row 0", "column 1"]),
        ("[[1, 2] oops [3, 4]]", ["oops"]),
        ("\n".join(["1"] * 65), ["65 x 1", "64 x 64"]),
    ],
)
def test_bad_text_raises_a_clear_input_error(value, words):
    with pytest.raises(InputError) as e:
        parse_matrix(value, "Q")
    for w in words:
        assert w in str(e.value)


def test_bound_is_configurable():
    assert parse_matrix(" ".join(["1"] * 100), max_size=None).shape == (1, 100)


def test_format_shows_minus_inf_and_trims_zeros():
    assert format_number(-np.inf) == "-inf"
    assert format_number(2.50) == "2.5" and format_number(-0.00001) == "0" and format_number(3.0) == "3"


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 10**6))
def test_format_then_parse_round_trips(r, c, seed):
    a = np.round(np.random.default_rng(seed).normal(size=(r, c)) * 10, 4)
    np.testing.assert_allclose(parse_matrix(format_matrix(a)), a)
