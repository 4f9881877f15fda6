"""In a real browser: "Why this class?" on mnist_vit (offline). A permalink with &class= opens the view
explaining that class; the top-5 bars are clickable; a click on the relevance map makes that patch the
main view's query; a second classifier picked in the compare panel shows its relevance for the same class.
Screenshots at desktop and phone."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ARTIFACTS, screenshot
from tests.ui.pages import PHONE_TOUCH, compare_with, opened
from tests.ui.vit.test_browser import click_image_at


def bar_texts(page) -> list[str]:
    return page.locator("#vit-relevance .rel-bar").evaluate_all("els => els.map(e => e.innerText.trim())")


@pytest.mark.browser
def test_why_this_class_on_a_digit(page, app_url):
    page.goto(app_url + "?example=digit_3&model=mnist_vit&class=8")
    page.locator("#vit-rel-details").get_by_text("Explaining '8'").wait_for()
    page.locator("#vit-rel-map img").wait_for()
    page.locator("#vit-rel-attn img").wait_for()
    bars = bar_texts(page)
    assert len(bars) == 6 and bars[0].startswith("3 · 8")  # the top 5, with their probabilities ...
    assert bars[5].startswith("8 · ") and "rel-chosen" in page.locator("#vit-rel-bar-5").get_attribute("class")
    assert "Left: why '8'" in page.locator("#vit-rel-caption").inner_text()
    page.locator("#vit-relevance").scroll_into_view_if_needed()
    screenshot(page, "relevance_digit_desktop")

    page.locator("#vit-rel-bar-0").click()  # explain the top class instead
    page.locator("#vit-rel-details").get_by_text("Explaining '3'").wait_for()
    assert "rel-chosen" in page.locator("#vit-rel-bar-0").get_attribute("class")
    assert len(bar_texts(page)) == 5  # ... and the chosen class as a sixth bar only when it is not among them

    click_image_at(page, "#vit-rel-map img", 0.8, 0.3)  # a patch of the relevance map becomes the query
    page.locator("#vit-query-label").get_by_text(re.compile(r"patch \(row 2, col 5\)")).wait_for()

    page.locator("#vit-rel-rule").get_by_text("grad-rollout").click()
    page.locator("#vit-rel-caption").get_by_text("vit-explain").wait_for()

    compare_with(page, "mnist_vit")  # a second classifier in the compare panel: its relevance too
    page.locator("#vit-rel-compare").get_by_text("Second model, mnist_vit: relevance for the same class").wait_for()
    page.locator("#vit-rel-compare img").wait_for()
    assert page.get_by_test_id("toast-body").count() == 0
    page.locator("#vit-relevance").scroll_into_view_if_needed()
    screenshot(page, "relevance_digit_compare")


@pytest.mark.browser
def test_why_this_class_on_a_phone(browser, app_url):
    with opened(browser, app_url + "?example=digit_7&model=mnist_vit", **PHONE_TOUCH) as page:
        page.locator("#vit-rel-details").get_by_text("Explaining '7'").wait_for()
        page.locator("#vit-rel-map img").wait_for(state="attached")
        screenshot(page, "relevance_digit_phone_full")
        page.locator("#vit-rel-classes").scroll_into_view_if_needed()
        page.locator("#vit-rel-map img").wait_for()
        box = page.locator("#vit-rel-map img").bounding_box()
        assert 0 < box["width"] <= 390  # the map fits the phone's width
        page.screenshot(path=str(ARTIFACTS / "relevance_digit_phone.png"))  # what the visitor sees there
