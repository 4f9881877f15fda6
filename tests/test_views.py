"""Spec of attention.views: tiles per view, the clickable query image, scores vs weights,
the legend, and the download (.npz with raw float32 maps and the PNGs). Offline, mnist_vit."""

from __future__ import annotations

import io
import json
import os
import re
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from attention import session, views
from attention.errors import InputError
from attention.extract import threshold_masks
from attention.render import colormap, overlay, upsample

ROOT = Path(__file__).resolve().parent.parent
DIGIT = str(ROOT / "examples" / "digits" / "digit_3.png")
CYAN = np.array(views.QUERY_COLOR, np.uint8)


@pytest.fixture(scope="module")
def p():
    return session.run(DIGIT, "mnist_vit", "auto")  # 28x28, patch 4: a 7x7 grid, 4 layers, 4 heads


def cyan_box(img: np.ndarray) -> tuple[int, int, int, int] | None:
    """Bounding box (y0, x0, y1, x1) of the cyan query mark, or None."""
    ys, xs = np.nonzero((img == CYAN).all(-1))
    return None if ys.size == 0 else (ys.min(), xs.min(), ys.max(), xs.max())


@pytest.mark.parametrize("view, count", [("heads", 5), ("mean", 1), ("rollout", 1), ("masks", 4)])
def test_each_view_gives_its_tiles_enlarged_for_small_images(p, view, count):
    res = p.at((1, 5), -1)
    roll = p.rollout((1, 5), -1) if view == "rollout" else None
    ts = views.tiles(res, view, rollout=roll)
    assert len(ts) == count and len({t.name for t in ts}) == count
    assert views.display_scale(res) == 8  # 28 px -> 224 px
    for t in ts:
        assert t.image.shape == (224, 224, 3) and t.image.dtype == np.uint8 and t.caption
        assert cyan_box(t.image) == (8 * 4, 5 * 32, 2 * 32 - 1, 6 * 32 - 1)  # row 1, col 5, 32 px patches


def test_heads_tiles_show_each_heads_map_and_the_cls_query_is_not_marked(p):
    res = p.at("cls", -1)
    ts = views.tiles(res, "heads", alpha=1.0, cmap="gray")
    for h, t in enumerate(ts[:-1]):  # alpha 1: the tile is the map itself, patch by patch
        cell = t.image[::32, ::32, 0].astype(float)
        m = res.maps[h]
        expect = np.round((m - m.min()) / (m.max() - m.min()) * 255)
        np.testing.assert_allclose(cell, expect, atol=1)
        assert cyan_box(t.image) is None
    assert ts[-1].name == "mean" and "CLS" in ts[0].caption


def test_masks_keep_the_threshold_share(p):
    res = p.at("cls", -1)
    loose, tight = views.tiles(res, "masks", threshold=0.9), views.tiles(res, "masks", threshold=0.2)
    n_loose = [int(t.caption.split(" · ")[1].split("/")[0]) for t in loose]
    n_tight = [int(t.caption.split(" · ")[1].split("/")[0]) for t in tight]
    assert all(a > b for a, b in zip(n_loose, n_tight))
    masks = threshold_masks(res.maps, 0.9)
    for t, m, n in zip(loose, masks, n_loose):
        tinted = t.image[16::32, 16::32, 0] >= 100  # kept patches are tinted red, the rest darkened
        np.testing.assert_array_equal(tinted, m)
        assert m.sum() == n


def test_rollout_view_needs_the_rollout_map(p):
    with pytest.raises(InputError, match="rollout"):
        views.tiles(p.at("cls"), "rollout")


@pytest.mark.parametrize("view, threshold, alpha, cmap, fragment", [
    ("cube", 0.6, 0.6, "inferno", "heads, mean, rollout, masks"),
    ("heads", 0.0, 0.6, "inferno", "more than 0"),
    ("heads", 1.5, 0.6, "inferno", "at most 1"),
    ("heads", 0.6, -0.1, "inferno", "0 (image only)"),
    ("heads", 0.6, 0.5, "nocmap", "inferno"),
])
def test_bad_view_or_style_is_refused_with_what_is_accepted(p, view, threshold, alpha, cmap, fragment):
    with pytest.raises(InputError, match=re.escape(fragment)):
        views.tiles(p.at("cls"), view, threshold=threshold, alpha=alpha, cmap=cmap)


