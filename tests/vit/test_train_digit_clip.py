"""digit_clip's training batches (weights/train_digit_clip.py): canvases with digits in known places, and each
canvas's hard negative, the same canvas with the named digit swapped in place for a class it lacks."""

from __future__ import annotations

import math

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


def test_each_patch_is_labelled_with_the_digit_whose_ink_it_holds_and_blank_ones_with_none():
    from weights.train_digit_clip import PATCH, patch_labels

    digit = torch.full((1, CELL, CELL), BACKGROUND)
    digit[0, 8:12, 4:24] = 2.5  # a bar of ink: patch rows 2, patch cols 1 to 5
    other = torch.full((1, CELL, CELL), BACKGROUND)
    other[0, 0:4, 0:4] = 2.5
    labels = patch_labels([(7, digit, 0, 28), (2, other, 28, 0)], (56, 56))
    assert labels.shape == (56 // PATCH, 56 // PATCH)
    want = torch.full_like(labels, -1)
    want[2, 8:13] = 7  # the first digit sits 28 px to the right: 7 patches
    want[7, 0] = 2
    assert torch.equal(labels, want)


def test_the_dense_loss_is_low_only_when_ink_patches_name_their_digit():
    from weights.train_digit_clip import BLANK_WEIGHT, dense_loss

    labels = torch.tensor([[3, -1, 5]])
    right = torch.full((1, 3, 10), -5.0)
    right[0, 0, 3] = right[0, 2, 5] = 5.0
    right[0, 1] = 0.0  # the blank patch: no caption in particular
    wrong = right.clone()
    wrong[0, 0, 3], wrong[0, 0, 4] = -5.0, 5.0
    floor = BLANK_WEIGHT * math.log(10)  # a blank patch's least loss: the uniform target's entropy
    assert dense_loss(right, labels) < floor + 0.01 < 1.0 < dense_loss(wrong, labels)
