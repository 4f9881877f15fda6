"""Planted digit canvases (attention/planted.py): held-out MNIST digits in known cells, each digit's ink and
square known, the same seed always the same canvas."""

from __future__ import annotations

import numpy as np
import pytest

from attention import mnist
from attention.errors import InputError
from attention.planted import CELL, INK, compose, layout, planted, planted_batch


def test_each_digit_sits_in_its_cell_with_its_own_ink_and_nothing_else_on_the_canvas():
    p = planted(n_digits=3, cells=(3, 4), seed=5)
    assert p.image.shape == (84, 112) and p.image.dtype == np.uint8
    assert p.masks.shape == (3, 84, 112) and p.masks.dtype == bool
    assert p.boxes.shape == (3, 4) and len(set(p.classes.tolist())) == 3 and len(set(p.cells.tolist())) == 3
    for k in range(3):
        r, c = divmod(int(p.cells[k]), 4)
        assert p.boxes[k].tolist() == [CELL * r, CELL * c, CELL * (r + 1), CELL * (c + 1)]
        top, left, bottom, right = p.boxes[k]
        inside = np.zeros(p.image.shape, bool)
        inside[top:bottom, left:right] = True
        assert p.masks[k].any() and not (p.masks[k] & ~inside).any()
        assert np.array_equal(p.masks[k][inside], p.image[inside] > INK)
    covered = np.zeros(p.image.shape, bool)
    for top, left, bottom, right in p.boxes:
        covered[top:bottom, left:right] = True
    assert (p.image[~covered] == 0).all()


def test_digits_are_the_split_s_held_out_ones_of_their_class_unless_asked_for_train():
    d = mnist.load_subset()
    train, held = mnist.split(len(d.labels))
    for heldout, part in ((True, held), (False, train)):
        p = planted(n_digits=2, cells=(2, 2), seed=1, heldout=heldout)
        for k in range(2):
            top, left, bottom, right = p.boxes[k]
            crop = p.image[top:bottom, left:right]
            match = [i for i in range(len(d.labels)) if np.array_equal(d.images[i], crop)]
            assert match and all(i in set(part.tolist()) for i in match)
            assert {int(d.labels[i]) for i in match} == {int(p.classes[k])}


def test_the_same_seed_gives_the_same_canvas_and_another_seed_another():
    a, b, c = planted(seed=3), planted(seed=3), planted(seed=4)
    assert np.array_equal(a.image, b.image) and np.array_equal(a.classes, b.classes)
    assert not np.array_equal(a.image, c.image)


def test_a_batch_alternates_counts_and_is_reproducible():
    batch = planted_batch(6, n_digits=(2, 3), cells=(3, 3), seed=2)
    assert [len(p) for p in batch] == [2, 3, 2, 3, 2, 3]
    again = planted_batch(6, n_digits=(2, 3), cells=(3, 3), seed=2)
    assert all(np.array_equal(p.image, q.image) for p, q in zip(batch, again))


def test_shifted_digits_stay_on_the_canvas_and_overlaps_keep_the_brighter_pixel():
    rng = np.random.default_rng(0)
    for _ in range(50):
        _, classes, corners = layout(rng, (2, 3), 3, shift=10)
        assert (corners >= 0).all() and (corners[:, 0] <= CELL).all() and (corners[:, 1] <= 2 * CELL).all()
    digits = np.stack([np.full((CELL, CELL), 100, np.uint8), np.full((CELL, CELL), 50, np.uint8)])
    canvas = compose(digits, np.array([[0, 0], [0, 10]]), (1, 2))
    assert canvas[0, 5] == 100 and canvas[0, 20] == 100 and canvas[0, 30] == 50 and canvas[0, 45] == 0


BAD = [{"n_digits": 0}, {"n_digits": 5, "cells": (2, 2)}, {"cells": (0, 3)}, {"shift": 20}]


@pytest.mark.parametrize("kwargs", BAD)
def test_bad_arguments_are_refused_naming_what_is_accepted(kwargs):
    with pytest.raises(InputError, match="accepted"):
        planted(**kwargs)
