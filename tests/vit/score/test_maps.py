"""The map built to be right (`maps.truth_map`): the share of each patch inside the explained object's mask;
given the other objects' pixels (a planted canvas's other digits, evidence for the competing captions), the
order it makes is the object's patches by their share, then the background, then the others' patches, fewest
of their pixels first; a planted item carries the other digits' pixels."""

from __future__ import annotations

import numpy as np

from attention.planted import planted_batch
from attention.vit.score.data import open_items
from attention.vit.score.maps import truth_map
from attention.vit.score.protocol import unit_order


def test_truth_alone_is_the_share_of_each_patch_inside_the_mask():
    mask = np.zeros((8, 8), bool)
    mask[0:3, 0:4] = True  # patch (0, 0): 12 of 16 px
    mask[5, 6] = True  # patch (1, 1): 1 of 16
    np.testing.assert_array_equal(truth_map(mask, 4), [[12 / 16, 0], [0, 1 / 16]])


def test_with_the_others_the_order_is_the_object_then_the_background_then_the_others():
    p = planted_batch(1, n_digits=2, cells=(2, 2), seed=4)[0]
    a, b = p.masks[0], p.masks[1]
    share_a, share_b = truth_map(a, 4).ravel(), truth_map(b, 4).ravel()
    order = list(unit_order(truth_map(a, 4, b)))
    obj = sorted(np.flatnonzero(share_a > 0), key=lambda j: (-share_a[j], j))
    background = [j for j in range(share_a.size) if share_a[j] == 0 and share_b[j] == 0]
    others = sorted(np.flatnonzero((share_a == 0) & (share_b > 0)), key=lambda j: (share_b[j], j))
    assert len(obj) and len(others) and order == obj + background + others
    np.testing.assert_array_equal(truth_map(a, 4, b).ravel() >= 1 / 16, share_a > 0)  # the object keeps its share


def test_a_planted_item_carries_the_other_digits_pixels():
    items = open_items("planted:2", cells=(2, 2), digits=2, captions=True)
    p = planted_batch(2, n_digits=2, cells=(2, 2), seed=0)[1]
    np.testing.assert_array_equal(items[1].mask, p.masks[0])
    np.testing.assert_array_equal(items[1].others, p.masks[1])
    assert open_items("planted:1", cells=(1, 1), digits=1)[0].others is None
