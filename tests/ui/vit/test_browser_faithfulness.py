"""In a real browser: the faithfulness line under the large map, on demand, at desktop and phone sizes; the
curves on click; the line cleared when the view changes (it spoke of the view before); an over-budget request
shown as a note in the line, the page still usable (the view changes, and the line comes once the budget allows).
Screenshots: artifacts/faithfulness_*.png."""

from __future__ import annotations

import pytest

from tests.conftest import ARTIFACTS, screenshot
from tests.ui.pages import PHONE_TOUCH, opened

LINE = "#vit-faith-line"


def ask(page) -> None:
    page.locator("#vit-faith-btn").click()
    page.locator(LINE).get_by_text("Faithfulness here").wait_for()


@pytest.mark.browser
def test_the_faithfulness_line_and_its_curves_on_a_desktop_and_a_refusal(page, app_url, monkeypatch):
    page.goto(app_url + "?example=digit_3&model=mnist_vit&view=rollout")
    page.locator("#vit-query-image img").wait_for()
    ask(page)
    text = page.locator(LINE).inner_text()
    assert "random order" in text and "AUC" in text
    page.locator("#vit-faith-show").click()
    page.locator("#vit-faith-curve img").wait_for()
    page.locator("#vit-faith").scroll_into_view_if_needed()
    screenshot(page, "faithfulness_desktop")
    page.screenshot(path=str(ARTIFACTS / "faithfulness_desktop_view.png"))
    page.locator("#vit-view").get_by_text("Mean of heads").click()  # another view: the old line goes
    page.wait_for_function(f"() => !document.querySelector('{LINE}').innerText.includes('Faithfulness')")
    assert not page.locator("#vit-faith-curve img").is_visible()
    assert page.get_by_test_id("toast-body").count() == 0
    # an over-budget request: a note in the line, the page still usable
    from attention.vit.score import service

    monkeypatch.setattr(service, "budget", lambda device: 0.01)  # the app runs in this process
    page.locator("#vit-faith-btn").click()
    page.locator(LINE).get_by_text("GFLOP per faithfulness job").wait_for()
    page.locator("#vit-faith").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "faithfulness_refused.png"))
    page.locator("#vit-view").get_by_text("Rollout").click()  # the page still answers
    page.locator("#vit-caption").get_by_text("rollout").wait_for()
    monkeypatch.undo()
    ask(page)


@pytest.mark.browser
def test_the_faithfulness_line_on_a_phone(browser, app_url):
    with opened(browser, app_url + "?example=digit_7&model=mnist_vit", **PHONE_TOUCH) as page:
        page.locator("#vit-query-image img").wait_for()
        page.locator("#vit-faith-btn").scroll_into_view_if_needed()
        ask(page)
        box = page.locator(LINE).bounding_box()
        assert 0 < box["width"] <= 390  # the line fits the phone's width
        page.locator("#vit-faith-show").click()
        page.locator("#vit-faith-curve img").wait_for()
        assert page.locator("#vit-faith-curve img").bounding_box()["width"] <= 390
        page.locator("#vit-faith").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "faithfulness_phone.png"))
