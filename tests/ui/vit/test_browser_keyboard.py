"""In a real browser, at 1400x1000 and 390x844: the ViT tab by keyboard and screen reader. The keyboard walk: Tab
to each control, change it by keys, and the map and its caption follow (Gradio fires a slider's `release` on
pointerup only; attention/ui/common/a11y.js commits a keyboard change the same way, moves a radio group by the
arrow keys). Every focusable control has a name, focus is drawn where it lands, and axe-core (the PyPI package
axe-playwright-python bundles its script) finds no serious or critical violation."""

from __future__ import annotations

from importlib import resources

import pytest

from tests.conftest import screenshot
from tests.ui.vit.test_browser_layout import DESKTOP, PHONE, visit
from tests.ui.vit.test_browser_live import answered

AXE = (resources.files("axe_playwright_python") / "axe.min.js").read_text()

# focusable controls of the tab whose accessible name is empty (a close reading of the accessible-name rules:
# aria-labelledby, aria-label, a <label>, the text, a picture's alt or a named element inside, a title)
NAMELESS = """() => {
  const named = (e) => {
    const by = (e.getAttribute('aria-labelledby') || '').split(' ').map(i => document.getElementById(i));
    const texts = [...by.filter(Boolean).map(x => x.innerText), e.getAttribute('aria-label'),
      ...[...(e.labels || [])].map(l => l.innerText), e.innerText,
      ...[...e.querySelectorAll('img[alt]')].map(i => i.alt), e.getAttribute('title'), e.getAttribute('placeholder'),
      ...[...e.querySelectorAll('[aria-label]')].map(x => x.getAttribute('aria-label'))];
    return texts.some(t => (t || '').trim());
  };
  const sel = 'a[href],button,input,select,textarea,[tabindex]:not([tabindex="-1"])';
  return [...document.querySelectorAll(sel)]
    .filter(e => !e.disabled && e.tabIndex >= 0 && e.getClientRects().length && e.type !== 'hidden' && !named(e))
    .map(e => `${e.tagName}#${e.id}.${e.className} in #${(e.parentElement.closest('[id]') || {}).id}`);
}"""


def tab_to(pg, selector: str, back: bool = False, stops: int = 80) -> None:
    """Tab (Shift+Tab when `back`) until the focus is inside `selector`."""
    for _ in range(stops):
        pg.keyboard.press("Shift+Tab" if back else "Tab")
        if pg.evaluate("s => !!document.activeElement.closest(s)", selector):
            return
    raise AssertionError(f"{selector} was not reached in {stops} presses")


def new_map(pg, act) -> None:
    """Do `act`; wait until the server's large map has replaced the one before."""
    src = pg.locator("#vit-query-image img").get_attribute("src")
    act()
    pg.wait_for_function("s => document.querySelector('#vit-query-image img').src !== s", arg=src)


def focus_drawn(pg) -> bool:
    """The focused element draws a visible outline (or box shadow)."""
    return pg.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2) || s.boxShadow !== 'none' }"
    )


def serious(pg) -> list[str]:
    pg.add_script_tag(content=AXE)
    found = pg.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".filter(v => ['serious', 'critical'].includes(v.impact))"
        ".map(v => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(' ')).slice(0, 4).join(', ')})`)"
    )
    return found


@pytest.mark.browser
def test_the_keyboard_walk_redraws_the_map_and_its_caption(browser, app_url):
    with visit(browser, app_url, DESKTOP) as pg:
        caption, details, tiles = pg.locator("#vit-caption"), pg.locator("#vit-details"), pg.locator("#vit-gallery")
        pg.locator("body").click(position={"x": 2, "y": 2})
        tab_to(pg, "#vit-view")  # the View radios: the arrow keys move the choice, the map follows
        pg.keyboard.press("ArrowRight")  # per-head grid -> mean of heads
        caption.get_by_text("the mean of the 4 heads").wait_for()
        assert pg.locator("#vit-view input[value='mean']").is_checked() and focus_drawn(pg)
        pg.keyboard.press("ArrowRight")  # -> rollout -> threshold masks
        pg.keyboard.press("ArrowRight")
        caption.get_by_text("its threshold mask").wait_for()
        tab_to(pg, "#vit-more")  # "More options", opened by the keyboard
        pg.keyboard.press("Enter")
        tab_to(pg, "#vit-threshold input[type=range]")
        assert focus_drawn(pg)
        pg.keyboard.press("ArrowLeft")  # 0.6 -> 0.55: each mask keeps 55%
        tiles.get_by_text("hold 55%").first.wait_for()
        tab_to(pg, "#vit-alpha input[type=range]")
        answered(pg, lambda: pg.keyboard.press("ArrowRight"))  # opacity 0.65: the view's new opacity came back
        assert pg.evaluate("window.attentionLive.p.alpha") == 0.65
        tab_to(pg, "#vit-cmap")
        lut = pg.evaluate("window.attentionLive.p.lut")
        pg.keyboard.press("ArrowDown")
        answered(pg, lambda: pg.keyboard.press("Enter"))  # another colormap: the view's colours came back
        assert pg.evaluate("window.attentionLive.p.lut") != lut
        tab_to(pg, "#vit-view", back=True)  # back to the View: the rollout, for its options
        for key in ("Home", "ArrowRight", "ArrowRight"):  # the first choice, then the third
            pg.keyboard.press(key)
        tiles.get_by_text("rollout through layers 0-3").wait_for()
        tab_to(pg, "#vit-rollout-options")
        pg.keyboard.press("Enter")
        tab_to(pg, "#vit-discard input[type=range]")
        new_map(pg, lambda: pg.keyboard.press("ArrowRight"))  # the discard ratio: at once, not on leaving it
        tab_to(pg, "#vit-layer input[type=range]")
        assert focus_drawn(pg)
        pg.keyboard.press("ArrowLeft")
        pg.keyboard.press("ArrowLeft")  # layer 3 -> 1
        details.get_by_text("layer 1/3").wait_for()
        tiles.get_by_text("rollout through layers 0-1").wait_for()
        assert "layer 1" in caption.inner_text()
        tab_to(pg, "#vit-view", back=True)  # the per-head grid again, for the head
        pg.keyboard.press("Home")
        caption.get_by_text("head 0").wait_for()
        tab_to(pg, "#vit-head input[type=range]")
        pg.keyboard.press("ArrowRight")
        caption.get_by_text("head 1").wait_for()
        assert pg.get_by_test_id("toast-body").count() == 0
        screenshot(pg, "vit_keyboard_walk")


@pytest.mark.browser
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_every_control_is_named_focus_is_drawn_and_axe_finds_nothing_serious(browser, app_url, size):
    with visit(browser, app_url, size) as pg:
        assert pg.evaluate(NAMELESS) == []
        pg.locator("#vit-digit-examples").get_by_role("button").first.focus()
        pg.keyboard.press("Tab")  # (focus drawn for the keyboard: reached by Tab)
        assert pg.evaluate("() => !!document.activeElement.closest('#vit-digit-examples')") and focus_drawn(pg)
        assert serious(pg) == []
