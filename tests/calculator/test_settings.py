"""attention.calculator.settings: one frozen Settings, checked where it is built, read by every step."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attention.calculator import Settings, attend
from attention.errors import FieldError


def test_values_as_a_form_sends_them_are_stored_checked():
    s = Settings(heads=2.0, scale_mode="custom", scale="0.5", mask_mode="custom", mask="1 0; 1 1", seed=3.0)
    assert (s.heads, s.scale, s.seed) == (2, 0.5, 3) and type(s.heads) is int and type(s.scale) is float
    assert s.mask == ((True, False), (True, True))
    assert Settings(mask="not read", scale=None).mask is None  # a mask or scale that is not chosen is not read


def test_settings_are_frozen_and_compare_by_value():
    s = Settings(mask_mode="custom", mask=np.array([[1, 0], [1, 1]]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.heads = 4
    assert s == Settings(mask_mode="custom", mask="1 0; 1 1") and hash(s) == hash(
        Settings(mask_mode="custom", mask=[[1, 0], [1, 1]])
    )
    assert s != Settings(mask_mode="causal")


@pytest.mark.parametrize(
    "kw, field, words",
    [
        ({"heads": 0}, "heads", "heads = 0 is out of range: expected 1 to 64"),
        ({"heads": 1.5}, "heads", "heads must be a whole number from 1 to 64"),
        ({"scale_mode": "sqrt"}, "scale", "use one of default, none, custom"),
        ({"scale_mode": "custom", "scale": None}, "scale", "the custom scale is empty"),
        ({"scale_mode": "custom", "scale": 2e6}, "scale", "expected -1e+06 to 1e+06"),
        ({"mask_mode": "diagonal"}, "mask", "use one of none, causal, custom"),
        ({"mask_mode": "custom", "mask": "1 2"}, "mask", "only 0 (blocked) and 1 (may attend); found 2"),
        ({"mask_mode": "custom", "mask": "1 x"}, "mask", "'x'"),
        ({"dropout": 1.0}, "dropout", "expected 0 to below 1"),
        ({"seed": -1}, "seed", "the dropout seed = -1 is out of range"),
    ],
)
def test_a_bad_setting_is_refused_where_it_is_built_naming_it_and_what_is_accepted(kw, field, words):
    with pytest.raises(FieldError) as e:
        Settings(**kw)
    assert e.value.fields == (field,) and words in str(e.value)


def test_scale_and_mask_resolve_against_the_shapes():
    assert Settings().scale_for(4) == 0.5 and Settings(scale_mode="none").scale_for(4) == 1.0
    assert Settings(scale_mode="custom", scale=-2).scale_for(4) == -2.0
    assert Settings().mask_for(2, 3) is None
    np.testing.assert_array_equal(Settings(mask_mode="causal").mask_for(2, 3), [[1, 0, 0], [1, 1, 0]])
    with pytest.raises(FieldError, match="the mask is 1 x 2 but the scores are 2 x 2") as e:
        attend(np.eye(2), np.eye(2), np.eye(2), Settings(mask_mode="custom", mask="1 0"))
    assert e.value.fields == ("mask",)
