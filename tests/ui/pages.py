"""What the browser tests share: a fresh page in its own browser context, the calculator's page, the ViT tab's
permalink and compare panel."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

PHONE_TOUCH = dict(size=(390, 844), is_mobile=True, has_touch=True)  # `opened`'s options for a phone


@contextlib.contextmanager
def opened(browser, url: str, size: tuple[int, int] = (1400, 1000), timeout: int = 60_000, **context) -> Iterator:
    """A page at `url` in a fresh browser context of viewport `size` (width, height) and the other options
    `context` (e.g. is_mobile=True), `timeout` ms its default; the context is closed at the end."""
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]}, **context)
    try:
        pg = ctx.new_page()
        pg.set_default_timeout(timeout)
        pg.goto(url)
        yield pg
    finally:
        ctx.close()


@contextlib.contextmanager
def calculator_page(browser, url: str, size: tuple[int, int]) -> Iterator:
    """`opened`, at the Q/K/V calculator tab once its report is drawn."""
    with opened(browser, url, size) as pg:
        calculator_tab(pg)
        yield pg


def calculator_tab(pg) -> None:
    """Opens the Q/K/V calculator tab of `pg` and waits for its report."""
    pg.get_by_role("tab", name="Q/K/V calculator").click()
    pg.wait_for_selector("#qkv-report .qkv-card")


def compare_with(pg, model: str) -> None:
    """Opens the ViT tab's compare panel (folded at first) and picks `model` as the second model."""
    pg.get_by_text("Compare with a second model").click()
    pick = pg.locator("#vit-compare input")
    pick.fill(model)
    pick.press("Enter")


def more_options(pg) -> None:
    """Opens the ViT tab's "More options" (folded at first: threshold, opacity, colours, resolution, rollout)."""
    if not pg.locator("#vit-threshold").is_visible():
        pg.locator("#vit-more").get_by_text("More options").first.click()
        pg.locator("#vit-threshold").wait_for()


def permalink(pg, *parts: str) -> str:
    """The link the ViT tab's link button gives, once it is filled in; asserts it holds each of `parts`."""
    pg.locator("#vit-link-btn").click()
    box = pg.locator("#vit-link textarea")
    box.wait_for()
    pg.wait_for_function("() => document.querySelector('#vit-link textarea').value.includes('?')")
    link = box.input_value()
    for part in parts:
        assert part in link, link
    return link