def test_view_labels_are_accepted_too():
    assert views.check_view("Per-head grid") == "heads" and views.check_view(" ROLLOUT ") == "rollout"


def test_a_click_on_the_query_image_selects_the_patch_under_it(p):
    res = p.at("cls")
    img = views.query_image(res)
    assert img.shape == (224, 224, 3)
    for r, c in [(0, 0), (3, 4), (6, 6)]:
        assert views.patch_at(c * 32 + 16, r * 32 + 5, res) == (r, c)
    assert views.patch_at(-3, 500, res) == (6, 0)  # clamped to the grid
    marked = views.query_image(p.at((3, 4)))
    assert cyan_box(marked)[:2] == (96, 128)


def test_scores_table_prints_raw_scores_and_their_softmax(p):
    res = p.at((2, 2), 2)
    summary, rows = views.scores_table(res, head=1, top=5)
    assert len(rows) == 1 + 5 and rows[0][1] == "CLS"
    s, w = res.scores[2, 1], res.weights[2, 1]
    np.testing.assert_allclose(w, np.exp(s - s.max()) / np.exp(s - s.max()).sum(), rtol=1e-4)
    weights = [r[3] for r in rows[1:]]
    assert weights == sorted(weights, reverse=True) and weights[0] == pytest.approx(w[1:].max(), abs=1e-4)
    token = rows[1][1]  # "patch (r, c)" with the largest weight
    r, c = map(int, token[len("patch ("):-1].split(", "))
    assert rows[1][2] == pytest.approx(s[1 + r * 7 + c], abs=1e-3)
    assert f"{res.prefix_share[2, 1]:.1%} of the weight on the prefix" in summary and "patch (2, 2)" in summary
    with pytest.raises(InputError, match="0 to 3"):
        views.scores_table(res, head=4)
    with pytest.raises(InputError, match="Head 1.5 is not a whole number"):
        views.scores_table(res, head=1.5)


def test_legend_shows_the_colormap_ends():
    html = views.legend_html("viridis")
    lo, hi = colormap("viridis")[0], colormap("viridis")[255]
    assert f"rgb({lo[0]},{lo[1]},{lo[2]}) 0%" in html and f"rgb({hi[0]},{hi[1]},{hi[2]}) 100%" in html


def test_download_has_raw_float32_maps_and_the_same_pngs(p, tmp_path):
    res = p.at((4, 1), 2)
    ts = views.tiles(res, "heads")
    out = views.write_outputs(res, ts, model="mnist_vit", view="heads", threshold=0.6, root=tmp_path)
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


def test_sheet_puts_every_tile_on_one_captioned_picture_reducing_large_ones(p):
    res = p.at("cls", -1)
    ts = views.tiles(res, "heads")
    small = views.sheet(ts)  # five 224 px tiles: kept at full size, rows of 4
    assert small.shape == (2 * (224 + 14 + 4) + 4, 4 * (224 + 4) + 4, 3)
    np.testing.assert_array_equal(small[4:228, 4:228], ts[0].image)
    assert (small[228:242, 4:228] < 128).any()  # a caption under the tile
    big = [views.Tile(np.repeat(np.repeat(t.image, 3, 0), 3, 1), t.caption, t.name) for t in ts]  # 672 px
    reduced = views.sheet(big, max_side=448)  # 672 / 2 = 336 px
    assert reduced.shape == (2 * (336 + 14 + 4) + 4, 4 * (336 + 4) + 4, 3)
    assert views.sheet(ts[:2]).shape[1] == 2 * (224 + 4) + 4


def test_tiles_drawn_small_match_full_tiles_reduced(tmp_path):
    big = session.run(DIGIT, "mnist_vit", "224").at((10, 20), -1)  # 224 px, 56x56 patches of 4 px: shown 1:1
    assert views.display_scale(big) == 1 and views.sheet_shrink(big) == 1 and views.sheet_shrink(big, max_side=112) == 2
    full, small = views.tiles(big, "heads"), views.tiles(big, "heads", shrink=2)
    for f, sm in zip(full, small):
        assert sm.image.shape == (112, 112, 3) and sm.caption == f.caption
        reduced = np.asarray(Image.fromarray(f.image).reduce(2)).astype(int)
        unmarked = ~(sm.image == CYAN).all(-1) & (np.abs(reduced - views.QUERY_COLOR).max(-1) > 60)
        assert np.abs(reduced[unmarked] - sm.image[unmarked]).max() <= 1  # box average and blend commute
        assert cyan_box(sm.image) == (10 * 2, 20 * 2, 11 * 2 - 1, 21 * 2 - 1)  # the query marked at 2 px patches
    with pytest.raises(InputError, match="smaller"):
        views.tiles(big, "mean", shrink=3)
    with pytest.raises(InputError, match="smaller"):
        views.tiles(session.run(DIGIT, "mnist_vit", "auto").at(), "mean", shrink=2)  # 28 px: shown enlarged


