"""In a real browser: the large map is drawn in the page the moment a patch, a layer or a head is
picked (attention/vit/live.py), and it is the server's picture, pixel for pixel (mnist_vit offline:
PNG both sides). The server's picture then takes its place."""

from __future__ import annotations

import re

import pytest

from tests.conftest import screenshot
from tests.ui.test_browser_vit import click_image_at

MAP = "#vit-query-image img"

# pixels where the server's picture (in the <img>) differs from the last one drawn here (-1: sizes differ)
DIFFERING = """() => {
  const L = window.attentionLive, img = document.querySelector("#vit-query-image img");
  const c = document.createElement("canvas");
  [c.width, c.height] = [img.naturalWidth, img.naturalHeight];
  const g = c.getContext("2d");
  g.drawImage(img, 0, 0);
  if (L.last.width !== c.width || L.last.height !== c.height) return -1;
  const s = g.getImageData(0, 0, c.width, c.height).data, o = L.last.data;
  let n = 0;
  for (let i = 0; i < s.length; i += 4) if (s[i] !== o[i] || s[i + 1] !== o[i + 1] || s[i + 2] !== o[i + 2]) n++;
  return n;
}"""


def ready(page) -> None:
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    page.wait_for_function("() => (window.attentionLive || {}).base")


def drawn_then_served(page, act) -> int:
    """Do `act`; check the map was drawn here (a canvas over the <img>) before the server's picture
    came, then replaced by it; return the pixels where the two differ."""
    n, src = page.evaluate("window.attentionLive.drawn"), page.locator(MAP).get_attribute("src")
    act()
    page.wait_for_function("n => window.attentionLive.drawn > n", arg=n)
    page.wait_for_function(
        "s => { const e = document.querySelector('#vit-query-image img'); return e.src !== s && e.complete }", arg=src
    )
    page.wait_for_function("() => document.querySelector('#vit-live-canvas').style.display === 'none'")
    return page.evaluate(DIFFERING)


@pytest.mark.browser
def test_patch_layer_and_head_are_drawn_here_first_and_match_the_servers_picture(page):
    ready(page)
    assert drawn_then_served(page, lambda: click_image_at(page, MAP, 0.8, 0.3)) == 0  # with the crosshair
    assert "row 2, col 5" in page.locator("#vit-query-label").inner_text()

    rng = page.locator("#vit-layer input[type=range]")
    box = rng.bounding_box()
    assert drawn_then_served(page, lambda: rng.click(position={"x": 4, "y": box["height"] / 2})) == 0
    assert page.locator("#vit-layer input[type=number]").input_value() == "0"

    assert drawn_then_served(page, lambda: page.locator("#vit-gallery .thumbnail-item").nth(2).click()) == 0
    assert page.locator("#vit-head input[type=number]").input_value() == "2"
    assert drawn_then_served(page, lambda: page.locator("#vit-gallery .thumbnail-item").nth(4).click()) == 0  # mean
    assert page.get_by_test_id("toast-body").count() == 0


@pytest.mark.browser
def test_the_drawing_lies_exactly_over_the_map_and_lets_clicks_through(page):
    ready(page)
    assert drawn_then_served(page, lambda: click_image_at(page, MAP, 0.2, 0.7)) == 0
    assert page.evaluate("window.attentionLive.show()")  # drawn again over the same picture: it stays
    cv, img = (page.locator(s).bounding_box() for s in ("#vit-live-canvas", MAP))
    assert abs(cv["x"] - img["x"]) < 1.5 and abs(cv["width"] - img["width"]) < 1.5  # a square map, width-bound
    assert cv["y"] >= img["y"] - 1 and cv["y"] + cv["height"] <= img["y"] + img["height"] + 1
    assert page.evaluate(DIFFERING) == 0
    screenshot(page, "vit_live_drawn")
    click_image_at(page, MAP, 0.9, 0.1)  # through the drawing: the <img> gets it, as Gradio's select
    page.locator("#vit-query-label").get_by_text(re.compile(r"row 0, col 6")).wait_for()


@pytest.mark.browser
def test_quick_clicks_end_on_the_last_one(page):
    ready(page)
    click_image_at(page, MAP, 0.1, 0.1)
    click_image_at(page, MAP, 0.9, 0.6)  # before the first answer is in
    page.locator("#vit-query-label").get_by_text(re.compile(r"row 4, col 6")).wait_for()
    page.wait_for_function("() => document.querySelector('#vit-live-canvas').style.display === 'none'")
    assert page.evaluate(DIFFERING) == 0  # the last drawing is the last answer's picture
