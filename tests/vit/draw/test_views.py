"""Spec of attention.vit.draw.views (tiles per view, the clickable query image), attention.vit.draw.texts (scores vs
weights, the legend) and attention.vit.draw.frames (one view for the tab, its download and the API; their files:
test_outputs.py). Offline, mnist_vit."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from PIL import Image

from attention.errors import InputError
from attention.render import colormap
from attention.vit.draw import frames, texts, views
from attention.vit.engine.extract import threshold_masks
from attention.vit.serve import passes
from tests.conftest import DIGIT, ROOT

PHOTO = ROOT / "examples" / "photos" / "chelsea.jpg"

CYAN = np.array(views.QUERY_COLOR, np.uint8)


def cyan_box(img: np.ndarray) -> tuple[int, int, int, int] | None:
    """Bounding box (y0, x0, y1, x1) of the cyan query mark, or None."""
    ys, xs = np.nonzero((img == CYAN).all(-1))
    return None if ys.size == 0 else (ys.min(), xs.min(), ys.max(), xs.max())


@pytest.mark.parametrize("view, count", [("heads", 5), ("mean", 1), ("rollout", 1), ("masks", 4), ("fig3", 1)])
def test_each_view_gives_its_tiles_enlarged_for_small_images(digit_pass, view, count):
    res = digit_pass.at((1, 5), -1)
    roll = digit_pass.rollout((1, 5), -1) if view == "rollout" else None
    ts = views.tiles(res, view, rollout=roll)
    assert len(ts) == count and len({t.name for t in ts}) == count
    assert views.display_scale(res) == 8  # 28 px -> 224 px
    for t in ts:
        assert t.image.shape == (224, 224, 3) and t.image.dtype == np.uint8 and t.caption
        assert cyan_box(t.image) == (8 * 4, 5 * 32, 2 * 32 - 1, 6 * 32 - 1)  # row 1, col 5, 32 px patches


def test_heads_tiles_show_each_heads_map_and_the_cls_query_is_not_marked(digit_pass):
    res = digit_pass.at("cls", -1)
    ts = views.tiles(res, "heads", alpha=1.0, cmap="gray")
    for h, t in enumerate(ts[:-1]):  # alpha 1: the tile is the map itself, patch by patch
        cell = t.image[::32, ::32, 0].astype(float)
        m = res.maps[h]
        expect = np.round((m - m.min()) / (m.max() - m.min()) * 255)
        np.testing.assert_allclose(cell, expect, atol=1)
        assert cyan_box(t.image) is None
    assert ts[-1].name == "mean" and "CLS" in ts[0].caption


def test_masks_keep_the_threshold_share(digit_pass):
    res = digit_pass.at("cls", -1)
    loose, tight = views.tiles(res, "masks", threshold=0.9), views.tiles(res, "masks", threshold=0.2)
    n_loose = [int(t.caption.split(" · ")[1].split("/")[0]) for t in loose]
    n_tight = [int(t.caption.split(" · ")[1].split("/")[0]) for t in tight]
    assert all(a > b for a, b in zip(n_loose, n_tight))
    masks = threshold_masks(res.maps, 0.9)
    for t, m, n in zip(loose, masks, n_loose):
        tinted = t.image[16::32, 16::32, 0] >= 100  # kept patches are tinted red, the rest darkened
        np.testing.assert_array_equal(tinted, m)
        assert m.sum() == n


def test_rollout_view_needs_the_rollout_map(digit_pass):
    with pytest.raises(InputError, match="rollout"):
        views.tiles(digit_pass.at("cls"), "rollout")


@pytest.mark.parametrize(
    "view, threshold, alpha, cmap, fragment",
    [
        ("cube", 0.6, 0.6, "inferno", "heads, mean, rollout, masks"),
        ("heads", 0.0, 0.6, "inferno", "more than 0"),
        ("heads", 1.5, 0.6, "inferno", "at most 1"),
        ("heads", 0.6, -0.1, "inferno", "0 to 1 (0: the image only"),
        ("heads", 0.6, 0.5, "nocmap", "inferno"),
    ],
)
def test_bad_view_or_style_is_refused_with_what_is_accepted(digit_pass, view, threshold, alpha, cmap, fragment):
    with pytest.raises(InputError, match=re.escape(fragment)):
        views.tiles(digit_pass.at("cls"), view, threshold=threshold, alpha=alpha, cmap=cmap)


def test_view_labels_are_accepted_too():
    assert views.check_view("Per-head grid") == "heads" and views.check_view(" ROLLOUT ") == "rollout"


def render_overlay(res, m):
    from attention.render import overlay

    return overlay(np.asarray(res.image, dtype=np.uint8), m, alpha=1.0)


def test_the_large_map_is_at_least_480_px_and_a_click_selects_the_patch_under_it(digit_pass):
    res = digit_pass.at("cls")
    img = views.query_image(res)
    assert img.shape == (504, 504, 3)  # 28 px x 18: the shorter side at least BIG_DISPLAY
    step = 4 * 18  # patch 4 px, enlarged 18 times
    for r, c in [(0, 0), (3, 4), (6, 6)]:
        assert views.patch_at(c * step + step // 2, r * step + 5, res) == (r, c)
    assert views.patch_at(-3, 5000, res) == (6, 0)  # clamped to the grid
    marked = views.query_image(digit_pass.at((3, 4)))
    y0, x0 = 3 * step, 4 * step
    assert (marked[y0, x0 : x0 + step] == views.QUERY_COLOR).all()  # the square around the query patch
    left_arm = marked[y0 + step // 2, x0 - 2 * step : x0 - 1]
    assert (left_arm == views.QUERY_COLOR).all()  # an arm points at the query patch


def test_the_large_map_shows_the_chosen_head(digit_pass):
    res = digit_pass.at("cls")
    heads = [views.query_image(res, head=h, alpha=1.0) for h in range(res.maps.shape[0])]
    assert not np.array_equal(heads[0], heads[1])
    assert np.array_equal(views.query_image(res, alpha=1.0), views.query_image(res, head=None, alpha=1.0))
    small = render_overlay(res, res.maps[2])
    assert np.array_equal(heads[2][::18, ::18], small)  # the head's own overlay, enlarged


def test_scores_table_prints_raw_scores_and_their_softmax_in_rank_order(digit_pass):
    res = digit_pass.at((2, 2), 2)
    summary, rows = texts.scores_table(res, head=1, top=5)
    order = np.argsort(-res.weights[2, 1], kind="stable")[:5]
    s, w = res.scores[2, 1], res.weights[2, 1]
    np.testing.assert_allclose(w, np.exp(s - s.max()) / np.exp(s - s.max()).sum(), rtol=1e-4)
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5]  # ranks, nothing pinned above rank 1
    weights = [r[3] for r in rows]
    assert weights == sorted(weights, reverse=True) and weights[0] == pytest.approx(w.max(), abs=1e-4)
    for row, j in zip(rows, order):
        assert row[2] == pytest.approx(s[j], abs=1e-3) and row[1] == texts.token_name(res, j)
    assert f"{res.prefix_share[2, 1]:.1%} of the weight on the prefix" in summary and "patch (2, 2)" in summary
    with pytest.raises(InputError, match="0 to 3"):
        texts.scores_table(res, head=4)
    with pytest.raises(InputError, match="Head 1.5 is not a whole number"):
        texts.scores_table(res, head=1.5)


def test_legend_shows_the_colormap_ends():
    html = texts.legend_html("viridis")
    lo, hi = colormap("viridis")[0], colormap("viridis")[255]
    assert f"rgb({lo[0]},{lo[1]},{lo[2]}) 0%" in html and f"rgb({hi[0]},{hi[1]},{hi[2]}) 100%" in html


def test_tiles_drawn_small_match_full_tiles_reduced(tmp_path):
    big = passes.get_pass(DIGIT, "mnist_vit", "224").at((10, 20), -1)  # 224 px, 56x56 patches of 4 px: shown 1:1
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
        views.tiles(passes.get_pass(DIGIT, "mnist_vit", "auto").at(), "mean", shrink=2)  # 28 px: shown enlarged


def no_forward(monkeypatch, p, why: str) -> None:
    """Any forward of pass `p`'s model fails the test: its patch embedding (the first step of every forward,
    whatever path calls it: passes.forward, attention_maps, batch_maps, the engine) is made to fail."""
    from attention.vit.models.loader import is_loaded, load_vit

    assert is_loaded(p.model)
    model = load_vit(p.model, device=p.device)  # the cached model the pass was computed with
    monkeypatch.setattr(model.patch_embed, "forward", lambda *a, **k: pytest.fail(why))
    monkeypatch.setattr(passes, "forward", lambda *a, **k: pytest.fail(why))


def test_the_tab_frame_composes_a_view_from_the_cached_pass(digit_pass, tmp_path, monkeypatch):
    no_forward(monkeypatch, digit_pass, "no forward pass for a new view")
    v = frames.ViewSpec(query=(0, 0), layer=-1, view="rollout", cmap="viridis")
    f = frames.tab_frame(digit_pass, v, head=2, root=tmp_path)
    assert f.res.query == (0, 0) and f.res.layer == 3 and len(f.outputs.thumbs) == 1 and f.outputs.npz is None
    assert np.asarray(Image.open(f.query_png)).shape == (504, 504, 3)  # the large map
    shown = html.unescape(f.details)  # the model name escaped for Markdown (`errors.markdown_text`), read as shown
    assert "<code>mnist_vit</code>" in shown and "7×7" in f.details and "50 tokens" in f.details and "ms" in f.details
    assert 0 < f.seconds < 60  # the drawing's own wall time
    assert "patch (row 0, col 0)" in f.query_label and "Head 2" in f.scores_summary


def test_the_download_and_the_api_sheet_hold_the_same_view_with_its_rollout(digit_pass, tmp_path, monkeypatch):
    no_forward(monkeypatch, digit_pass, "no forward pass for a download")
    opts = {"head_fusion": "max", "discard_ratio": 0.5}
    v = frames.ViewSpec(query=(0, 0), view="rollout", rollout_options=opts)
    d, a = frames.download_maps(digit_pass, v, root=tmp_path), frames.api_sheet(digit_pass, v, root=tmp_path)
    want = digit_pass.rollout((0, 0), 3, **opts)
    for r in (d, a):
        np.testing.assert_allclose(np.load(r.outputs.npz)["rollout"], want)
        assert r.outputs.captions == ["rollout through layers 0-3 · max of heads, lowest 50% dropped (per row)"]
        assert 0 < r.seconds < 60  # the API reports it as render_ms
    assert len(d.outputs.pngs) == 1 and a.outputs.pngs == [] and a.outputs.sheet.endswith(".png")


def test_each_view_has_a_legend_that_matches_it(digit_pass):
    assert "linear-gradient" in texts.legend_html("viridis", "heads")
    masks = texts.legend_html("inferno", "masks", 4, 0.6)
    assert "60%" in masks and "linear-gradient" not in masks
    fig3 = texts.legend_html("inferno", "fig3", 4, 0.5)
    assert "linear-gradient" not in fig3 and fig3.count("head ") == 4 and "50%" in fig3
    f = frames.tab_frame(digit_pass, frames.ViewSpec(view="fig3", threshold=0.5))
    assert f.legend == fig3 and f.outputs.captions == ["every head's mask at 50%, one colour per head"]


def test_the_fig3_view_tints_and_outlines_each_heads_mask_in_its_own_colour(digit_pass):
    from attention.render import HEAD_COLORS, masks_figure

    res = digit_pass.at()
    masks = threshold_masks(res.maps, 0.6)
    fig = masks_figure(np.asarray(res.image), masks)
    for h in range(len(masks)):
        assert (fig == HEAD_COLORS[h]).all(-1).any()  # every head's outline is drawn in its colour
    p = res.patch_size
    outside = (~masks.any(0)).repeat(p, 0).repeat(p, 1)  # pixels of patches in no mask
    assert np.array_equal(fig[outside], np.asarray(res.image)[outside])  # left untouched


def test_photos_are_shown_as_jpeg_and_enlarged_maps_as_png(digit_pass, tmp_path):
    photo = passes.get_pass(str(PHOTO), "mnist_vit", "240")  # 240 px: shown at its own size
    f = frames.tab_frame(photo, frames.ViewSpec(query=(3, 4)), root=tmp_path)
    assert f.query_png.endswith(".jpg") and all(t.endswith(".jpg") for t in f.outputs.thumbs)
    big = np.asarray(Image.open(f.query_png), dtype=int)
    exact = views.query_image(photo.at((3, 4)), head=0)
    assert big.shape == exact.shape and np.abs(big - exact).mean() < 2  # 4:4:4 JPEG: close to exact
    download = frames.download_maps(photo, frames.ViewSpec(query=(3, 4)), root=tmp_path).outputs
    assert download.pngs and all(p.endswith(".png") for p in download.pngs)  # the download keeps exact PNGs
    g = frames.tab_frame(digit_pass, root=tmp_path)  # a digit, enlarged: PNG, exact
    assert g.query_png.endswith(".png") and all(t.endswith(".png") for t in g.outputs.thumbs)
