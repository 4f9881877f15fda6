"""In a real browser: the ViT tab offline. Run a digit example on mnist_vit, click a patch to
make it the query and see the maps change, switch to the rollout view."""

from __future__ import annotations

import re

import pytest

from tests.conftest import screenshot
from tests.ui.pages import compare_with, opened, permalink


def click_image_at(page, selector: str, fx: float, fy: float) -> None:
    """Click at fractions (fx, fy) of the picture shown in an <img> (object-fit: contain)."""
    img = page.locator(selector)
    page.wait_for_function(  # the picture is loaded (natural size known)
        "s => { const e = document.querySelector(s); return e && e.complete && e.naturalWidth > 0 }", arg=selector
    )
    w, h, nw, nh = img.evaluate("e => [e.clientWidth, e.clientHeight, e.naturalWidth, e.naturalHeight]")
    s = min(w / nw, h / nh)
    x0, y0 = (w - nw * s) / 2, (h - nh * s) / 2
    img.click(position={"x": x0 + fx * nw * s, "y": y0 + fy * nh * s})


def gallery_srcs(page) -> list[str]:
    return page.locator("#vit-gallery img").evaluate_all("els => els.map(e => e.src)")


@pytest.mark.browser
def test_digit_example_click_a_patch_then_rollout(page):
    page.locator("#vit-notice").get_by_text("Offline").wait_for()  # says why mnist_vit is the default
    page.locator("#vit-digit-examples").get_by_role("button").nth(3).click()  # digit 3
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    page.locator("#vit-details").get_by_text("mnist_vit").wait_for()
    assert page.locator("#vit-gallery img").count() >= 5
    before = gallery_srcs(page)
    screenshot(page, "vit_digit")

    click_image_at(page, "#vit-query-image img", 0.8, 0.3)
    page.locator("#vit-query-label").get_by_text(re.compile(r"patch \(row \d, col \d\)")).wait_for()
    page.wait_for_function(
        "b => [...document.querySelectorAll('#vit-gallery img')].map(e => e.src).join() != b", arg=",".join(before)
    )
    assert gallery_srcs(page) != before
    label = page.locator("#vit-query-label").inner_text()
    r, c = map(int, re.search(r"row (\d), col (\d)", label).groups())
    assert (r, c) == (2, 5)  # 0.3 and 0.8 of a 7x7 grid
    assert page.locator("#vit-qrow input").input_value() == "2"
    screenshot(page, "vit_patch_query")

    page.locator("#vit-view").get_by_text("Rollout").click()
    page.locator("#vit-gallery").get_by_text(re.compile("rollout through layers")).first.wait_for()
    assert page.locator("#vit-gallery img").count() == 1
    assert "row 2, col 5" in page.locator("#vit-query-label").inner_text()  # the query is kept
    assert page.get_by_test_id("toast-body").count() == 0  # no error anywhere
    screenshot(page, "vit_rollout")

    compare_with(page, "mnist_vit")
    page.locator("#vit-compare-details").get_by_text("mnist_vit").wait_for()
    page.locator("#vit-cmp-img img").wait_for()  # the second model's large map beside the main one
    page.wait_for_function(  # both pictures decoded and the panel laid out (it grows as they arrive)
        """() => {
            const [a, b] = ['#vit-cmp-main img', '#vit-cmp-img img'].map(s => document.querySelector(s));
            if (!a || !b || !a.complete || !b.complete || !a.naturalWidth || !b.naturalWidth) return false;
            const [ra, rb] = [a, b].map(e => e.getBoundingClientRect());
            return Math.abs(ra.top - rb.top) < 2;
        }""",
        timeout=15_000,
    )
    main, second = (page.locator(f"{s} img").bounding_box() for s in ("#vit-cmp-main", "#vit-cmp-img"))
    assert abs(main["width"] - second["width"]) < 2 and abs(main["y"] - second["y"]) < 2  # side by side, same size
    for which, name in (("#vit-cmp-main", "Main model: mnist_vit"), ("#vit-cmp-img", "Second model: mnist_vit")):
        assert page.locator(which).get_by_text(name).count() == 1  # each captioned with its model
    page.get_by_text("Second model: every head").click()
    page.locator("#vit-compare-gallery").get_by_text(re.compile("rollout through layers")).first.wait_for()
    assert page.get_by_test_id("toast-body").count() == 0
    screenshot(page, "vit_compare")


