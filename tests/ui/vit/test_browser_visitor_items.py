"""In a real browser: the visitor items of issue 45, each replayed as it broke and ending right.

- a link with a model that cannot be shown opens the start view on the start model, a note naming what was refused;
- a refusal's note is replaced by the next, different refusal, and cleared by the next drawn view;
- a half-typed query field leaves every other change alone; a query field at fault is told in a visitor's words;
- a white digit drawn on transparency is shown on black (not a blank map on white), and the details say so;
- on a phone: the step by step's tables fit in their own boxes and say nothing of hovering; its exported page is
  no wider than the phone; "Find in image"'s scores show their patches column.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from tests.conftest import ROOT, screenshot
from tests.ui.pages import PHONE_TOUCH, more_options, opened
from tests.ui.vit.test_browser_layout import DESKTOP, visit
from tests.ui.vit.test_browser_live import answered, ready
from tests.ui.vit.test_browser_refusals import close_toasts

NOTE = "#vit-note"
# the large map's pixels: their standard deviation over every channel (0: one flat colour, a blank map)
SPREAD = """(e) => { const c = document.createElement("canvas");
  [c.width, c.height] = [e.naturalWidth, e.naturalHeight];
  const g = c.getContext("2d"); g.drawImage(e, 0, 0); const d = g.getImageData(0, 0, c.width, c.height).data;
  let s = 0, s2 = 0, n = 0;
  for (let i = 0; i < d.length; i += 4) for (let k = 0; k < 3; k++) { s += d[i + k]; s2 += d[i + k] ** 2; n++; }
  return Math.sqrt(s2 / n - (s / n) ** 2); }"""


@pytest.mark.browser
def test_a_link_to_a_model_that_cannot_be_shown_opens_the_start_view_and_says_so(browser, app_url):
    with visit(browser, app_url, DESKTOP, "?example=digit_5&model=no_such_vit&layer=1") as pg:
        pg.locator(NOTE).get_by_text("no_such_vit").wait_for()
        assert "could not be opened as given" in pg.locator(NOTE).inner_text()
        assert pg.locator("#vit-model input").input_value().startswith("mnist_vit")
        pg.locator("#vit-details").get_by_text("mnist_vit").wait_for()
        close_toasts(pg)
        answered(pg, lambda: pg.locator("#vit-gallery .thumbnail-item").nth(1).click())  # the next view: no note
        pg.locator(NOTE).wait_for(state="hidden")


@pytest.mark.browser
def test_refusals_replace_each_other_a_drawn_view_clears_them_and_no_words_are_internal(browser, app_url, tmp_path):
    bad = tmp_path / "corrupt.jpg"
    bad.write_bytes((ROOT / "examples" / "photos" / "chelsea.jpg").read_bytes()[:3000])
    with visit(browser, app_url, DESKTOP) as pg:
        pg.locator("#vit-image input[type=file]").set_input_files(str(bad))
        pg.locator(NOTE).get_by_text("truncated or corrupt").wait_for()
        close_toasts(pg)
        more_options(pg)
        box = pg.locator("#vit-resolution input")
        box.fill("99999")
        box.press("Enter")
        pg.locator(NOTE).get_by_text("Resolution 99999").wait_for()  # the new refusal replaces the old one
        assert "truncated" not in pg.locator(NOTE).inner_text()
        close_toasts(pg)
        # a query field refused by its check: marked on its own, and the note (every control back...) is gone
        pg.locator("#vit-qcol input").fill("2")
        row = pg.locator("#vit-qrow input")
        row.fill("99")
        row.press("Enter")
        pg.locator("#vit-qrow").get_by_text("type a whole number 0 to 6").wait_for()
        pg.locator(NOTE).wait_for(state="hidden")
        # a row typed, the column not: the layer still changes (the half-typed query is not its business)
        row.fill("3")
        pg.locator("#vit-qcol input").fill("")
        number = pg.locator("#vit-layer input[type=number]")
        number.fill("1")
        answered(pg, lambda: number.press("Enter"))
        pg.locator("#vit-details").get_by_text("layer 1/3").wait_for()
        assert pg.get_by_test_id("toast-body").count() == 0 and not pg.locator(NOTE).is_visible()
        row.press("Enter")  # the query committed half typed: the column is asked for, in a visitor's words
        words = pg.locator("#vit-qcol").get_by_text(re.compile("Type a column too"))
        words.wait_for()
        assert "None" not in words.inner_text() and "query_row" not in pg.locator("#vit-main").inner_text()
        assert pg.locator("#vit-qrow").get_by_text("Type a").count() == 0  # the row typed is fine


@pytest.mark.browser
def test_a_white_digit_on_transparency_is_drawn_on_black_and_the_details_say_so(page, tmp_path):
    ready(page)
    digit = np.asarray(Image.open(ROOT / "examples" / "digits" / "digit_3.png").convert("L"))
    rgba = np.zeros((*digit.shape, 4), np.uint8)
    rgba[..., :3], rgba[..., 3] = 255, digit  # white ink, its strength in the alpha channel
    path = tmp_path / "white_on_transparent.png"
    Image.fromarray(rgba).save(path)
    page.locator("#vit-image button[aria-label='Remove Image']").click()
    page.locator("#vit-image input[type=file]").set_input_files(str(path))
    page.locator("#vit-details").get_by_text("transparent parts shown on black").wait_for()
    page.wait_for_function("() => document.querySelector('#vit-query-image img').complete")
    assert page.locator("#vit-query-image img").evaluate(SPREAD) > 20  # a digit, not a blank map


@pytest.mark.browser
def test_on_a_phone_the_step_tables_find_scores_and_the_export_fit(browser, app_url, tmp_path):
    link = "?example=digit_3&model=digit_clip&find=a+handwritten+three,a+handwritten+seven"
    with opened(browser, app_url.rstrip("/") + "/" + link, **PHONE_TOUCH) as pg:
        pg.locator("#vit-find-scores table").wait_for()
        patches = pg.locator("#vit-find-scores th").get_by_text("patches")
        assert patches.is_visible() and box_right(patches) <= PHONE_TOUCH["size"][0]
        pg.locator("#vit-steps-panel").get_by_text("Step by step:").first.click()
        pg.locator("#vit-steps").get_by_text("selected key").wait_for()
        text = pg.locator("#vit-steps").inner_text()
        assert "hover" not in text.lower()
        for table in pg.locator("#vit-steps table").all():  # each in a box of its own within the screen
            scroller = table.locator("xpath=..")
            assert box_right(scroller) <= PHONE_TOUCH["size"][0]
        pg.locator("#vit-export-btn").click()
        href = pg.locator("#vit-export a").first
        href.wait_for()
        page = pg.request.get(href.get_attribute("href")).text()
        screenshot(pg, "vit_phone_steps")
    path = tmp_path / "view.html"
    path.write_text(page, encoding="utf-8")
    with opened(browser, path.as_uri(), **PHONE_TOUCH) as off:
        off.wait_for_function("() => [...document.images].every(e => e.complete)")
        assert off.evaluate("document.documentElement.scrollWidth") <= PHONE_TOUCH["size"][0]


def box_right(loc) -> float:
    b = loc.bounding_box()
    return b["x"] + b["width"]
