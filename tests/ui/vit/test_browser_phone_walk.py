"""In a real browser at 390x844 (and 1400x1000 for what a desktop must keep): a visitor's walk through
the ViT tab on a phone. Every control of the walk is within one screen (844 px) of the map, or the
page brings the map back into view after using it (the view switch, the upload and the examples lie
far under the map on a phone); the distances are measured here. The feature views are readable
(one a row, at the screen's width, their captions whole); no Gradio icons lie over the maps; every
touch target of the walk is at least 44 px high."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, screenshot
from tests.ui.vit.test_browser_layout import DESKTOP, PHONE, box, visit

MAP = "#vit-query-image img"


def distance(pg, sel: str) -> float:
    """Vertical px between the map and the control `sel` (0 when they overlap in height)."""
    m, c = box(pg, MAP), box(pg, sel)
    return max(0.0, c["y"] - (m["y"] + m["height"]), m["y"] - (c["y"] + c["height"]))


def map_in_view(pg, size) -> bool:
    m = box(pg, MAP)
    return m["y"] >= -1 and m["y"] + min(m["height"], 200) <= size[1]


@pytest.mark.browser
def test_on_a_phone_every_control_of_the_walk_is_near_the_map_or_brings_it_back(browser, app_url):
    with visit(browser, app_url, PHONE) as pg:
        near = {sel: distance(pg, sel) for sel in ("#vit-layer", "#vit-head")}
        far = {sel: distance(pg, sel) for sel in ("#vit-view", "#vit-image", "#vit-examples")}
        print("px from the map:", near, far)
        assert all(d <= PHONE[1] for d in near.values()), near  # used right under the map
        # the view switch: far under the map; using it brings the map back
        assert far["#vit-view"] > PHONE[1]
        pg.locator("#vit-view").get_by_text("Mean of heads").click()
        pg.locator("#vit-caption").get_by_text("mean of the 4 heads").wait_for()
        pg.wait_for_function("() => document.querySelector('#vit-caption').getBoundingClientRect().top < 422")
        assert map_in_view(pg, PHONE)
        # an example: far too; its answer brings the map back, showing that digit
        pg.locator("#vit-digit-examples").get_by_role("button").nth(7).scroll_into_view_if_needed()
        assert not map_in_view(pg, PHONE)
        token = pg.evaluate("window.attentionLive.p.token")
        pg.locator("#vit-digit-examples").get_by_role("button").nth(7).click()
        pg.wait_for_function("t => window.attentionLive.p.token !== t", arg=token)
        pg.wait_for_function("() => document.querySelector('#vit-caption').getBoundingClientRect().top < 422")
        assert map_in_view(pg, PHONE)
        # an upload: the same
        pg.locator("#vit-image").scroll_into_view_if_needed()
        token = pg.evaluate("window.attentionLive.p.token")
        pg.locator("#vit-image button[aria-label='Remove Image']").click()
        pg.locator("#vit-image input[type=file]").set_input_files(str(ROOT / "examples" / "digits" / "digit_5.png"))
        pg.wait_for_function("t => window.attentionLive.p.token !== t", arg=token)
        pg.wait_for_function("() => document.querySelector('#vit-caption').getBoundingClientRect().top < 422")
        assert map_in_view(pg, PHONE)
        # layer and head right under the map: usable without scrolling, 44 px targets
        for sel in ("#vit-layer input[type=number]", "#vit-head input[type=number]", "#vit-layer input[type=range]"):
            assert box(pg, sel)["height"] >= 44, sel
        box_ = pg.locator("#vit-layer input[type=number]")
        box_.fill("1")
        box_.press("Enter")
        pg.locator("#vit-details").get_by_text("layer 1/3").wait_for()
        assert map_in_view(pg, PHONE)
        screenshot(pg, "phone_walk")


@pytest.mark.browser
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_no_gradio_icons_over_the_maps_and_44_px_targets(browser, app_url, size):
    with visit(browser, app_url, size) as pg:
        for maps in ("#vit-query-image", "#vit-gallery"):
            icons = pg.locator(f"{maps} button.icon-button, {maps} .icon-button-wrapper button")
            assert icons.count() == 0, (maps, icons.count())  # no fullscreen, download or share over a map
        assert pg.locator("#vit-download-btn").is_visible()  # the download: in its panel
        if size == PHONE:
            for sel in ("#vit-link-btn", "#vit-download-btn", "#vit-scores-panel .label-wrap", "#vit-view label"):
                assert box(pg, sel)["height"] >= 44, (sel, box(pg, sel))
        pg.get_by_text("Features of this layer").click()
        feats = pg.locator("#vit-features")
        feats.get_by_text("PCA of layer 3").first.wait_for()
        pg.wait_for_function("() => [...document.querySelectorAll('#vit-features img')].every(i => i.complete)")
        tiles = feats.locator(".thumbnail-item")
        assert tiles.count() == 3
        for i in range(3):
            tile, caption = tiles.nth(i).bounding_box(), tiles.nth(i).locator(".caption-label")
            if size == PHONE:  # one a row, nearly the screen's width, the caption whole and under the picture
                assert tile["width"] >= 0.7 * size[0], tile
                assert caption.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), caption.inner_text()
        if size == PHONE:
            ys = [tiles.nth(i).bounding_box()["y"] for i in range(3)]
            assert ys[0] < ys[1] < ys[2]
        feats.scroll_into_view_if_needed()
        screenshot(pg, f"features_{size[0]}")
