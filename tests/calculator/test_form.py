"""attention.calculator.form: the calculator's form labels, presets in the form, text <-> tables."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attention.calculator import Settings, attend_from_x
from attention.calculator.form import (
    MASK_LABELS,
    MATRICES,
    MODE_ABOUT,
    MODE_LABELS,
    SCALE_LABELS,
    about,
    custom_mask_start,
    diagnose,
    first_matrices,
    form_values,
    needed,
    preset_form,
    read_settings,
    readable,
    run_form,
    table,
)
from attention.calculator.matrices import parse_matrix
from attention.calculator.presets import PRESETS
from attention.calculator.report import compute
from attention.errors import InputError

DIRECT_LABEL, X_LABEL = list(MODE_LABELS)


def test_labels_cover_every_setting_run_accepts():
    for scale in SCALE_LABELS:
        for mask in MASK_LABELS:
            s = read_settings({"scale_mode": scale, "scale": 0.5, "mask_mode": mask, "mask": "1 0; 1 1"})
            assert (s.scale_mode, s.mask_mode) == (SCALE_LABELS[scale], MASK_LABELS[mask])
            r = run_form({"Q": "1 0; 0 1", "K": "1 0; 0 1", "V": "1; 2"}, DIRECT_LABEL, s)
            assert r.steps.weights.shape == (1, 2, 2)
            assert read_settings(form_values(s)) == s  # what the form shows reads back as the same settings


def test_the_mode_decides_which_matrices_are_read():
    assert needed(DIRECT_LABEL, use_wo=True) == ("Q", "K", "V")
    assert needed(X_LABEL) == ("X", "W_q", "W_k", "W_v") and needed(X_LABEL, True)[-1] == "W_o"
    form = {"Q": "1", "K": "1", "V": "5", "X": "not read", "W_q": "", "W_k": "", "W_v": "", "W_o": ""}
    assert run_form(form, DIRECT_LABEL, Settings()).steps.output.tolist() == [[5.0]]


def test_w_o_is_used_only_when_ticked():
    rng = np.random.default_rng(0)
    x, wq, wk, wv, wo = (rng.normal(size=(3, 2)), *(rng.normal(size=(2, 2)) for _ in range(3)), 2 * np.eye(2, 3))
    form = dict(zip(MATRICES["x"], (x, wq, wk, wv, wo)))
    plain, projected = (run_form(form, X_LABEL, Settings(), use_wo=u).projected for u in (False, True))
    assert plain.w_o is None and plain.output.shape == (3, 2)
    np.testing.assert_allclose(projected.output, 2 * np.hstack([plain.output, np.zeros((3, 1))]))


def test_unknown_labels_name_the_offered_ones():
    with pytest.raises(InputError, match="causal"):
        read_settings({"mask_mode": "diagonal"})
    with pytest.raises(InputError, match="Q, K, V directly"):
        run_form({"Q": "1", "K": "1", "V": "1"}, "sideways", Settings())


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_preset_in_the_form_computes_what_the_preset_describes(name):
    p, f = PRESETS[name], preset_form(PRESETS[name])
    assert f["description"] == p.description and f["use_wo"] == ("W_o" in p.matrices)
    assert read_settings(f["settings"]) == p.settings
    r = run_form(f["matrices"], f["mode_label"], read_settings(f["settings"]), use_wo=f["use_wo"])
    expected = compute(p.matrices, p.settings, mode=p.mode)
    np.testing.assert_allclose(r.steps.weights, expected.steps.weights)
    if "W_o" in p.matrices:
        m = p.matrices
        direct = attend_from_x(m["X"], m["W_q"], m["W_k"], m["W_v"], m["W_o"], p.settings)
        np.testing.assert_allclose(r.projected.output, direct.output)


def test_table_shows_the_numbers_and_numbers_the_columns():
    a = np.array([[1.0, -0.5, 2e-5], [3.25, 0.0, 7.0]])
    t = table(a)
    assert t["headers"] == ["0", "1", "2"] and t["value"][0] == ["1", "-0.5", "0"]
    np.testing.assert_allclose(parse_matrix(t["value"]), np.round(a, 4))


def test_first_matrices_takes_each_name_from_the_first_preset_having_it():
    start = first_matrices(PRESETS)
    assert set(start) == {n for ns in MATRICES.values() for n in ns}
    first = next(iter(PRESETS.values()))
    for n, a in first.matrices.items():
        assert start[n] is a


def test_readable_keeps_what_parses_and_drops_the_rest():
    out = readable({"Q": "1 2; 3 4", "K": "1 x", "V": [["1", "2"], ["", ""]], "X": ""})
    assert set(out) == {"Q", "V"}
    np.testing.assert_array_equal(out["V"], [[1, 2]])


def test_a_custom_mask_starts_from_the_causal_pattern_of_the_current_shapes():
    custom = "custom 0/1"
    m = custom_mask_start(custom, "", DIRECT_LABEL, {"Q": "1; 2", "K": "1; 2; 3"})
    np.testing.assert_array_equal(parse_matrix(m), [[1, 0, 0], [1, 1, 0]])
    m = custom_mask_start(custom, "  ", X_LABEL, {"X": np.ones((3, 5))})
    np.testing.assert_array_equal(parse_matrix(m), np.tril(np.ones((3, 3))))


@pytest.mark.parametrize(
    "mask_label, mask, matrices",
    [
        ("causal", "", {"Q": "1", "K": "1"}),  # not the custom mask
        ("custom 0/1", "1 0; 1 1", {"Q": "1", "K": "1"}),  # the visitor's mask is kept
        ("custom 0/1", "", {"Q": "1 oops", "K": "1"}),  # no shape to start from
    ],
)
def test_no_starting_mask(mask_label, mask, matrices):
    assert custom_mask_start(mask_label, mask, DIRECT_LABEL, matrices) is None


GOOD = {"Q": "1 0; 0 1", "K": "1 0; 0 1", "V": "1; 2"}
GOOD_X = {"X": "1 2; 3 4", "W_q": "1 0; 0 1", "W_k": "1 0; 0 1", "W_v": "1 0; 0 1", "W_o": "1; 1"}


@pytest.mark.parametrize(
    "changes, settings, fields, words",
    [
        ({"K": "1 0; 0 x1"}, {}, ("K",), "'x1'"),  # a bad cell: only its matrix
        ({"V": ""}, {}, ("V",), "empty"),
        ({"Q": "1 0 0; 0 1 0"}, {}, ("Q", "K"), "same number of columns"),  # a mismatch: both sides
        ({"V": "1; 2; 3"}, {}, ("K", "V"), "same number of rows"),
        ({}, {"heads": 3}, ("heads",), "3 heads must split"),
        ({}, {"heads": 0}, ("heads",), "heads"),
        ({}, {"mask_mode": "custom 0/1", "mask": "1 0 1"}, ("mask",), "mask is 1 x 3"),
        ({}, {"mask_mode": "custom 0/1", "mask": "1 2; 1 1"}, ("mask",), "only 0"),
        ({}, {"mask_mode": "custom 0/1", "mask": ""}, ("mask",), "empty"),
        ({}, {"mask_mode": "diagonal"}, ("mask",), "custom 0/1"),
        ({}, {"scale_mode": "custom", "scale": None}, ("scale",), "custom scale is empty"),
        ({}, {"scale_mode": "custom", "scale": 1e7}, ("scale",), "the custom scale"),
        ({}, {"dropout": 1.5}, ("dropout",), "dropout"),
        ({}, {"seed": -1}, ("seed",), "seed"),
    ],
)
def test_diagnose_blames_only_the_inputs_at_fault(changes, settings, fields, words):
    message, blamed = diagnose({**GOOD, **changes}, DIRECT_LABEL, settings)
    assert blamed == fields and words in message
    with pytest.raises(InputError, match=re.escape(message)):  # the same words as the error the visitor sees
        run_form({**GOOD, **changes}, DIRECT_LABEL, read_settings(settings))


@pytest.mark.parametrize(
    "changes, use_wo, fields",
    [
        ({"W_k": "1 0 0; 0 1 0; 0 0 1"}, False, ("X", "W_k")),
        ({"W_q": "1 0 0; 0 1 0"}, False, ("W_q", "W_k")),
        ({"W_v": "1; oops"}, False, ("W_v",)),
        ({"W_o": "1 1"}, True, ("W_o",)),
        ({"W_o": "1 1"}, False, ()),  # W_o unticked: not read, so no failure
    ],
)
def test_diagnose_in_the_x_mode(changes, use_wo, fields):
    assert diagnose({**GOOD_X, **changes}, X_LABEL, {}, use_wo=use_wo)[1] == fields


def test_diagnose_of_a_valid_form_is_empty():
    assert diagnose(GOOD, DIRECT_LABEL, {}) == ("", ())


def test_about_follows_the_mode_the_visitor_picks():
    direct, x = PRESETS["Binary queries, identity keys"], PRESETS["Two heads with an output projection"]
    assert about(direct, DIRECT_LABEL) == direct.description and about(x, X_LABEL) == x.description
    assert about(direct, X_LABEL) == MODE_ABOUT["x"] and "X W_q" in about(direct, X_LABEL)
    assert about(x, DIRECT_LABEL) == MODE_ABOUT["direct"]
