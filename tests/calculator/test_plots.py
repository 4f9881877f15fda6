"""attention.calculator.plots: matrices and maps drawn as RGB arrays."""

from __future__ import annotations

import numpy as np
import pytest

from attention.calculator.plots import (
    HATCH,
    LABEL_PX,
    SHOWN_WIDTH,
    caption_px,
    captioned,
    grid_lines,
    heatmap,
    heatmaps,
)
from attention.render import colormap


def test_heatmap_colours_min_and_max_with_the_colormap_ends():
    img = heatmap(np.array([[0.0, 1.0]]), target=40, max_cell=20)
    assert img.shape == (20, 40, 3)
    np.testing.assert_array_equal(img[10, 5], colormap("viridis")[0])
    np.testing.assert_array_equal(img[10, 30], colormap("viridis")[255])


def test_minus_inf_cells_are_hatched_not_coloured():
    img = heatmap(np.array([[0.0, -np.inf], [1.0, 0.5]]), target=40, max_cell=20)
    cell = img[1:20, 21:40].reshape(-1, 3)
    colours = {tuple(c) for c in cell}
    assert colours <= {tuple(HATCH[0]), tuple(HATCH[1])} and len(colours) == 2


def test_heatmaps_one_panel_per_head():
    one = heatmaps(np.zeros((1, 3, 3)))
    two = heatmaps(np.zeros((2, 3, 3)))
    assert two.shape[1] > one.shape[1] * 1.5


def test_explicit_range_is_respected():
    img = heatmap(np.array([[0.5]]), vmin=0.0, vmax=1.0, target=10, max_cell=10)
    np.testing.assert_array_equal(img[5, 5], colormap("viridis")[128])


def test_grid_lines_every_patch():
    g = grid_lines(np.zeros((32, 48, 3), np.uint8), 16)
    assert (g[0] == 255).all() and (g[16] == 255).all() and (g[:, 32] == 255).all() and (g[5, 5] == 0).all()


def _ink_rows(img: np.ndarray, top: int, bottom: int, left: int, right: int) -> int:
    """How many pixel rows of img[top:bottom, left:right] hold dark (text) pixels."""
    return int((img[top:bottom, left:right].max(axis=2) < 128).any(axis=1).sum())


@pytest.mark.parametrize("tile, ncols", [((288, 448), 2), ((288, 448), 3), ((448, 288), 2), ((60, 60), 1)])
def test_captions_stay_legible_when_the_picture_is_shrunk_to_a_phone(tile, ncols):
    """Shown SHOWN_WIDTH px wide (a phone), a caption's font is >= 12 px and its letters >= 8 px tall."""
    h, w = tile
    img = captioned([np.zeros((h, w, 3), np.uint8)] * ncols, ["head 1"] * ncols, ncols=ncols)
    shrink = min(1.0, SHOWN_WIDTH / img.shape[1])
    size = caption_px(img.shape[1])
    assert size == max(LABEL_PX, size) and size * shrink >= 12
    ink = _ink_rows(img, 4 + h, 4 + h + round(1.4 * size), 4, 4 + w)  # the strip under the first tile
    assert ink * shrink >= 8  # "head 1": ascender to baseline, about 0.7 of the font size


def test_heatmaps_caption_each_head_below_its_map():
    img = heatmaps(np.zeros((2, 4, 4)), target=40)
    assert img.shape[0] > 40 + 8 + caption_px(img.shape[1])  # maps, padding and a caption strip
    assert _ink_rows(img, 8 + 40, img.shape[0], 8, 48) > 0 and _ink_rows(img, 0, 8 + 40, 0, img.shape[1]) == 0
