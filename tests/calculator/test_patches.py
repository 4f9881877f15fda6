"""attention.calculator.patches: image -> patches -> + positional encoding -> Q, K, V -> attention, and its pictures."""

from __future__ import annotations

import numpy as np
import pytest

from attention.calculator.patches import (
    CHOSEN,
    D_HEAD,
    WORK_SIZE,
    ZOOM,
    fit,
    patch_attention,
    patch_under,
    patch_view,
    patchify,
    sinusoidal_encoding,
)
from attention.errors import ImageError, InputError


def test_sinusoidal_encoding_follows_the_standard_formula():
    pe = sinusoidal_encoding(50, 6)
    pos, i = 7, 2  # dimensions 2i = 4 and 2i + 1 = 5
    assert pe[pos, 2 * i] == pytest.approx(np.sin(pos / 10000 ** (2 * i / 6)))
    assert pe[pos, 2 * i + 1] == pytest.approx(np.cos(pos / 10000 ** (2 * i / 6)))
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1, 0, 1])


def test_sinusoidal_encoding_odd_dimension():
    pe = sinusoidal_encoding(3, 5)
    assert pe.shape == (3, 5) and pe[2, 4] == pytest.approx(np.sin(2 / 10000 ** (4 / 5)))


def test_patchify_cuts_raster_order_and_flattens_each_patch():
    img = np.arange(4 * 6 * 3).reshape(4, 6, 3)
    p = patchify(img, 2)
    assert p.shape == (6, 12)
    np.testing.assert_array_equal(p[4], img[2:4, 2:4].ravel())  # row 1, column 1 of a 2 x 3 grid


def test_fit_resizes_long_side_and_drops_partial_patches():
    img = np.zeros((100, 150, 3), np.uint8)
    out = fit(img, 16)
    assert out.shape[1] == 16 * (WORK_SIZE // 16) and out.shape[0] == 16 * (round(100 * WORK_SIZE / 150) // 16)


def test_pipeline_shapes_and_rows_sum_to_one():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (120, 200, 3), dtype=np.uint8)
    pa = patch_attention(img, patch=28, heads=4)
    rows, cols = pa.grid
    n = rows * cols
    assert (rows, cols) == (round(120 * WORK_SIZE / 200) // 28, WORK_SIZE // 28)
    assert pa.patches.shape == pa.pos.shape == (n, 3 * 28 * 28)
    np.testing.assert_allclose(pa.tokens, pa.patches + pa.pos)
    np.testing.assert_allclose(pa.pos, sinusoidal_encoding(n, 3 * 28 * 28))
    assert pa.attention.weights.shape == (4, n, n)
    np.testing.assert_allclose(pa.attention.weights.sum(-1), 1.0)
    m = pa.patch_map(3)
    assert m.shape == (4, rows, cols)
    np.testing.assert_allclose(m.reshape(4, -1), pa.attention.weights[:, 3])


def test_pipeline_is_seeded_and_sees_the_image():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (64, 64), dtype=np.uint8)  # grayscale is accepted
    a, b = patch_attention(img, 16, 2, seed=3), patch_attention(img, 16, 2, seed=3)
    np.testing.assert_array_equal(a.attention.weights, b.attention.weights)
    assert not np.allclose(a.attention.weights, patch_attention(img, 16, 2, seed=4).attention.weights)
    assert not np.allclose(a.attention.weights, patch_attention(255 - img, 16, 2, seed=3).attention.weights)


def test_mnist_digit_upsampled_works():
    from attention.mnist import load_subset

    digit = load_subset().images[0]
    pa = patch_attention(np.kron(digit, np.ones((4, 4), np.uint8)), patch=32, heads=1)
    assert pa.grid == (7, 7)


@pytest.mark.parametrize(
    "kwargs, err, word",
    [
        ({"patch": 15}, InputError, "14, 16"),
        ({"heads": 9}, InputError, "1 to 8"),
        ({"heads": 0}, InputError, "heads"),
    ],
)
def test_bad_settings(kwargs, err, word):
    with pytest.raises(err, match=word):
        patch_attention(np.zeros((64, 64, 3), np.uint8), **kwargs)


