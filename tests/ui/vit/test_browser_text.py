"""In a real browser: "Find in image" with digit_clip (offline): the panel is on the first screen (for mnist_vit it
names the models with a text tower), prompts typed in it give each prompt's map captioned with its rule, the
segmentation and the scores; a prompt with markup shows as text; a digit example picked after digit_clip keeps
it and Find with it; one prompt shows its own score, no 100%; the 4 against "a 4, a 9" is labelled "a 4" by the
default rule (SCLIP). Screenshots at desktop and phone."""

from __future__ import annotations

import re

import pytest

from tests.conftest import screenshot
from tests.ui.pages import PHONE_TOUCH, opened
from tests.ui.vit.test_browser import click_image_at

PROMPTS = "a handwritten three, a handwritten seven, <b>bold</b>"


def find(page, prompts: str = PROMPTS) -> None:
    page.locator("#vit-find").wait_for()
    page.locator("#vit-find-prompts textarea").fill(prompts)
    page.locator("#vit-find-go").click()
    page.locator("#vit-find-scores table").wait_for()
    page.locator("#vit-find-map img").wait_for()


def pick_rule(page, name: str) -> None:
    page.locator("#vit-find-rule input").click()
    page.get_by_role("option", name=re.compile(name)).click()


def patches(page) -> dict[str, int]:
    """The scores table's prompt -> patches the segmentation gives it (and "none")."""
    out = {}
    for row in page.locator("#vit-find-scores tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        out["none" if "none" in cells[1] else cells[1]] = int(cells[-1])
    return out


@pytest.mark.browser
def test_find_in_image_on_a_digit(page, app_url):
    page.goto(app_url + "?example=digit_3&model=digit_clip")
    find(page)
    rows = page.locator("#vit-find-scores tbody tr").all_inner_texts()
    assert len(rows) == 4 and "a handwritten three" in rows[0]  # the digit's own caption first; then "none"
    assert (
        page.locator("#vit-find-scores b").count() == 0
        and "<b>bold</b>" in page.locator("#vit-find-scores").inner_text()
    )
    assert page.locator("#vit-find-tiles img").count() == 4  # three prompts and the segmentation
    assert "SCLIP" in page.locator("#vit-find-map").inner_text()  # the large map's caption names its rule
    page.locator("#vit-find-tiles img").last.click()  # the segmentation tile, shown large
    page.locator("#vit-find-map").get_by_text("Segmentation (SCLIP)").wait_for()
    pick_rule(page, "LeGrad")
    page.locator("#vit-find-caption").get_by_text("LeGrad, Bousselham").wait_for()
    assert page.get_by_test_id("toast-body").count() == 0
    page.locator("#vit-find").scroll_into_view_if_needed()
    screenshot(page, "find_digit_desktop")

    link = "?example=digit_3&model=digit_clip&find=a+handwritten+seven,a+handwritten+three&frule=clearclip"
    page.goto(app_url + link)
    page.locator("#vit-find-scores table").wait_for()  # a link's prompts are found at once, by its rule
    assert page.locator("#vit-find-prompts textarea").input_value() == "a handwritten seven, a handwritten three"
    page.locator("#vit-find-caption").get_by_text("ClearCLIP, Lan").wait_for()


@pytest.mark.browser
def test_the_first_screen_offers_find_and_a_digit_example_keeps_digit_clip(page, app_url):
    page.goto(app_url)
    page.locator("#vit-find-details").get_by_text("needs a model with a text tower").wait_for()  # mnist_vit first
    box = page.locator("#vit-model input")
    box.click()
    page.get_by_role("option", name=re.compile("^digit_clip")).click()
    page.locator("#vit-find-details").get_by_text("Type what to find").wait_for()
    page.locator("#vit-digit-examples").get_by_role("button").nth(7).click()  # digit 7
    page.wait_for_timeout(1500)
    page.wait_for_function("() => document.querySelector('#vit-model input').value.startsWith('digit_clip')")
    find(page, "a handwritten seven")
    text = page.locator("#vit-find-scores").inner_text()
    assert "100.0%" not in text and "cosine" in text  # one prompt: its own score, not a share of one
    toasts = page.get_by_test_id("toast-body").all_inner_texts()
    assert not toasts, toasts


@pytest.mark.browser
def test_a_digit_example_after_a_link_to_digit_clip_keeps_it_and_find(page, app_url):
    """The link sets the model without a pick (no `input` event): the example keeps it all the same."""
    page.goto(app_url + "?example=digit_3&model=digit_clip")
    page.locator("#vit-find-details").get_by_text("Type what to find").wait_for()
    page.locator("#vit-digit-examples").get_by_role("button").nth(4).click()  # digit 4
    page.wait_for_timeout(1500)
    page.wait_for_function("() => document.querySelector('#vit-model input').value.startsWith('digit_clip')")
    find(page, "a 4, a 9")
    assert list(patches(page))[0] == "a 4"  # the 4's own caption first
    toasts = page.get_by_test_id("toast-body").all_inner_texts()
    assert not toasts, toasts


@pytest.mark.browser
def test_a_four_against_a_nine_is_labelled_a_four(page, app_url):
    page.goto(app_url + "?example=digit_4&model=digit_clip&find=a+4,a+9")
    page.locator("#vit-find-scores table").wait_for()
    got = patches(page)
    assert got["a 4"] > 3 * max(got["a 9"], 1) and got["none"] > 0, got
    click_image_at(page, "#vit-find-map img", 0.5, 0.5)  # a patch: its rows under the rule and the model's own
    page.locator("#vit-find-rows img").wait_for()
    assert "Patch (row" in page.locator("#vit-find-rows").inner_text()
    page.locator("#vit-find").scroll_into_view_if_needed()
    screenshot(page, "find_four_nine_desktop")


@pytest.mark.browser
def test_find_in_image_on_a_phone(browser, app_url):
    with opened(browser, app_url + "?example=digit_4&model=digit_clip&find=a+4,a+9", **PHONE_TOUCH) as page:
        page.locator("#vit-find-scores table").wait_for()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390 + 1  # nothing wider than the phone
        page.locator("#vit-find").scroll_into_view_if_needed()
        screenshot(page, "find_digit_phone")
