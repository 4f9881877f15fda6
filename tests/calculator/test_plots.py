"""attention.calculator.plots: matrices and maps drawn as RGB arrays."""

from __future__ import annotations

import numpy as np

from attention.calculator.plots import HATCH, grid_lines, heatmap, heatmaps
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