def test_bad_images():
    with pytest.raises(ImageError, match="shape"):
        patch_attention(np.zeros((4, 4, 5), np.uint8))
    with pytest.raises(ImageError, match="not an image"):
        patch_attention(b"definitely not a png")
    with pytest.raises(ImageError, match="no whole"):
        patch_attention(np.zeros((2, 400, 3), np.uint8), patch=56)
    with pytest.raises(InputError, match="out of range"):
        patch_attention(np.zeros((64, 64, 3), np.uint8), 16, 1).patch_map(10_000)


# --- the pictures ------------------------------------------------------------------------------


def _photo(h: int = 112, w: int = 224) -> np.ndarray:
    return np.random.default_rng(2).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_patch_under_maps_pixels_to_raster_indices_and_clamps():
    assert patch_under(0, 0, (3, 4), 10) == 0
    assert patch_under(39.9, 0, (3, 4), 10) == 3  # last column of the first row
    assert patch_under(15, 25, (3, 4), 10) == 2 * 4 + 1
    assert patch_under(500, 500, (3, 4), 10) == 11 and patch_under(-5, -5, (3, 4), 10) == 0


def test_patch_view_draws_the_grid_at_zoom_with_the_chosen_patch_in_cyan():
    v = patch_view(_photo(), patch=32, heads=2, index=9)
    rows, cols = round(112 * WORK_SIZE / 224) // 32, WORK_SIZE // 32
    assert v.count == rows * cols and v.index == 9
    assert v.grid.shape == (ZOOM * rows * 32, ZOOM * cols * 32, 3) and v.grid.dtype == np.uint8
    r, c = divmod(9, cols)
    step = ZOOM * 32
    assert CHOSEN == (0, 255, 255)
    assert tuple(v.grid[r * step + step // 2, c * step + 1]) == CHOSEN  # left edge of the chosen patch
    assert tuple(v.grid[step // 2, 1]) != CHOSEN  # patch 0 is not outlined
    assert "outlined in cyan" in v.info


def test_the_chosen_patch_has_one_colour_on_the_grid_and_on_every_map():
    v = patch_view(np.full((112, 224, 3), 128, np.uint8), patch=32, heads=4, index=9)  # grey: only marks are red
    cols = WORK_SIZE // 32
    r, c = divmod(9, cols)
    step, pad = ZOOM * 32, 4  # maps: tiles of the zoomed image, 2 x 2 for 4 heads, 4 px apart
    tile_w = v.grid.shape[1]
    tile_h = (v.maps.shape[0] - pad) // 2 - pad  # a map and its caption
    for h in range(4):
        y0, x0 = pad + (h // 2) * (tile_h + pad), pad + (h % 2) * (tile_w + pad)
        edge = v.maps[y0 + r * step + step // 2, x0 + c * step + 1]
        assert tuple(edge) == tuple(v.grid[r * step + step // 2, c * step + 1]) == CHOSEN, f"head {h + 1}"
    for picture in (v.grid, v.maps):  # no other outline colour anywhere
        assert not ((picture[..., 0] > 200) & (picture[..., 1] < 80) & (picture[..., 2] < 80)).any()


def test_patch_view_maps_and_matrices_follow_the_heads():
    one, four = patch_view(_photo(), 32, 1), patch_view(_photo(), 32, 4)
    assert four.maps.shape[0] > one.maps.shape[0] and four.maps.shape[1] > one.maps.shape[1]  # 2 x 2 heads
    assert four.matrices.shape[1] > one.matrices.shape[1]


def test_patch_view_index_defaults_to_the_centre_is_checked_and_a_click_chooses_a_patch():
    rows, cols = round(112 * WORK_SIZE / 224) // 32, WORK_SIZE // 32
    centre = (rows // 2) * cols + cols // 2
    assert patch_view(_photo(), 32, 1).index == centre
    with pytest.raises(InputError, match="the patch index = 10000 is out of range"):  # never silently moved
        patch_view(_photo(), 32, 1, index=10_000)
    step = ZOOM * 32
    clicked = patch_view(_photo(), 32, 1, index=0, click=(2 * step + 3, 1 * step + 3))
    assert clicked.index == 1 * cols + 2


def test_patch_view_describes_every_shape():
    v = patch_view(_photo(), 32, 2, seed=7.0, index=4.0)
    n, d = v.count, 3 * 32 * 32
    for part in (f"{n} patches", f"{n} x {d}", f"{n} x {2 * D_HEAD}", f"2 x {n} x {n}", "seed 7", "#4"):
        assert part in v.info


def test_patch_view_needs_an_image():
    with pytest.raises(InputError, match="no image"):
        patch_view(None)