def big_map_src(page) -> str:
    return page.locator("#vit-query-image img").get_attribute("src") or ""


@pytest.mark.browser
def test_the_first_screen_shows_finished_maps_without_a_click(page):
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()  # no click: the start example
    assert page.locator("#vit-gallery img").count() == 5  # mnist_vit offline: 4 heads and their mean
    assert page.locator("#vit-details").get_by_text("mnist_vit").count() == 1
    assert page.locator("#vit-image img").count() == 1  # the start image is in the input too
    assert page.locator("#vit-layer input[type=number]").input_value() == "3"  # sliders fit the model (4 layers)
    assert page.locator("#vit-layer input[type=range]").get_attribute("max") == "3"
    assert page.locator("#vit-head input[type=range]").get_attribute("max") == "3"
    assert page.locator("#vit-qrow input").input_value() == "" == page.locator("#vit-qcol input").input_value()
    width = page.locator("#vit-query-image img").evaluate("e => e.getBoundingClientRect().width")
    assert width >= 480  # the large map
    tile = page.locator("#vit-gallery img").first.evaluate("e => e.getBoundingClientRect().width")
    assert tile >= 180
    screenshot(page, "vit_first_screen")


@pytest.mark.browser
def test_clicking_a_head_tile_shows_that_head_large(page):
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    before = big_map_src(page)
    page.locator("#vit-gallery .thumbnail-item").nth(2).click()
    page.wait_for_function("b => document.querySelector('#vit-query-image img').src !== b", arg=before)
    assert page.locator("#vit-head input[type=number]").input_value() == "2"
    assert page.get_by_test_id("toast-body").count() == 0


@pytest.mark.browser
def test_the_first_change_after_an_example_is_kept(page):
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    page.wait_for_function("() => (window.attentionLive || {}).p")  # the first screen's view, in the browser
    token = page.evaluate("window.attentionLive.p.token")
    page.locator("#vit-digit-examples").get_by_role("button").nth(7).click()  # digit 7
    page.locator("#vit-details").get_by_text("layer 3/3").wait_for()
    # the example's follow-up (the visitor's pass, sliders, the browser's copy of the view) has landed
    page.wait_for_function("t => window.attentionLive.p.token !== t", arg=token)
    before = big_map_src(page)
    rng = page.locator("#vit-layer input[type=range]")
    box = rng.bounding_box()
    rng.click(position={"x": 2, "y": box["height"] / 2})  # the slider's left end: layer 0
    page.locator("#vit-details").get_by_text("layer 0/3").wait_for()
    page.wait_for_function("b => document.querySelector('#vit-query-image img').src !== b", arg=before)
    # the maps and the slider come in one answer, the last one: nothing later may put the slider back
    assert page.locator("#vit-layer input[type=number]").input_value() == "0"  # no snap back to the last layer
    assert page.locator("#vit-details").get_by_text("layer 0/3").count() == 1


@pytest.mark.browser
def test_a_bad_query_row_marks_only_that_field_and_keeps_the_maps(page):
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    before, big = gallery_srcs(page), big_map_src(page)
    page.locator("#vit-qcol input").fill("2")
    row = page.locator("#vit-qrow input")
    row.fill("99")
    row.press("Enter")
    page.locator("#vit-qrow").get_by_text(re.compile("accepted a whole number 0 to 6")).wait_for()
    assert page.locator("#vit-qcol").get_by_text("accepted").count() == 0  # the column is fine
    # the mark is the end of that job (its check refused it, so it computed nothing): the maps are the last good ones
    assert gallery_srcs(page) == before and big_map_src(page) == big
    screenshot(page, "vit_bad_query")


@pytest.mark.browser
def test_the_download_is_made_when_asked_for_the_view_on_screen(page):
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    assert page.locator("#vit-download").is_hidden()  # nothing written until asked
    page.locator("#vit-download-btn").click()
    link = page.locator("#vit-download a").first
    link.wait_for()
    assert re.search(r"attention_mnist_vit_L3_cls_heads\s*\.npz", page.locator("#vit-download").inner_text())


def vit_state(page) -> dict:
    """What the ViT tab's controls show."""
    return {
        "layer": page.locator("#vit-layer input[type=number]").input_value(),
        "head": page.locator("#vit-head input[type=number]").input_value(),
        "view": page.locator("#vit-view input:checked").get_attribute("value"),
        "q": (page.locator("#vit-qrow input").input_value(), page.locator("#vit-qcol input").input_value()),
        "label": page.locator("#vit-query-label").inner_text(),
    }


