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
import pytest
from PIL import Image

from attention import npzfile
from attention.crowd import cache
from attention.render import overlay, upsample
from attention.vit.draw import outputs, views

CYAN = np.array(views.QUERY_COLOR, np.uint8)


def test_download_has_raw_float32_maps_and_the_same_pngs(digit_pass, tmp_path):
    res = digit_pass.at((4, 1), 2)
    ts = views.tiles(res, "heads")
    arrays = outputs.maps_arrays(res, model="mnist_vit", view="heads", threshold=0.6)
    out = outputs.write_files(ts, arrays, outputs.npz_name(res, "mnist_vit", "heads"), root=tmp_path)
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
    out = outputs.write_files(ts, arrays, "maps.npz", root=tmp_path, as_sheet=True)
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
    outputs.write_files(ts, arrays, "maps.npz", root=tmp_path)
    assert not old.exists()
    old = stale_folder()
    fresh = outputs.write_files(ts, arrays, "maps.npz", root=tmp_path)
    assert old.exists() and Path(fresh.npz).exists()  # swept a moment ago: not again within the minute


def test_the_gallery_gets_tiles_reduced_to_its_size_and_the_download_keeps_them_full(digit_pass, tmp_path):
    img = np.random.default_rng(0).integers(0, 255, (480, 720, 3), dtype=np.uint8)
    ts = [outputs.Tile(img, "head 0", "head_00"), outputs.Tile(img[::-1].copy(), "mean of heads", "mean")]
    res = digit_pass.at()  # the arrays of the .npz (the tiles' size does not depend on them)
    gallery = outputs.write_gallery(ts, side=400, root=tmp_path)
    out = outputs.write_files(
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


def _layout(path) -> dict:
    """Check the one layout (`attention.npzfile`) of the .npz at `path` against the file itself: every member
    an array or a PNG, the meta entry's common keys, and its description of each array (shape and dtype read
    back by numpy, not from the writer). Returns the meta."""
    with np.load(path) as d:
        arrays = {n: d[n] for n in d.files if not n.startswith("png/") and n != "README.txt"}
    meta = json.loads(str(arrays.pop("meta")))
    assert meta["format"] == npzfile.FORMAT
    assert set(npzfile.COMMON) <= set(meta) and "axes" not in meta and "units" not in meta
    assert sorted(meta["arrays"]) == sorted(arrays)
    for name, a in arrays.items():
        assert meta["arrays"][name]["shape"] == list(a.shape) and meta["arrays"][name]["dtype"] == str(a.dtype)
    return meta


def test_every_npz_the_app_and_the_command_line_write_has_the_one_layout(digit_pass, tmp_path):
    from attention.__main__ import main
    from attention.vit.draw.feature_views import write_feature_outputs
    from attention.vit.draw.frames import ViewSpec, download_maps
    from attention.vit.engine.video import attention_video, write_video
    from attention.vit.models.loader import load_vit
    from attention.vit.relevance import relevance
    from attention.vit.relevance.views import write_answer
    from tests.conftest import DIGIT
    from tests.video_clips import moving_digit

    view = download_maps(digit_pass, ViewSpec((4, 1), 2, "heads"), root=tmp_path).outputs.npz
    m = _layout(view)
    assert (m["kind"], m["model"], m["layer"], m["query"], m["grid"], m["view"]) == (
        "maps", "mnist_vit", 2, [4, 1], [7, 7], "heads"
    )  # fmt: skip
    assert m["arrays"]["maps"]["axes"] == "heads, rows, cols" and "softmax" in m["arrays"]["maps"]["units"]
    assert m["arrays"]["query_token"].keys() == {"shape", "dtype"}  # no axes told: none written

    assert main(["maps", DIGIT, "--model", "mnist_vit", "--query", "cls", "--out", str(tmp_path / "cli")]) == 0
    m = _layout(tmp_path / "cli" / "digit_3" / "attention.npz")
    assert (m["kind"], m["model"], m["layer"], m["query"], m["view"]) == ("maps", "mnist_vit", 3, "cls", None)
    with zipfile.ZipFile(tmp_path / "cli" / "digit_3" / "attention.npz") as z:  # compressed, as before
        assert z.getinfo("masks.npy").compress_type == zipfile.ZIP_DEFLATED

    assert main(["features", DIGIT, "--model", "mnist_vit", "--out", str(tmp_path / "f")]) == 0
    _, api, _ = write_feature_outputs(digit_pass, (2, 3), 1, root=tmp_path)
    for path in (tmp_path / "f" / "digit_3" / "features.npz", api):
        m = _layout(path)
        assert (m["kind"], m["model"], m["grid"]) == ("features", "mnist_vit", [7, 7])
        assert m["arrays"]["pca"]["axes"] == "rows, cols, rgb"
    assert (m["layer"], m["query"]) == (1, [2, 3])

    moving_digit(tmp_path / "in.mp4", n=4, fps=4)
    run = attention_video(load_vit("mnist_vit"), tmp_path / "in.mp4", layer=1, resolution="native")
    write_video(run, tmp_path / "o.mp4", view="head", head=2, npz=tmp_path / "v.npz", model_name="mnist_vit")
    m = _layout(tmp_path / "v.npz")
    assert (m["kind"], m["model"], m["layer"], m["query"], m["view"]) == ("video", "mnist_vit", 1, "cls", "head")
    assert m["arrays"]["maps"]["axes"] == "frames, heads, rows, cols" and m["arrays"]["maps"]["shape"][0] == 4

    _, rel, _ = write_answer(relevance(load_vit("mnist_vit"), DIGIT, 3), model="mnist_vit")
    m = _layout(rel)
    assert (m["kind"], m["model"], m["query"], m["grid"]) == ("relevance", "mnist_vit", "cls", [7, 7])


def test_the_writer_refuses_an_array_named_like_its_own_entry_and_writes_to_a_buffer():
    buf = io.BytesIO()
    npzfile.save_npz(buf, {"x": np.zeros((2, 3), np.float32)}, meta={"kind": "k", "axes": {"x": "a, b", "y": "-"}})
    buf.seek(0)
    meta = npzfile.read_meta(buf)
    assert meta["arrays"] == {"x": {"shape": [2, 3], "dtype": "float32", "axes": "a, b"}} and meta["model"] is None
    with pytest.raises(ValueError, match="meta"):
        npzfile.save_npz(io.BytesIO(), {"meta": np.zeros(1)})
