"""The calculator tab in Chromium: a preset fills the form, and a click on the patch grid chooses a patch."""

from __future__ import annotations

import re

import pytest

from tests.ui.pages import calculator_tab, opened
from tests.ui.vit.test_browser import click_image_at


@pytest.mark.browser
def test_a_preset_fills_the_form_and_recalculates(page):
    pg = page
    calculator_tab(pg)
    pg.locator("#qkv-preset input").click()
    pg.get_by_role("option", name="Two heads with an output projection").click()
    pg.locator("#qkv-report h4", has_text="6. Output projection").wait_for()
    assert pg.locator("#qkv-use-wo input").is_checked() and pg.locator("#qkv-heads input").input_value() == "2"
    assert "MultiheadAttention" in pg.locator("#qkv-checks").inner_text()


@pytest.mark.browser
def test_clicking_the_patch_grid_chooses_the_patch_under_the_pointer(page):
    pg = page
    pg.get_by_role("tab", name="Q/K/V calculator").click()
    grid = pg.locator("#qkv-patch-grid img")
    grid.scroll_into_view_if_needed()
    info = pg.locator("#qkv-patch-info")
    rows, cols = map(int, re.search(r"(\d+) x (\d+) = \d+ patches", info.inner_text()).groups())
    click_image_at(pg, "#qkv-patch-grid img", 0.99, 0.01)  # top right
    info.get_by_text(f"#{cols - 1} (row 0, column {cols - 1})").wait_for()  # counted from 0
    assert pg.locator("#qkv-patch-index input").first.input_value() == str(cols - 1)
    click_image_at(pg, "#qkv-patch-grid img", 0.01, 0.99)  # bottom left
    info.get_by_text(f"#{(rows - 1) * cols} (row {rows - 1}, column 0)").wait_for()


@pytest.mark.browser
@pytest.mark.parametrize("width, height", [(1400, 1000), (390, 844)])
def test_head_captions_are_legible_as_shown(browser, app_url, width, height):
    from attention.calculator.plots import caption_px

    with opened(browser, app_url, (width, height)) as pg:
        pg.get_by_role("tab", name="Q/K/V calculator").click()
        for sel in ("#qkv-patch-maps img", "#qkv-patch-matrices img"):
            pg.locator(sel).scroll_into_view_if_needed()
            pg.wait_for_function(
                "s => { const e = document.querySelector(s); return e && e.naturalWidth > 0 }", arg=sel
            )
            w, h, nw, nh = pg.locator(sel).evaluate(
                "e => [e.clientWidth, e.clientHeight, e.naturalWidth, e.naturalHeight]"
            )
            shown = min(1.0, w / nw, h / nh)  # object-fit: contain, never enlarged past 1 here
            assert caption_px(nw) * shown >= 12, f"{sel}: captions {caption_px(nw) * shown:.1f} px as shown"
