"""In a real browser: "Find in image" with digit_clip (offline): the panel shows for a model with a text tower,
prompts typed in it give each prompt's map, the segmentation and the ranking; a prompt with markup shows as
text. Screenshots at desktop and phone."""

from __future__ import annotations

import pytest

from tests.conftest import screenshot
from tests.ui.pages import PHONE_TOUCH, opened

PROMPTS = "a handwritten three, a handwritten seven, <b>bold</b>"


def find(page) -> None:
    page.locator("#vit-find").wait_for()
    page.locator("#vit-find-prompts textarea").fill(PROMPTS)
    page.locator("#vit-find-go").click()
    page.locator("#vit-find-scores table").wait_for()
    page.locator("#vit-find-map img").wait_for()


@pytest.mark.browser
def test_find_in_image_on_a_digit(page, app_url):
    page.goto(app_url + "?example=digit_3&model=digit_clip")
    find(page)
    rows = page.locator("#vit-find-scores tbody tr").all_inner_texts()
    assert len(rows) == 3 and "a handwritten three" in rows[0]  # the digit's own caption ranks first
    assert (
        page.locator("#vit-find-scores b").count() == 0
        and "<b>bold</b>" in page.locator("#vit-find-scores").inner_text()
    )
    assert page.locator("#vit-find-tiles img").count() == 4  # three prompts and the segmentation
    page.locator("#vit-find-tiles img").last.click()  # the segmentation tile, shown large
    page.locator("#vit-find-map").get_by_text("Segmentation").wait_for()
    page.locator("#vit-find-rule").get_by_text("LeGrad").click()
    page.locator("#vit-find-caption").get_by_text("LeGrad, Bousselham").wait_for()
    assert page.get_by_test_id("toast-body").count() == 0
    page.locator("#vit-find").scroll_into_view_if_needed()
    screenshot(page, "find_digit_desktop")

    page.goto(app_url + "?example=digit_3&model=digit_clip&find=a+handwritten+seven,a+handwritten+three")
    page.locator("#vit-find-scores table").wait_for()  # a link's prompts are found at once
    assert page.locator("#vit-find-prompts textarea").input_value() == "a handwritten seven, a handwritten three"


@pytest.mark.browser
def test_find_in_image_on_a_phone(browser, app_url):
    with opened(browser, app_url + "?example=digit_3&model=digit_clip", **PHONE_TOUCH) as page:
        find(page)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390 + 1  # nothing wider than the phone
        page.locator("#vit-find").scroll_into_view_if_needed()
        screenshot(page, "find_digit_phone")
