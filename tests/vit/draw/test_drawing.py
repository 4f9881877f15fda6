"""Spec of attention.vit.draw.drawing: the one definition of where the ViT tab's pictures put things,
which the server draws by (views) and the browser receives (`Layout.to_json`, live.js)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention.render import mark_patch
from attention.vit.draw import drawing, views
from attention.vit.serve import live

CYAN = np.array(drawing.QUERY_COLOR, np.uint8)


@pytest.mark.parametrize(
    "step, patch, size", [(8, (2, 3), (56, 56)), (72, (6, 0), (504, 504)), (16, (0, 29), (320, 480))]
)
def test_the_square_is_pils_rectangle_of_render_mark_patch(step, patch, size):
    img = np.random.default_rng(0).integers(0, 256, (*size, 3), dtype=np.uint8)
    ours = drawing.paint(img, drawing.square_boxes(patch, step, size))
    assert np.array_equal(ours, mark_patch(img, patch, step, color=drawing.QUERY_COLOR))  # PIL's ImageDraw


def test_the_crosshair_points_at_the_patch_from_four_sides_within_the_picture():
    step, (r, c), size = 72, (0, 5), (504, 504)  # the top row: the top arm falls outside and is dropped
    boxes = drawing.crosshair_boxes((r, c), step, size)
    assert all(0 <= y0 < y1 <= size[0] and 0 <= x0 < x1 <= size[1] for y0, y1, x0, x1, _ in boxes)
    out = drawing.paint(np.zeros((*size, 3), np.uint8), boxes)
    y, x, t = r * step + step // 2, c * step + step // 2, step // 12
    assert (out[y, x - step // 2 - int(2.5 * step) : x - step // 2] == CYAN).all()  # left arm, 2.5 patches
    assert (out[y, x + step // 2 + 1 :] == CYAN).all()  # right arm, cut at the edge
    assert (out[y + step // 2 + 1 : y + step // 2 + 1 + int(2.5 * step), x] == CYAN).all()  # bottom arm
    assert (out[y - t - 1, x - step : x - step // 2] == 0).all() and (
        out[y - t, x - step : x - step // 2] == CYAN
    ).all()
    assert (out[r * step, c * step : (c + 1) * step] == CYAN).all()  # the square, over the arms
    assert np.array_equal(views.crosshair(np.zeros((*size, 3), np.uint8), (r, c), step), out)


@pytest.mark.parametrize("k, shape", [(2, (40, 60)), (3, (37, 23)), (5, (11, 26)), (8, (9, 17))])
def test_box_reduce_averages_each_box_the_edge_ones_over_the_pixels_they_have(k, shape):
    img = np.random.default_rng(k).integers(0, 256, (*shape, 3), dtype=np.uint8)
    out = drawing.box_reduce(img, k)
    h, w = -(-shape[0] // k), -(-shape[1] // k)
    assert out.shape == (h, w, 3)
    mean = np.array([[img[y * k : y * k + k, x * k : x * k + k].mean((0, 1)) for x in range(w)] for y in range(h)])
    assert np.abs(out - mean).max() < 1  # the mean, rounded through Pillow's fixed-point reciprocal
    assert np.array_equal(drawing.box_reduce(img, 1), img)


def test_the_gallery_reduction_is_the_smallest_whole_factor_to_its_side():
    img = np.zeros((320, 480, 3), np.uint8)
    assert drawing.reduction((480, 320), drawing.THUMB_SIDE) == 2 and drawing.reduced(img, 400).shape == (160, 240, 3)
    assert drawing.reduction((400, 224), 400) == 1 and drawing.reduction((1152, 768), 400) == 3


def test_a_digit_is_enlarged_and_a_photo_reduced_for_the_gallery():
    digit = drawing.layout((28, 28), 4, (7, 7), heads=4)
    assert (digit.scale, digit.tile_scale, digit.tile_reduce) == (18, 8, 1)  # 504 px map, 224 px tiles
    photo = drawing.layout((480, 320), 16, (20, 30), heads=2)
    assert (photo.scale, photo.tile_scale, photo.tile_reduce) == (2, 1, 2)  # 960x640 map, 240x160 tiles
    assert photo.image_size == (320, 480)


def test_the_layout_as_json_is_what_the_browser_paints():
    lay = drawing.layout((480, 320), 16, (20, 30), heads=2)
    got = json.loads(json.dumps(lay.to_json((3, 29))))
    assert got["tile_rows"] == {"heads": [0, 1, 2], "mean": [2]} and got["tile_reduce"] == 2
    big = [(y0, y1, x0, x1, (r, g, b)) for y0, y1, x0, x1, r, g, b in got["marks"]["big"]]
    assert big == drawing.crosshair_boxes((3, 29), 32, (640, 960))
    tile = np.zeros((320, 480, 3), np.uint8)
    painted = drawing.paint(tile, [(*b[:4], tuple(b[4:])) for b in got["marks"]["tile"]])
    assert np.array_equal(painted, mark_patch(tile, (3, 29), 16))
    assert lay.to_json(None)["marks"] == {"big": [], "tile": []}  # CLS: nothing marked


def test_patch_at_takes_whole_patches_and_clamps_to_the_grid():
    assert drawing.patch_at(71.9, 72.0, 72, (7, 7)) == (1, 0)
    assert drawing.patch_at(-3, 5000, 72, (7, 7)) == (6, 0)
    assert drawing.patch_at(959, 0, 32, (20, 30)) == (0, 29)


def test_the_servers_pictures_follow_the_layout(digit_pass):
    res = digit_pass.at((2, 5), 1)
    lay = live.layout(res)
    assert (lay.scale, lay.tile_scale) == (views.big_scale(res), views.display_scale(res))
    tile = views.tiles(res, "mean")[0].image
    plain = np.repeat(np.repeat(views.overlay(np.asarray(res.image), res.mean), 8, 0), 8, 1)
    assert np.array_equal(tile, drawing.paint(plain, lay.tile_marks((2, 5))))
    big = views.query_image(res, head=1)
    plain = np.repeat(np.repeat(views.overlay(np.asarray(res.image), res.maps[1]), 18, 0), 18, 1)
    assert np.array_equal(big, drawing.paint(plain, lay.big_marks((2, 5))))
