"""The ViT tab's fields fitted to the visitor's pass (`ui.vit.fields.fit`): the rules its docstring states,
checked on a pass and a state described by hand (no model, no forward)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from attention.errors import InputError
from attention.ui.vit.fields import fit

DEPTH, HEADS, GRID = 12, 6, (14, 14)


def _pass(model: str = "dino_vits16", grid: tuple[int, int] = GRID):
    return SimpleNamespace(
        key=("digest", model, "auto"), num_layers=DEPTH, num_heads=HEADS, base=SimpleNamespace(grid=grid)
    )


def _state(model: str = "dino_vits16", grid: tuple[int, int] = GRID):
    return SimpleNamespace(key=("digest", model, "auto"), grid=grid)


def test_the_same_model_and_grid_keep_layer_head_and_query():
    assert fit(_pass(), _state(), 5, 2, 3, 4) == (5, 2, 3, 4)
    assert fit(_pass(), _state(), "5", 2.0, 3, 4) == (5, 2, 3, 4)  # whole numbers as a form sends them


def test_a_new_model_starts_at_its_last_layer():
    assert fit(_pass("deit_small"), _state("dino_vits16"), 3, 1, 2, 2) == (DEPTH - 1, 1, 2, 2)


def test_a_new_grid_goes_back_to_the_models_own_query():
    assert fit(_pass(grid=(16, 20)), _state(grid=GRID), 3, 1, 2, 2) == (3, 1, None, None)


def test_without_state_a_query_outside_the_grid_is_dropped_and_one_inside_kept():
    assert fit(_pass(), None, 3, 1, 14, 0) == (3, 1, None, None)  # row 14 of rows 0..13
    assert fit(_pass(), None, 3, 1, 13, 13) == (3, 1, 13, 13)


def test_layer_and_head_are_fitted_to_the_pass():
    assert fit(_pass(), _state(), 40, 9, None, None) == (DEPTH - 1, HEADS - 1, None, None)
    assert fit(_pass(), _state(), -1, None, None, None) == (-1, 0, None, None)  # -1: the last layer, as sent


def test_a_layer_that_is_not_a_whole_number_is_refused_by_name():
    with pytest.raises(InputError, match="Layer 'x'"):
        fit(_pass(), _state(), "x", 0, None, None)


def test_the_panels_trust_the_accepted_view_only_when_it_is_the_one_on_screen():
    from attention.ui.vit.fields import on_screen

    gd = dict(image="a.png", model="m", resolution="auto", layer=3, head=1, qrow=None, qcol=None, view="mean")
    assert on_screen(gd, "a.png", "m", "auto") is gd
    assert on_screen(gd, "b.png", "m", "auto") is None  # another image: the fields are read then
    assert on_screen(gd, "a.png", "other", "auto") is None and on_screen(None, "a.png", "m", "auto") is None
    assert on_screen(gd, "a.png", "m", "auto", ("layer", "threshold")) is None  # an example's: no style kept
