"""digit_clip's training batches (weights/train_digit_clip.py): canvases with digits in known places, and each
canvas's hard negative, the same canvas with the named digit swapped in place for a class it lacks."""

from __future__ import annotations

import torch

from weights.train_digit_clip import BACKGROUND, CELL, canvases, hard_negatives


def test_a_hard_negative_swaps_the_named_digit_in_place_for_a_class_the_canvas_lacks():
    y = torch.arange(10).repeat(3)
    x = (y.float() + 1)[:, None, None, None].expand(-1, 1, CELL, CELL).clone()  # class c: a square of c + 1
    gen = torch.Generator().manual_seed(0)
    img, present, placed = canvases(x, y, 40, gen, (2, 3), (1, 3))
    neg, neg_present, named, other = hard_negatives(x, y, img, present, placed, gen, jitter=False)
    for i, digits in enumerate(placed):
        assert sorted(c for c, *_ in digits) == present[i].nonzero()[:, 0].tolist()
        for c, _, top, left in digits:  # each digit where it says, its class's value
            assert (img[i, 0, top : top + CELL, left : left + CELL] == c + 1).all()
        n, o = int(named[i]), int(other[i])
        assert present[i, n] and not present[i, o]
        want = present[i].clone()
        want[n], want[o] = False, True
        assert torch.equal(neg_present[i], want)
        top, left = next((t, q) for c, _, t, q in digits if c == n)
        square = torch.zeros_like(img[i, 0], dtype=torch.bool)
        square[top : top + CELL, left : left + CELL] = True
        assert (neg[i, 0][square] == o + 1).all()  # the new digit in the named one's place
        assert torch.equal(neg[i, 0][~square], img[i, 0][~square])  # the rest untouched
        assert (img[i, 0] == BACKGROUND).sum() == img[i, 0].numel() - CELL * CELL * len(digits)
