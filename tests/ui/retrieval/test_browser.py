"""In a real browser: the tab fills when opened; pick a held-out digit or draw one (the brush is ready, no
tool to pick first), and see the top-10 matches."""

from __future__ import annotations

import re

import pytest

from attention import retrieval
from tests.conftest import screenshot


def _open_trained_section(page):
    page.get_by_role("tab", name="MNIST retrieval").click()
    page.get_by_role("tab", name=re.compile("Trained")).click()
    _wait_for_top1(page, "cnn", retrieval.heldout_query(0)[1])  # the tab's first screen: held-out digit 0


def _wait_for_top1(page, name: str, label: int) -> None:
    """Wait until model `name`'s best match is captioned with `label` (the page opens on a 7)."""
    page.locator(f"#retrieval-top10-{name}").get_by_text(re.compile(rf"^#1 · {label} ·")).wait_for()


@pytest.mark.browser
def test_pick_a_heldout_digit_and_see_the_top10_grid(page):
    _open_trained_section(page)
    _, label = retrieval.heldout_query(21)
    assert label != retrieval.heldout_query(0)[1]  # differs from what the page opens with
    page.get_by_label(re.compile("held-out query digit")).fill("21")
    page.locator("#retrieval-pick").click()
    _wait_for_top1(page, "cnn", label)  # the cnn model's best match has the query's label
    for name in ("lab", "cnn"):
        assert page.locator(f"#retrieval-top10-{name} img").count() == 10
    screenshot(page, "retrieval")


@pytest.mark.browser
def test_draw_a_digit_and_see_the_top10_grid(page):
    _open_trained_section(page)
    canvas = page.locator("#retrieval-sketch canvas").first
    canvas.wait_for()
    box = canvas.bounding_box()  # no tool picked: the brush is the sketchpad's starting tool here
    x, y, w, h = box["x"], box["y"], box["width"], box["height"]
    page.mouse.move(x + 0.5 * w, y + 0.2 * h)  # a "1": one vertical stroke
    page.mouse.down()
    for t in range(1, 21):
        page.mouse.move(x + 0.5 * w, y + (0.2 + 0.03 * t) * h)
    page.mouse.up()
    assert page.evaluate("() => window.getSelection().toString()") == ""  # the drag drew, selected nothing
    page.locator("#retrieval-sketch-btn").click()
    _wait_for_top1(page, "cnn", 1)  # a vertical stroke is a 1
    for name in ("lab", "cnn"):
        assert page.locator(f"#retrieval-top10-{name} img").count() == 10
    assert page.get_by_test_id("toast-body").count() == 0  # no error
    screenshot(page, "retrieval_sketch")


@pytest.mark.browser
def test_after_clear_canvas_the_brush_still_draws(page):
    _open_trained_section(page)
    canvas = page.locator("#retrieval-sketch canvas").first
    canvas.wait_for()
    box = canvas.bounding_box()
    x, y, w, h = box["x"], box["y"], box["width"], box["height"]

    def stroke(x0: float, y0: float, x1: float, y1: float) -> None:
        page.mouse.move(x + x0 * w, y + y0 * h)
        page.mouse.down()
        page.mouse.move(x + x1 * w, y + y1 * h, steps=20)
        page.mouse.up()

    stroke(0.3, 0.3, 0.7, 0.3)  # a bar, then wiped
    picks = page.evaluate("window.retrievalBrushPicks")
    page.locator("#retrieval-sketch").get_by_label("Clear canvas").click()
    page.wait_for_function("n => window.retrievalBrushPicks > n", arg=picks)  # the tab has picked the brush again
    stroke(0.5, 0.2, 0.5, 0.8)  # a "1"
    page.locator("#retrieval-sketch-btn").click()
    _wait_for_top1(page, "cnn", 1)  # the ink after the clear is there (not "the sketch is empty")
    assert page.get_by_test_id("toast-body").count() == 0
