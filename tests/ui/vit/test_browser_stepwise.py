"""In a real browser: the guided first visit end to end at desktop (1400x1000) and phone (390x844) sizes,
each step driving the tab's real controls and remembered as done for the session; the step-by-step
panel (temperature redraws the map and the entropy, a click on its map selects the key); "Open in the
calculator"; and the exported HTML opened with the network off, showing the same pixels as the page.

ATTENTION_SHOTS=/some/dir saves a screenshot of every tour step there (never in the repository)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.ui.vit.test_browser import click_image_at
from tests.ui.vit.test_browser_layout import DESKTOP, PHONE, assert_nothing_overflows, visit, wait_for_head
from tests.ui.vit.test_browser_live import click_range

SHOTS = os.environ.get("ATTENTION_SHOTS")
BAR, NEXT, TEXT = "#vit-tour-bar", "#vit-tour-next", "#vit-tour-text"
STEPS_MAP = "#vit-steps-map img"

# the decoded pixels of an <img> (its natural size, through a canvas): a digest and the size
PIXELS = """(e) => { const c = document.createElement("canvas"); c.width = e.naturalWidth; c.height = e.naturalHeight;
  const x = c.getContext("2d"); x.drawImage(e, 0, 0); const d = x.getImageData(0, 0, c.width, c.height).data;
  let h = 2166136261 >>> 0; for (let i = 0; i < d.length; i++) { h ^= d[i]; h = Math.imul(h, 16777619) >>> 0; }
  return [c.width, c.height, h]; }"""


def shot(pg, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


def loaded(pg, selector: str, old: str | None = None) -> str:
    """The src of the <img> at `selector` once loaded (and other than `old`)."""
    pg.wait_for_function(
        "([s, o]) => { const e = document.querySelector(s); return e && e.complete && e.naturalWidth && e.src !== o }",
        arg=[selector, old],
    )
    return pg.locator(selector).get_attribute("src")


def step(pg, n: int) -> None:
    """Press Next and wait for step n's text and the tab's redraw after it."""
    src = pg.locator("#vit-query-image img").get_attribute("src")
    pg.locator(NEXT).click()
    pg.locator(TEXT).get_by_text(f"Step {n} of 5").wait_for()
    if n in (2, 4, 5):  # the step changed what the large map shows (step 1: the start screen's view again)
        loaded(pg, "#vit-query-image img", src)
    pg.wait_for_function("s => document.body.dataset.tourShown === s", arg=str(n - 1))  # drawn, scrolled to


def field(pg, selector: str) -> str:
    return pg.locator(f"{selector} input").first.input_value()


def entropy(pg) -> float:
    return float(pg.locator("#vit-steps [data-entropy]").get_attribute("data-entropy"))


@pytest.mark.browser
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_guided_visit_end_to_end(browser, app_url, size):
    tag = f"{size[0]}x{size[1]}"
    with visit(browser, app_url, size) as pg:
        bar = pg.locator(BAR)
        bar.get_by_text("New here?").wait_for()
        shot(pg, f"tour-{tag}-0-offer")

        step(pg, 1)  # patches and tokens: the start example, CLS, the last layer, head 0
        assert field(pg, "#vit-qrow") == "" and field(pg, "#vit-qcol") == ""
        wait_for_head(pg, 0)
        pg.locator("#vit-query-label").get_by_text("CLS").wait_for()
        shot(pg, f"tour-{tag}-1")

        step(pg, 2)  # one query and its keys: the centre patch (the digit's 7x7 grid)
        pg.locator("#vit-query-label").get_by_text(re.compile(r"patch \(row 3, col 3\)")).wait_for()
        assert field(pg, "#vit-qrow") == "3" and field(pg, "#vit-qcol") == "3"
        shot(pg, f"tour-{tag}-2")

        step(pg, 3)  # scores, scale, softmax: the step-by-step panel opened and drawn for that query
        pg.locator("#vit-steps").get_by_text("query patch (row 3, col 3)").wait_for()
        loaded(pg, STEPS_MAP)
        shot(pg, f"tour-{tag}-3")
        h1, src = entropy(pg), pg.locator(STEPS_MAP).get_attribute("src")
        pg.locator("#vit-steps-temperature").scroll_into_view_if_needed()
        click_range(pg, "#vit-steps-temperature", 4)  # far left: temperature ~0.05, a sharp row
        pg.wait_for_function("e => +document.querySelector('#vit-steps [data-entropy]').dataset.entropy < e", arg=h1)
        assert "T = 0.05" in pg.locator("#vit-steps").inner_text()
        loaded(pg, STEPS_MAP, src)  # the map redrew
        src = pg.locator(STEPS_MAP).get_attribute("src")
        click_image_at(pg, STEPS_MAP, 0.07, 0.07)  # the top-left patch becomes the selected key
        pg.locator("#vit-steps").get_by_text("selected key patch (0, 0)").wait_for()
        loaded(pg, STEPS_MAP, src)

        step(pg, 4)  # every head: head 1 large
        wait_for_head(pg, 1)
        shot(pg, f"tour-{tag}-4")

        step(pg, 5)  # layers and rollout
        pg.locator("#vit-caption").get_by_text("rollout").wait_for()
        assert pg.locator(NEXT).inner_text() == "Finish" and not pg.locator("#vit-tour-skip").is_visible()
        shot(pg, f"tour-{tag}-5")
        assert_nothing_overflows(pg, f"tour's last step at {tag}")

        pg.locator(NEXT).click()  # the end: the bar goes, the tour can be taken again
        bar.wait_for(state="hidden")
        pg.locator("#vit-tour-again").wait_for()
        pg.reload()  # remembered for the session
        pg.locator("#vit-tour-again").wait_for()
        pg.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
        assert not bar.is_visible()
        pg.locator("#vit-tour-again").click()  # taken again: it starts at step 1
        pg.locator(TEXT).get_by_text("Step 1 of 5").wait_for()


@pytest.mark.browser
def test_skipping_the_tour_is_remembered_and_a_new_session_is_offered_it(browser, app_url):
    with visit(browser, app_url, DESKTOP) as pg:
        pg.locator("#vit-tour-skip").click()
        pg.locator(BAR).wait_for(state="hidden")
        pg.reload()
        pg.locator("#vit-tour-again").wait_for()
        assert not pg.locator(BAR).is_visible()
    with visit(browser, app_url, DESKTOP) as pg:  # another browser session: offered again
        pg.locator(BAR).get_by_text("New here?").wait_for()


def open_panel(pg) -> None:
    pg.locator("#vit-steps-panel").get_by_text("Step by step:").first.click()
    pg.locator("#vit-steps").get_by_text("selected key").wait_for()
    loaded(pg, STEPS_MAP)


@pytest.mark.browser
def test_open_in_the_calculator_fills_its_form_and_says_what_its_output_is(browser, app_url):
    with visit(browser, app_url, DESKTOP) as pg:
        pg.locator("#vit-tour-skip").click()
        open_panel(pg)
        keys = pg.locator("#vit-steps table").nth(1).locator("tr").count() - 1  # the kept keys' rows
        pg.locator("#vit-steps-calc").click()
        about = pg.locator("#qkv-about")
        about.get_by_text("output equals the head's output row restricted to these").wait_for()
        assert about.is_visible()  # the calculator's tab is shown
        assert f"restricted to these {keys} keys" in about.inner_text()
        assert "patch (" in about.inner_text()  # K's and V's rows named by patch
        pg.locator("#qkv-checks").get_by_text(re.compile("scaled_dot_product_attention|PyTorch|torch")).first.wait_for()
        assert pg.locator('#qkv-table-q [data-testid="cell-0-0"]').count() == 1  # Q: one row, q_i
        assert pg.locator('#qkv-table-q [data-testid="cell-1-0"]').count() == 0
        pg.locator("#qkv-report").scroll_into_view_if_needed()
        shot(pg, "calculator-opened")


@pytest.mark.browser
def test_the_exported_html_opens_offline_and_shows_the_pages_pixels(browser, app_url, tmp_path):
    with visit(browser, app_url, DESKTOP) as pg:
        pg.locator("#vit-tour-skip").click()
        click_image_at(pg, "#vit-query-image img", 0.6, 0.4)  # a patch query
        pg.locator("#vit-query-label").get_by_text(re.compile(r"patch \(row")).wait_for()
        loaded(pg, "#vit-query-image img")
        open_panel(pg)
        shot(pg, "export-page")
        pg.locator("#vit-export-btn").click()
        link = pg.locator("#vit-export a").first
        link.wait_for()
        page = pg.request.get(link.get_attribute("href")).text()
        pg.wait_for_function("() => [...document.querySelectorAll('#vit-gallery img')].every(e => e.complete)")
        ours = {
            "large-map": pg.locator("#vit-query-image img").evaluate(PIXELS),
            "steps-map": pg.locator(STEPS_MAP).evaluate(PIXELS),
            **{f"tile-{i}": e.evaluate(PIXELS) for i, e in enumerate(pg.locator("#vit-gallery img").all())},
        }
    path = tmp_path / "view.html"
    path.write_text(page, encoding="utf-8")
    ctx = browser.new_context(offline=True, viewport={"width": 1400, "height": 1000})
    asked = []

    def block(route):  # the network is off: anything but the file itself is refused and recorded
        if route.request.url.startswith("file:"):
            return route.continue_()
        asked.append(route.request.url)
        return route.abort()

    try:
        off = ctx.new_page()
        off.route("**/*", block)
        off.goto(path.as_uri())
        off.wait_for_function("() => [...document.images].every(e => e.complete)")  # loaded, or failed
        assert asked == []  # nothing was fetched: every picture is inside the file
        theirs = {k: off.locator(f"#{k}").evaluate(PIXELS) for k in ours}
        assert off.locator("body").get_by_text("Step by step").first.is_visible()
        shot(off, "export-offline")
    finally:
        ctx.close()
    assert asked == []
    assert len(ours) >= 7 and theirs == ours  # large map, step-by-step map, every tile: the same pixels
