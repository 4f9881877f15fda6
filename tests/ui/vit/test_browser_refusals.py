"""In a real browser, at 1400x1000 and 390x844: a refused change never hides or poisons a control or
a map (attention/ui/vit/refusals.py). The sequences a first-time visitor broke the tab with: a model
whose weights are not here, a corrupt and a 9000x9000 upload, a resolution over the range, a click
with the image cleared. Each ends with the control usable, showing its last accepted value, no red
"Error" mark anywhere, the last good map kept with a note, and the next action working."""

from __future__ import annotations

import re

import pytest
from PIL import Image

from tests.conftest import ROOT
from tests.ui.vit.test_browser import click_image_at
from tests.ui.vit.test_browser_layout import DESKTOP, PHONE, visit

SIZES = pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
MAP = "#vit-query-image img"


def no_error_marks(pg) -> None:
    """No Gradio "Error" pill on any control or map of the tab."""
    assert pg.locator("#vit-main").get_by_text("Error", exact=True).count() == 0
    assert pg.locator(".vit-fault").count() == 0


def refused(pg, words: str) -> None:
    """One toast and the note beside the kept map, both saying `words`."""
    pg.locator("#vit-note").get_by_text("Not changed").wait_for()
    assert words in pg.locator("#vit-note").inner_text()
    toasts = pg.get_by_test_id("toast-body")
    assert toasts.count() == 1 and words in toasts.first.inner_text(), toasts.all_inner_texts()
    no_error_marks(pg)


def close_toasts(pg) -> None:
    for b in pg.get_by_test_id("toast-close").all():
        b.click()
    pg.wait_for_function("() => !document.querySelector('[data-testid=toast-body]')")


def change_layer(pg, layer: int) -> None:
    """Type a layer; then the slider, the caption, the details and the map agree on it."""
    box = pg.locator("#vit-layer input[type=number]")
    box.fill(str(layer))
    box.press("Enter")
    pg.locator("#vit-details").get_by_text(f"layer {layer}/3").wait_for()
    assert f"layer {layer}" in pg.locator("#vit-caption").inner_text()
    assert box.input_value() == str(layer)
    assert pg.locator("#vit-gallery .thumbnail-item").count() == 5  # every head's tile and the mean's


@pytest.mark.browser
@SIZES
def test_a_model_that_cannot_load_here_is_marked_refused_and_the_box_stays_usable(browser, app_url, size):
    with visit(browser, app_url, size) as pg:
        box = pg.locator("#vit-model input")
        box.click()
        marked = pg.get_by_role("option", name=re.compile("dino_vits16 .*not on this server"))
        marked.wait_for()
        assert pg.get_by_role("option", name=re.compile("mnist_vit")).first.inner_text().count("not on") == 0
        notice = pg.locator("#vit-notice").inner_text()
        assert "hf download" not in notice and "HF_HOME" not in notice and len(notice) < 200
        src = pg.locator(MAP).get_attribute("src")
        marked.click()  # a visitor picks it anyway
        refused(pg, "dino_vits16 cannot run here")
        assert "hf download" not in pg.get_by_test_id("toast-body").inner_text()
        pg.wait_for_function("() => document.querySelector('#vit-model input').value.startsWith('mnist_vit')")
        assert pg.locator(MAP).get_attribute("src") == src  # the last good map
        close_toasts(pg)
        click_image_at(pg, MAP, 0.1, 0.1)  # the next action works: patch (0, 0) is the query
        pg.locator("#vit-query-label").get_by_text(re.compile(r"row 0, col 0")).wait_for()
        pg.locator("#vit-note").wait_for(state="hidden")  # the note goes with the next drawn view
        assert pg.get_by_test_id("toast-body").count() == 0
        no_error_marks(pg)


@pytest.mark.browser
@SIZES
@pytest.mark.parametrize("kind", ["corrupt", "huge"])
def test_a_refused_upload_keeps_the_page_consistent(browser, app_url, size, kind, tmp_path):
    if kind == "corrupt":
        bad = tmp_path / "corrupt.jpg"
        bad.write_bytes((ROOT / "examples" / "photos" / "chelsea.jpg").read_bytes()[:3000])
        words = "truncated or corrupt"
    else:
        bad = tmp_path / "huge.png"
        Image.new("L", (9000, 9000)).save(bad)
        words = "9000x9000"
    with visit(browser, app_url, size) as pg:
        src = pg.locator(MAP).get_attribute("src")
        pg.locator("#vit-image input[type=file]").set_input_files(str(bad))
        refused(pg, words)
        assert pg.locator(MAP).get_attribute("src") == src
        pg.locator("#vit-image img").wait_for()  # the input shows the picture the maps are of
        close_toasts(pg)
        change_layer(pg, 1)  # the next change works, and slider, caption and tiles agree
        assert pg.get_by_test_id("toast-body").count() == 0
        no_error_marks(pg)


@pytest.mark.browser
@SIZES
def test_a_resolution_out_of_range_is_refused_and_the_dropdown_stays_usable(browser, app_url, size):
    with visit(browser, app_url, size) as pg:
        box = pg.locator("#vit-resolution input")
        box.fill("99999")
        box.press("Enter")
        refused(pg, "Resolution 99999 px is out of range")
        pg.wait_for_function("() => document.querySelector('#vit-resolution input').value === 'auto'")
        close_toasts(pg)
        box.fill("56")  # the same dropdown, corrected at once
        box.press("Enter")
        pg.locator("#vit-details").get_by_text("input 56×56 px").wait_for()
        change_layer(pg, 2)
        no_error_marks(pg)


@pytest.mark.browser
@SIZES
def test_a_refused_click_rolls_back_the_crosshair_drawn_in_the_browser(browser, app_url, size):
    with visit(browser, app_url, size) as pg:
        label = pg.locator("#vit-query-label").inner_text()
        pg.locator("#vit-image button[aria-label='Remove Image']").first.click()  # the image cleared, the map kept
        click_image_at(pg, MAP, 0.9, 0.9)  # drawn here at once, refused by the server: no image
        refused(pg, "No image")
        # the browser's drawing of the refused query is gone, the image is back, the query as it was
        # (at once: not when the drawing's own 10 s guard ends)
        gone = "() => [...document.querySelectorAll('canvas.vit-live')].every(c => c.style.display === 'none')"
        pg.wait_for_function(gone, timeout=5000)
        pg.locator("#vit-image img").wait_for()
        assert pg.locator("#vit-query-label").inner_text() == label
        close_toasts(pg)
        click_image_at(pg, MAP, 0.1, 0.1)
        pg.locator("#vit-query-label").get_by_text(re.compile(r"row 0, col 0")).wait_for()
        no_error_marks(pg)
