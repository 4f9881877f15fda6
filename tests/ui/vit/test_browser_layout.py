"""In a real browser: the ViT tab's layout. On a desktop (1400x1000) the large map and the controls that
act on it are on the first screen together; on a phone (390x844) the layer slider comes right under the
map; no panel makes the page wider than the screen; the caption names the head the large map shows and
its tile is the highlighted one, whatever changed it."""

from __future__ import annotations

import contextlib
import re

import pytest

from tests.conftest import ROOT, screenshot
from tests.ui.pages import compare_with, opened
from tests.ui.vit.test_browser import gallery_srcs
from tests.ui.vit.test_browser_live import click_range, ready

DESKTOP, PHONE = (1400, 1000), (390, 844)

# elements whose box reaches past the right edge of the page, unless a scrolling or clipping box
# around them (a table's own scroller) ends inside it: what a visitor would find cut off
OVERFLOWING = """() => {
  const W = document.documentElement.clientWidth, out = [];
  const clipped = (e) => {
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (["auto", "scroll", "hidden", "clip"].includes(s.overflowX) && a.getBoundingClientRect().right <= W + 1)
        return true;
    }
    return false;
  };
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.height > 0 && r.right > W + 1 && !clipped(e)) out.push(e.id || e.className || e.tagName);
  }
  return [document.documentElement.scrollWidth - W, out.slice(0, 5)];
}"""


@contextlib.contextmanager
def visit(browser, app_url, size, path=""):
    """A fresh page of `size` (width, height) at the app (+ `path`), its first screen ready."""
    with opened(browser, app_url.rstrip("/") + "/" + path, size) as pg:
        ready(pg)
        yield pg


def box(pg, selector: str) -> dict:
    return pg.locator(selector).first.bounding_box()


def assert_nothing_overflows(pg, state: str) -> None:
    extra, elements = pg.evaluate(OVERFLOWING)
    assert extra <= 0 and elements == [], f"{state}: {extra} px wider than the screen; {elements}"


def shown_head(pg) -> tuple[str, int]:
    """(the caption's text, the index of the highlighted tile)."""
    caption = pg.locator("#vit-caption").inner_text()
    tiles = pg.locator("#vit-gallery .thumbnail-item")
    selected = [i for i in range(tiles.count()) if "selected" in (tiles.nth(i).get_attribute("class") or "")]
    assert len(selected) == 1, selected
    return caption, selected[0]


def wait_for_head(pg, head: int) -> None:
    """The caption names `head` and its tile is the highlighted one."""
    pg.locator("#vit-caption").get_by_text(f"head {head}", exact=False).wait_for()
    pg.wait_for_function(
        "h => { const s = [...document.querySelectorAll('#vit-gallery .thumbnail-item')]"
        ".map(e => e.classList.contains('selected')); return s.length > h && s[h] && s.filter(Boolean).length === 1 }",
        arg=head,
    )
    caption, selected = shown_head(pg)
    assert re.search(rf"\bhead {head}\b", caption) and selected == head, (caption, selected)


@pytest.mark.browser
def test_on_a_desktop_the_map_and_its_controls_are_on_the_first_screen(browser, app_url):
    with visit(browser, app_url, DESKTOP) as pg:
        assert pg.evaluate("window.scrollY") == 0
        for sel in ("#vit-query-image img", "#vit-layer", "#vit-head", "#vit-view", "#vit-model", "#vit-caption"):
            b = box(pg, sel)
            assert b["x"] >= 0 and b["y"] >= 0, sel
            assert b["x"] + b["width"] <= DESKTOP[0] and b["y"] + b["height"] <= DESKTOP[1], (sel, b)
        assert box(pg, "#vit-gallery img")["y"] + 100 <= DESKTOP[1]  # the head tiles start there too
        examples = box(pg, "#vit-digit-examples")
        assert examples["y"] > box(pg, "#vit-layer")["y"]  # the examples below the map, not above it
        m, lay = box(pg, "#vit-query-image img"), box(pg, "#vit-layer")
        assert 0 <= lay["y"] - (m["y"] + m["height"]) <= 40  # the layer slider right under the map
        assert_nothing_overflows(pg, "desktop")
        screenshot(pg, "vit_layout_desktop")


@pytest.mark.browser
def test_on_a_phone_the_layer_slider_starts_right_under_the_map(browser, app_url):
    with visit(browser, app_url, PHONE) as pg:
        m, lay, hd = box(pg, "#vit-query-image img"), box(pg, "#vit-layer"), box(pg, "#vit-head")
        assert 0 <= lay["y"] - (m["y"] + m["height"]) <= 150, (m, lay)
        assert lay["y"] < hd["y"] < box(pg, "#vit-gallery")["y"] < box(pg, "#vit-model")["y"]  # then the rest
        for sel in ("#vit-layer input[type=number]", "#vit-layer button.reset-button", "#vit-layer input[type=range]"):
            b = box(pg, sel)
            assert b["height"] >= 40, (sel, b)  # touch targets
        assert pg.locator("#vit-query-image button.icon-button").count() == 0  # no icons over the map (issue 37)
        assert pg.get_by_role("tab", name="ViT attention").bounding_box()["height"] >= 40
        assert_nothing_overflows(pg, "phone")
        screenshot(pg, "vit_layout_phone")


