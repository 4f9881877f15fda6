"""Spec of attention.render: colormap tables, nearest upsampling by patch, overlays, masks, grids,
and lossless PNG bytes."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from attention.errors import InputError
from attention.render import colorize, colormap, grid, mark_patch, mask_overlay, normalize, overlay, png_bytes, upsample


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


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shape", [(5, 7), (5, 7, 3), (5, 7, 4), (1, 1, 3), (300, 451, 3)])
def test_png_bytes_is_lossless_for_grey_rgb_and_rgba_in_one_or_several_deflate_runs(shape, threads):
    a = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    data = png_bytes(a, threads=threads)
    img = Image.open(io.BytesIO(data))
    assert (
        img.format == "PNG" and img.mode == {2: "L", 3: "RGB", 4: "RGBA"}[len(shape) if len(shape) == 2 else shape[2]]
    )
    np.testing.assert_array_equal(np.asarray(img), a)
    i = data.index(b"IDAT")  # one zlib stream whose checksum holds (zlib.decompress checks it)
    idat = data[i + 4 : i + 4 + struct.unpack(">I", data[i - 4 : i])[0]]
    assert len(zlib.decompress(idat)) == shape[0] * (1 + int(np.prod(shape[1:])))


def test_png_bytes_compresses_a_photo_overlay_like_pil():
    photo = np.asarray(
        Image.open(Path(__file__).resolve().parent.parent / "examples" / "photos" / "chelsea.jpg").convert("RGB")
    )
    a = overlay(photo[:288, :448], np.random.default_rng(1).random((18, 28)))
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG", compress_level=1)
    ours = png_bytes(a)
    assert len(ours) < 1.15 * len(buf.getvalue()) and len(ours) < 0.6 * a.nbytes
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(ours))), a)


@pytest.mark.parametrize(
    "bad", [np.zeros((4, 4), np.float32), np.zeros((4, 4, 2), np.uint8), np.zeros((0, 4, 3), np.uint8)]
)
def test_png_bytes_refuses_what_png_cannot_hold_here(bad):
    with pytest.raises(InputError, match="uint8"):
        png_bytes(bad)
