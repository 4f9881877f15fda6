"""Spec of attention.vit.draw.outputs: the files of one render for each consumer (the tab's gallery of reduced
tiles; its download: tile PNGs and the .npz of raw float32 arrays that is also a zip of the PNGs; an
API answer: one captioned contact sheet and the raw arrays), the sweep of old folders, and the render's
facts as JSON. Offline, mnist_vit."""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

from attention.render import overlay, upsample
from attention.serving import cache
from attention.vit.draw import outputs, views

CYAN = np.array(views.QUERY_COLOR, np.uint8)


def test_download_has_raw_float32_maps_and_the_same_pngs(digit_pass, tmp_path):
    res = digit_pass.at((4, 1), 2)
    ts = views.tiles(res, "heads")
    arrays = outputs.maps_arrays(res, model="mnist_vit", view="heads", threshold=0.6)
    out = outputs.write_download(ts, arrays, outputs.npz_name(res, "mnist_vit", "heads"), root=tmp_path)
    assert Path(out.npz).name == "attention_mnist_vit_L2_r4c1_heads.npz"
    assert [Path(x).name for x in out.pngs] == [f"{t.name}.png" for t in ts] and out.captions == [t.caption for t in ts]
    d = np.load(out.npz)  # no pickle needed
    assert d["maps"].dtype == np.float32 and d["maps"].shape == (4, 7, 7)
    np.testing.assert_array_equal(d["maps"], res.maps)
    np.testing.assert_array_equal(d["weights"], res.weights)
    assert d["layers"].shape == (4, 4, 7, 7) and d["scores"].shape == (4, 4, 50)
    assert d["image"].shape == (28, 28, 3) and d["masks"].dtype == bool
    assert d["query"].tolist() == [4, 1] and int(d["layer"]) == 2 and str(d["model"]) == "mnist_vit"
    assert "rollout" not in d.files
    with zipfile.ZipFile(out.npz) as z:
        for t, path in zip(ts, out.pngs):
            data = z.read(f"png/{t.name}.png")
            assert data == Path(path).read_bytes()
            np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data))), t.image)  # lossless


def test_sheet_puts_every_tile_on_one_captioned_picture_reducing_large_ones(digit_pass):
    res = digit_pass.at("cls", -1)
    ts = views.tiles(res, "heads")
    small = outputs.sheet(ts)  # five 224 px tiles: kept at full size, rows of 4
    assert small.shape == (2 * (224 + 14 + 4) + 4, 4 * (224 + 4) + 4, 3)
    np.testing.assert_array_equal(small[4:228, 4:228], ts[0].image)
    assert (small[228:242, 4:228] < 128).any()  # a caption under the tile
    big = [outputs.Tile(np.repeat(np.repeat(t.image, 3, 0), 3, 1), t.caption, t.name) for t in ts]  # 672 px
    reduced = outputs.sheet(big, max_side=448)  # 672 / 2 = 336 px
    assert reduced.shape == (2 * (336 + 14 + 4) + 4, 4 * (336 + 4) + 4, 3)
    assert outputs.sheet(ts[:2]).shape[1] == 2 * (224 + 4) + 4


def test_outputs_for_an_api_call_are_the_sheet_and_the_raw_arrays(digit_pass, tmp_path):
    res = digit_pass.at((2, 2), -1)
    ts = views.tiles(res, "heads", alpha=0.5, cmap="magma")
    arrays = outputs.maps_arrays(res, model="mnist_vit", view="heads", threshold=0.6)
    out = outputs.write_sheet(ts, arrays, "maps.npz", root=tmp_path)
    assert out.pngs == [] and sorted(f.name for f in Path(out.npz).parent.iterdir()) == [
        Path(out.npz).name,
        "sheet.png",
    ]
    np.testing.assert_array_equal(np.asarray(Image.open(out.sheet)), outputs.sheet(ts))
    d = np.load(out.npz)
    assert not [f for f in d.files if f.startswith("png/")]
    s = views.display_scale(res)  # every overlay can be remade exactly from the arrays (all but the query mark)
    for h, t in enumerate(ts[:-1]):
        remade = upsample(overlay(d["image"], d["maps"][h], alpha=0.5, cmap="magma"), s)
        unmarked = ~(t.image == CYAN).all(-1)
        assert unmarked.mean() > 0.9
        np.testing.assert_array_equal(remade[unmarked], t.image[unmarked])
    info = outputs.describe(res, out, model="mnist_vit", device="cpu", view="heads", threshold=0.6)
    assert info["query"] == [2, 2] and info["grid"] == [7, 7] and info["tokens"] == 50 and info["layer"] == 3
    assert [(t["name"], t["caption"]) for t in info["tiles"]] == [(t.name, t.caption) for t in ts]
    assert "render_ms" not in info  # only a caller that timed the drawing reports it
    json.dumps(info)  # JSON-ready
    timed = outputs.describe(
        res, out, model="mnist_vit", device="cpu", view="heads", threshold=0.6, render_seconds=0.0421
    )
    assert timed["render_ms"] == 42.1 and {k: v for k, v in timed.items() if k != "render_ms"} == info


def test_outputs_older_than_an_hour_are_swept_at_most_once_a_minute(digit_pass, tmp_path):
    res = digit_pass.at("cls", -1)
    ts = views.tiles(res, "mean")

    def stale_folder():
        old = tmp_path / "stale"
        old.mkdir()
        t = time.time() - outputs.KEEP_SECONDS - 60
        os.utime(old, (t, t))
        return old

    old = stale_folder()
    cache._sweep_gates.pop(tmp_path, None)  # not swept yet
    arrays = outputs.maps_arrays(res, model="m", view="mean", threshold=0.6)
    outputs.write_download(ts, arrays, "maps.npz", root=tmp_path)
    assert not old.exists()
    old = stale_folder()
    fresh = outputs.write_download(ts, arrays, "maps.npz", root=tmp_path)
    assert old.exists() and Path(fresh.npz).exists()  # swept a moment ago: not again within the minute


def test_the_gallery_gets_tiles_reduced_to_its_size_and_the_download_keeps_them_full(digit_pass, tmp_path):
    img = np.random.default_rng(0).integers(0, 255, (480, 720, 3), dtype=np.uint8)
    ts = [outputs.Tile(img, "head 0", "head_00"), outputs.Tile(img[::-1].copy(), "mean of heads", "mean")]
    res = digit_pass.at()  # the arrays of the .npz (the tiles' size does not depend on them)
    gallery = outputs.write_gallery(ts, side=400, root=tmp_path)
    out = outputs.write_download(
        ts, outputs.maps_arrays(res, model="m", view="heads", threshold=0.6), "maps.npz", root=tmp_path
    )
    assert gallery.npz is None and gallery.pngs == [] and out.thumbs == out.pngs
    for t, thumb, full in zip(ts, gallery.thumbs, out.pngs):
        small = np.asarray(Image.open(thumb))
        assert small.shape == (240, 360, 3)  # reduced by 2: the longer side at most 400
        np.testing.assert_array_equal(small, np.asarray(Image.fromarray(t.image).reduce(2)))
        np.testing.assert_array_equal(np.asarray(Image.open(full)), t.image)  # full size kept
    same = outputs.write_gallery(ts, side=800, root=tmp_path)  # already small enough: kept as they are
    np.testing.assert_array_equal(np.asarray(Image.open(same.thumbs[0])), ts[0].image)
    photos = outputs.write_gallery(ts, side=400, jpeg=True, root=tmp_path)  # photos: JPEG
    assert all(p.endswith("_small.jpg") for p in photos.thumbs)
