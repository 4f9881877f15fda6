"""Spec of attention.vit.engine.query: one query type, read and written in one place; tokens the model has."""

from __future__ import annotations

import pytest

from attention.errors import InputError
from attention.vit.engine import query


@pytest.mark.parametrize(
    "value, want",
    [
        ("cls", "cls"),
        (" CLS ", "cls"),
        ("reg2", "reg2"),
        ("pool", "pool"),
        ("dist", "dist"),
        ("3,5", (3, 5)),
        ("(3, 5)", (3, 5)),
        ([3, 5], (3, 5)),
        ((3.0, 5.0), (3, 5)),
    ],
)
def test_every_spelling_reads_as_one_form_and_writes_back(value, want):
    q = query.parse(value)
    assert q == want
    assert query.parse(query.to_text(q)) == q and query.parse(query.to_json(q)) == q


@pytest.mark.parametrize("value", ["class", "5", "-1,2", "1,2,3", "a,b", None, 3, "reg"])
def test_anything_else_is_refused_saying_what_is_accepted(value):
    with pytest.raises(InputError, match="is not accepted; use a token name .* or a patch as ROW,COL"):
        query.parse(value)


def test_empty_fields_mean_the_models_own_token_and_half_a_patch_is_refused():
    assert query.from_fields(None, float("nan")) is None
    assert query.from_fields("", " ", "reg0") == "reg0"
    assert query.from_fields("2", 3.0) == (2, 3)
    with pytest.raises(InputError, match="Give both"):
        query.from_fields(2, None)


def test_index_knows_the_models_own_tokens_and_names_what_it_has():
    names = ("cls", "reg0", "reg1")
    assert query.index("cls", (2, 3), names) == 0
    assert query.index("reg1", (2, 3), names) == 2
    assert query.index((1, 2), (2, 3), names) == 3 + 5
    assert query.index("pool", (2, 3), (), pool=True) == -1
    with pytest.raises(InputError, match=r"no 'dist' token; it has cls, reg0, reg1 and patches"):
        query.index("dist", (2, 3), names)
    with pytest.raises(InputError, match=r"no 'cls' token; it has no named tokens, only patches"):
        query.index("cls", (2, 3), ())
    with pytest.raises(InputError, match=r"Patch \(2, 0\) is off the 2x3 grid"):
        query.index((2, 0), (2, 3), names)


def test_the_default_is_cls_else_the_pool_else_the_centre_patch_never_a_register():
    assert query.default(["cls", "reg0"], (4, 6)) == "cls"
    assert query.default(["pool"], (4, 6)) == "pool"
    assert query.default(["reg0", "reg1"], (4, 6)) == (2, 3)
    assert query.label("reg3") == "register 3" and query.label((1, 2)) == "patch (row 1, col 2)"


def test_extracts_index_helpers_follow_the_same_rules():
    from attention.vit.engine.extract import norm_query, token_index

    assert norm_query(None) is None and norm_query(" reg1 ") == "reg1"
    assert token_index(None, (2, 3), 1) == 0 and token_index((1, 1), (2, 3), 1) == 5
    assert token_index(None, (2, 3), 2, ("reg0", "reg1")) == 2 + 4  # register-only: the centre patch
    with pytest.raises(InputError, match="no 'cls' token; it has reg0, reg1 and patches"):
        token_index("cls", (2, 3), 2, ("reg0", "reg1"))