@pytest.mark.browser
def test_a_permalink_opens_its_view_and_the_link_button_gives_it_back(page, app_url):
    page.goto(app_url.rstrip("/") + "/?example=digit_5&layer=1&head=2&view=mean&q=3,4")
    page.locator("#vit-query-label").get_by_text("row 3, col 4").wait_for()
    want = {"layer": "1", "head": "2", "view": "mean", "q": ("3", "4")}
    assert {k: v for k, v in vit_state(page).items() if k != "label"} == want
    assert page.locator("#vit-details").get_by_text("mnist_vit").count() == 1  # a digit: the digit model

    link = permalink(page, "example=digit_5", "model=mnist_vit", "layer=1", "head=2", "view=mean", "q=3,4")
    assert page.get_by_test_id("toast-body").count() == 0
    screenshot(page, "vit_permalink")

    page.goto(link)  # the round trip
    page.locator("#vit-query-label").get_by_text("row 3, col 4").wait_for()
    assert {k: v for k, v in vit_state(page).items() if k != "label"} == want


@pytest.mark.browser
def test_a_bad_permalink_says_which_parameter_and_shows_the_start_screen(page, app_url):
    page.goto(app_url.rstrip("/") + "/?layer=nine")
    page.get_by_test_id("toast-body").get_by_text("layer='nine'").wait_for()
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()


@pytest.mark.browser
def test_the_model_view_shows_every_layer_and_head_on_one_sheet(page):
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    page.get_by_text("Model view: every layer").click()
    page.locator("#vit-model-view-btn").click()
    img = page.locator("#vit-model-view img")
    img.wait_for()
    page.wait_for_function("() => document.querySelector('#vit-model-view img').naturalWidth > 0")
    w, h = img.evaluate("e => [e.naturalWidth, e.naturalHeight]")
    assert (w, h) == (4 + 4 * (154 + 4), 4 + 4 * (154 + 14 + 4))  # mnist_vit: 4 layers x 4 heads, 22 px a patch
    assert page.get_by_test_id("toast-body").count() == 0
    screenshot(page, "vit_model_view")


@pytest.mark.browser
def test_the_feature_views_open_and_follow_the_query(page):
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    page.get_by_text("Features of this layer").click()
    feats = page.locator("#vit-features")
    feats.get_by_text("similarity to the CLS token").wait_for()
    assert feats.locator("img").count() == 3
    feats.get_by_text("PCA of layer 3").wait_for()
    click_image_at(page, "#vit-query-image img", 0.5, 0.5)  # patch (3, 3) of the 7x7 digit grid
    feats.get_by_text("similarity to patch (row 3, col 3)").wait_for()  # the query vocabulary's label
    assert page.get_by_test_id("toast-body").count() == 0
    screenshot(page, "vit_features")


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [(1400, 1000), (390, 844)])
def test_the_feature_panel_offers_dinov3_s_pca_beside_the_min_max_one(browser, app_url, viewport):
    with opened(browser, app_url, viewport) as pg:
        pg.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
        pg.get_by_text("Features of this layer").click()
        feats = pg.locator("#vit-features")
        feats.get_by_text("PCA of layer 3").first.wait_for()
        assert feats.get_by_text("DINOv3 style").count() == 0
        pg.locator("#vit-pca-style").get_by_text("DINOv3's notebook").click()
        feats.get_by_text("PCA of layer 3's patch features · DINOv3 style").wait_for()
        assert feats.locator("img").count() == 3 and pg.get_by_test_id("toast-body").count() == 0
        pg.locator("#vit-pca-style").scroll_into_view_if_needed()
        screenshot(pg, f"vit_features_dinov3_{viewport[0]}")


@pytest.mark.browser
def test_on_a_phone_all_three_tabs_are_on_one_line_and_the_maps_come_first(browser, app_url):
    with opened(browser, app_url, (390, 844)) as pg:
        pg.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
        for name in ("ViT attention", "MNIST retrieval", "Q/K/V calculator"):
            assert pg.get_by_role("tab", name=name).is_visible(), f"tab {name!r} is hidden behind the menu"
        maps, controls = (pg.locator(s).bounding_box() for s in ("#vit-query-image", "#vit-model"))
        assert maps["y"] < controls["y"]  # results before controls
        screenshot(pg, "vit_phone")