@pytest.mark.browser
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_no_panel_makes_the_page_wider_than_the_screen(browser, app_url, size):
    with visit(browser, app_url, size) as pg:
        pg.get_by_text("Scores vs weights").click()
        pg.locator("#vit-scores").get_by_text("rank").first.wait_for()
        for bars in ("#vit-score-bars", "#vit-weight-bars"):  # the bar charts are drawn (Vega's marks, laid out)
            pg.locator(f"{bars} .marks").first.wait_for()
        pg.wait_for_function(
            "() => ['#vit-score-bars', '#vit-weight-bars'].every(s => document.querySelector(s + ' .marks')"
            ".getBoundingClientRect().width > 0)"
        )
        for bars in ("#vit-score-bars", "#vit-weight-bars"):  # at full size, not squeezed to fit
            assert box(pg, bars)["width"] >= 280 and box(pg, bars)["height"] >= 250, bars
        assert_nothing_overflows(pg, "scores")
        pg.get_by_text("Model view: every layer").click()
        pg.locator("#vit-model-view-btn").click()
        pg.wait_for_function("() => (document.querySelector('#vit-model-view img') || {}).naturalWidth > 0")
        assert_nothing_overflows(pg, "model view")
        pg.get_by_text("Features of this layer").click()
        pg.locator("#vit-features").get_by_text("PCA of layer").wait_for()
        assert_nothing_overflows(pg, "features")
        compare_with(pg, "mnist_vit")
        pg.locator("#vit-cmp-img img").wait_for()
        assert_nothing_overflows(pg, "compare")
        pg.locator("#vit-view").get_by_text("Rollout").click()
        pg.locator("#vit-gallery").get_by_text("rollout through layers").first.wait_for()
        assert_nothing_overflows(pg, "rollout")
        screenshot(pg, f"vit_panels_{size[0]}")


@pytest.mark.browser
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_caption_names_the_head_shown_and_its_tile_is_highlighted(browser, app_url, size):
    with visit(browser, app_url, size) as pg:
        wait_for_head(pg, 0)  # the first screen
        pg.locator("#vit-gallery .thumbnail-item").nth(2).click()  # a tile
        wait_for_head(pg, 2)
        click_range(pg, "#vit-head", -2)  # the slider's right end: the last head
        wait_for_head(pg, 3)
        number = pg.locator("#vit-head input[type=number]")
        number.fill("1")
        number.press("Enter")  # a typed number
        wait_for_head(pg, 1)
        pg.locator("#vit-view").get_by_text("Mean of heads").click()  # a one-tile view
        pg.locator("#vit-caption").get_by_text("mean of the 4 heads").wait_for()
        pg.locator("#vit-view").get_by_text("Per-head grid").click()  # and back: the slider's head
        wait_for_head(pg, 1)
        pg.locator("#vit-gallery .thumbnail-item").nth(4).click()  # the mean's tile: the mean view
        pg.locator("#vit-caption").get_by_text("mean of the 4 heads").wait_for()  # (drawn here at once)
        pg.wait_for_function("() => document.querySelectorAll('#vit-gallery .thumbnail-item').length === 1")
        assert pg.locator("#vit-head input[type=number]").input_value() == "1"  # the mean is no head: kept
        pg.locator("#vit-view").get_by_text("Per-head grid").click()  # back: the slider's head, not the last
        wait_for_head(pg, 1)
        assert pg.get_by_test_id("toast-body").count() == 0


@pytest.mark.browser
def test_a_permalinks_head_is_named_and_highlighted(browser, app_url):
    with visit(browser, app_url, DESKTOP, "?example=digit_5&layer=1&head=2") as pg:
        wait_for_head(pg, 2)
        assert "layer 1" in pg.locator("#vit-caption").inner_text()


@pytest.mark.browser
def test_a_corrupt_upload_gives_one_toast_and_a_note_and_keeps_the_maps_and_their_image(page, tmp_path):
    ready(page)
    big, tiles = page.locator("#vit-query-image img").get_attribute("src"), gallery_srcs(page)
    bad = tmp_path / "corrupt.jpg"
    bad.write_bytes((ROOT / "examples" / "photos" / "chelsea.jpg").read_bytes()[:3000])
    page.locator("#vit-image input[type=file]").set_input_files(str(bad))
    toast = page.get_by_test_id("toast-body")
    toast.first.wait_for()
    # a note beside the kept maps; the input shows the picture they are of again, not a broken one
    page.locator("#vit-note").get_by_text("truncated or corrupt").wait_for()
    assert toast.count() == 1 and "truncated or corrupt" in toast.first.inner_text()
    page.locator("#vit-image img").wait_for()
    assert page.locator("#vit-query-image img").get_attribute("src") == big and gallery_srcs(page) == tiles
    assert page.locator("#vit-results").get_by_text("Error", exact=True).count() == 0  # no marks over the maps
    screenshot(page, "vit_corrupt_upload")
