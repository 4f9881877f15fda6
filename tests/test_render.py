"""Spec of attention.render: colormap tables, nearest upsampling by patch, overlays, masks, grids."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from attention.errors import InputError
from attention.render import colorize, colormap, grid, mark_patch, mask_overlay, normalize, overlay, upsample


def test_colormap_is_a_256_entry_table_and_unknown_names_are_refused():
    lut = colormap("gray")
    assert lut.shape == (256, 3) and lut.dtype == np.uint8
    assert lut[0].tolist() == [0, 0, 0] and lut[-1].tolist() == [255, 255, 255]
    with pytest.raises(InputError, match="inferno"):
        colormap("no-such-map")


def test_normalize_and_colorize():
    a = np.array([[1.0, 3.0], [2.0, 5.0]])
    assert normalize(a).min() == 0 and normalize(a).max() == 1
    assert not normalize(np.ones((2, 2))).any()
    c = colorize(a, "gray")
    assert c.shape == (2, 2, 3) and c[1, 1, 0] == 255 and c[0, 0, 0] == 0


def test_upsample_fills_each_patch():
    up = upsample(np.array([[1, 2], [3, 4]]), 3)
    assert up.shape == (6, 6) and up[2, 2] == 1 and up[3, 5] == 4 and up[0, 3] == 2


def test_overlay_blends_map_over_image():
    img = Image.new("RGB", (32, 16), (0, 0, 0))
    amap = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    out = overlay(img, amap, alpha=1.0, cmap="gray")
    assert out.shape == (16, 32, 3) and out[0, 8].tolist() == [255, 255, 255] and out[0, 0].tolist() == [0, 0, 0]
    assert (overlay(img, amap, alpha=0.0) == 0).all()
    with pytest.raises(InputError, match="Opacity"):
        overlay(img, amap, alpha=2)
    with pytest.raises(InputError, match="does not tile"):
        overlay(img, np.zeros((3, 3)))


def test_mask_overlay_and_mark_patch():
    img = np.full((8, 8, 3), 200, np.uint8)
    out = mask_overlay(img, np.array([[True, False], [False, False]]))
    assert (out[:4, :4] != out[4:, 4:]).any() and out[5, 5, 0] < 200
    marked = mark_patch(img, (1, 0), 4, color=(0, 255, 0))
    assert marked[4, 0].tolist() == [0, 255, 0] and marked[0, 0].tolist() == [200, 200, 200]


def test_grid_tiles_with_padding_and_labels():
    tiles = [np.zeros((10, 12, 3), np.uint8)] * 5
    g = grid(tiles, ncols=3, pad=2)
    assert g.shape == (2 * 12 + 2, 3 * 14 + 2, 3)
    labelled = grid(tiles, ncols=3, pad=2, labels=[str(i) for i in range(5)])
    assert labelled.shape[0] > g.shape[0]
    with pytest.raises(InputError):
        grid([])
