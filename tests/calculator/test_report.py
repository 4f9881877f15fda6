"""attention.calculator.report: the calculator driven by text, with a JSON result and an HTML report."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attention.calculator.report import TABLE_MAX, compute, report, stale_html, to_html, to_json
from attention.calculator.settings import Settings
from attention.errors import InputError


def _direct(n: int, m: int, d: int = 4, seed: int = 0, heads: int = 1):
    rng = np.random.default_rng(seed)
    matrices = {"Q": rng.normal(size=(n, d)), "K": rng.normal(size=(m, d)), "V": rng.normal(size=(m, d))}
    return compute(matrices, Settings(heads=heads))


def test_json_holds_every_step_with_masked_entries_as_null():
    j = to_json(compute({"Q": "1 0; 0 1; 1 1", "K": "1 0; 0 1; 2 2", "V": "1; 2; 3"}, Settings(mask_mode="causal")))
    assert j["masked"][0][0][1] is None and j["masked"][0][2][2] is not None
    assert np.array(j["weights"]).shape == (1, 3, 3) and np.array(j["output"]).shape == (3, 1)
    assert j["mask"] == [[1, 0, 0], [1, 1, 0], [1, 1, 1]] and j["checks"][0]["ok"]


def test_json_of_the_x_mode_adds_the_projections():
    x, w = "1 2; 3 4", "1 0; 0 1"
    j = to_json(compute({"X": x, "W_q": w, "W_k": w, "W_v": "2 0; 0 2"}, mode="x"))
    np.testing.assert_allclose(j["Q"], [[1, 2], [3, 4]])
    np.testing.assert_allclose(j["V"], [[2, 4], [6, 8]])
    assert len(j["checks"]) == 2


def test_small_report_has_a_table_per_matrix_with_its_numbers():
    r = compute({"Q": "1 0", "K": "1 0; 0 1", "V": "1; 3"}, Settings(scale_mode="none"))
    page = to_html(r)
    e = np.exp(1.0)
    assert f"<td>{e / (e + 1):.4f}</td>" in page  # softmax weight of key 1
    assert page.count("<table>") == 4  # scores, scaled, weights, output (no mask: no masked table)
    assert "qkv-note" not in page.split("</style>")[1]


def test_report_shows_minus_inf_for_masked_entries():
    page = to_html(compute({"Q": "1; 1", "K": "1; 1", "V": "1; 1"}, Settings(mask_mode="causal")))
    assert "−inf" in page and "striped" in page


@pytest.mark.parametrize("n, tables", [(TABLE_MAX, True), (TABLE_MAX + 1, False)])
def test_matrices_over_table_max_are_heatmaps_without_tables(n, tables):
    r = _direct(n, n, heads=2)
    page = to_html(r)
    assert ("<table>" in page) is tables
    assert page.count("<img") == to_html(r, table_max=None).count("<img")  # every heatmap stays
    assert (f"{n} x {n}: matrices over {TABLE_MAX} rows" in page) is not tables


def test_only_the_big_matrices_lose_their_tables():
    r = _direct(2, 20, d=2)  # scores 2 x 20 lose their tables, output 2 x 2 keeps its
    page = to_html(r)
    assert page.count("<table>") == 1 and "2 x 20, no table" in page


def test_a_big_report_is_much_smaller_than_one_with_every_table():
    r = _direct(64, 64, heads=4)
    small, full = to_html(r), to_html(r, table_max=None)
    assert len(small) * 4 < len(full)
    assert full.count("<table>") > 0 and small.count("<table>") == 0


def test_report_lists_checks_and_notes_as_markdown():
    r = compute({"Q": "0 0; 0 0", "K": "1 2; 3 4", "V": "1; 3"}, Settings(mask_mode="causal"))
    checks, notes, page = report(r)
    assert checks.startswith("- ") and "scaled_dot_product_attention" in checks
    assert re.search(r"^- .*running mean", notes, re.M)
    assert page == to_html(r)


def test_run_rejects_unknown_settings_naming_the_accepted_ones():
    with pytest.raises(InputError, match="default, none, custom"):
        compute({"Q": "1", "K": "1", "V": "1"}, Settings(scale_mode="sqrt"))
    with pytest.raises(InputError, match="missing matrix V"):
        compute({"Q": "1", "K": "1"})


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(heads="abc"), "heads must be a whole number from 1 to 64, got 'abc'"),
        (dict(heads=float("nan")), "heads must be a whole number"),
        (dict(heads=1.5), "heads must be a whole number"),
        (dict(heads=0), "heads = 0 is out of range"),
        (dict(seed=-1, dropout=0.5), "the dropout seed = -1 is out of range"),
        (dict(seed=float("inf")), "the dropout seed must be a whole number"),
    ],
)
def test_run_refuses_heads_and_seeds_that_are_not_whole_numbers_in_range(kw, fragment):
    with pytest.raises(InputError) as e:
        compute({"Q": "1 0; 0 1", "K": "1 0; 0 1", "V": "1 2; 2 3"}, Settings(**kw))
    assert fragment in str(e.value)


def test_the_stale_note_quotes_the_error_and_says_the_results_are_old():
    note = stale_html("X: '<b>' (row 1, column 1) is not a number")
    assert "'&lt;b>'" in note and "'<b>" not in note  # the visitor's text is escaped (errors.html_text)
    assert "previous valid input" in note and "qkv-stale-box" in note