def test_outputs_for_an_api_call_are_the_sheet_and_the_raw_arrays(p, tmp_path):
    res = p.at((2, 2), -1)
    ts = views.tiles(res, "heads", alpha=0.5, cmap="magma")
    out = views.write_outputs(res, ts, model="mnist_vit", view="heads", threshold=0.6, root=tmp_path, sheet_only=True)
    assert out.pngs == [] and sorted(f.name for f in Path(out.npz).parent.iterdir()) == [Path(out.npz).name, "sheet.png"]
    np.testing.assert_array_equal(np.asarray(Image.open(out.sheet)), views.sheet(ts))
    d = np.load(out.npz)
    assert not [f for f in d.files if f.startswith("png/")]
    s = views.display_scale(res)  # every overlay can be remade exactly from the arrays (all but the query mark)
    for h, t in enumerate(ts[:-1]):
        remade = upsample(overlay(d["image"], d["maps"][h], alpha=0.5, cmap="magma"), s)
        unmarked = ~(t.image == CYAN).all(-1)
        assert unmarked.mean() > 0.9
        np.testing.assert_array_equal(remade[unmarked], t.image[unmarked])
    info = views.describe(res, out, model="mnist_vit", device="cpu", view="heads", threshold=0.6)
    assert info["query"] == [2, 2] and info["grid"] == [7, 7] and info["tokens"] == 50 and info["layer"] == 3
    assert [(t["name"], t["caption"]) for t in info["tiles"]] == [(t.name, t.caption) for t in ts]
    assert "render_ms" not in info  # only a caller that timed the drawing reports it
    json.dumps(info)  # JSON-ready
    timed = views.describe(res, out, model="mnist_vit", device="cpu", view="heads", threshold=0.6, render_seconds=0.0421)
    assert timed["render_ms"] == 42.1 and {k: v for k, v in timed.items() if k != "render_ms"} == info


def test_frame_composes_a_view_from_the_cached_pass(p, tmp_path, monkeypatch):
    monkeypatch.setattr(session, "forward", lambda *a: pytest.fail("no forward pass for a new view"))
    f = views.frame(p, query=(0, 0), layer=-1, view="rollout", head=2, cmap="viridis", root=tmp_path)
    assert f.res.query == (0, 0) and f.res.layer == 3 and len(f.outputs.pngs) == 1
    np.testing.assert_allclose(np.load(f.outputs.npz)["rollout"], p.rollout((0, 0), 3))
    assert np.asarray(Image.open(f.query_png)).shape == (224, 224, 3)
    assert "mnist_vit" in f.details and "7×7" in f.details and "50 tokens" in f.details and "ms" in f.details
    assert 0 < f.seconds < 60  # the drawing's own wall time (the API reports it as render_ms)
    assert "patch (row 0, col 0)" in f.query_label and "Head 2" in f.scores_summary
    assert views.frame(p, view="mean", with_query_image=False, root=tmp_path).query_png is None


def test_outputs_older_than_an_hour_are_swept_at_most_once_a_minute(p, tmp_path):
    res = p.at("cls", -1)
    ts = views.tiles(res, "mean")

    def stale_folder():
        old = tmp_path / "stale"
        old.mkdir()
        t = time.time() - views.KEEP_SECONDS - 60
        os.utime(old, (t, t))
        return old

    old = stale_folder()
    views._last_sweep.pop(tmp_path, None)
    views.write_outputs(res, ts, model="m", view="mean", threshold=0.6, root=tmp_path)
    assert not old.exists()
    old = stale_folder()
    fresh = views.write_outputs(res, ts, model="m", view="mean", threshold=0.6, root=tmp_path)
    assert old.exists() and Path(fresh.npz).exists()  # swept a moment ago: not again within the minute
