"""In a real browser, at 1400x1000 and 390x844: the ViT tab's first screen is calm. On it: the large map, the image
with its examples right under the upload, the model, the layer and head sliders and the view; the threshold, the
opacity, the colours, the resolution and the rollout's options folded under "More options"; the tour offered in
one small line; while the first maps load, a progress timer on the map alone (not on every control). On a phone
the map comes first with its sliders, then the image, its examples, the model and the view, before the tiles."""

from __future__ import annotations

import pytest

from tests.conftest import ARTIFACTS
from tests.ui.pages import PHONE_TOUCH, opened
from tests.ui.vit.test_browser_layout import DESKTOP, PHONE, box
from tests.ui.vit.test_browser_live import ready

# the blocks that showed a progress timer ("0.2s") while the page loaded, recorded from the first paint on
TIMERS = """window.attentionTimers = new Set();
new MutationObserver(() => document.querySelectorAll('.progress-text').forEach((e) => {
  if (/\\d\\s*s\\b/.test(e.textContent) && e.getClientRects().length)
    window.attentionTimers.add((e.closest('[id]') || {}).id || e.className);
})).observe(document, {subtree: true, childList: true, characterData: true});"""
ON_SCREEN = ("#vit-query-image img", "#vit-layer", "#vit-head", "#vit-caption")
FOLDED = ("#vit-threshold", "#vit-alpha", "#vit-cmap", "#vit-resolution", "#vit-fusion", "#vit-discard")


def inside(b: dict, size: tuple[int, int]) -> bool:
    return b["x"] >= 0 and b["y"] >= 0 and b["x"] + b["width"] <= size[0] + 1 and b["y"] + b["height"] <= size[1] + 1


@pytest.mark.browser
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_first_screen_holds_the_map_the_image_its_examples_and_the_main_controls(browser, app_url, size):
    options = PHONE_TOUCH if size == PHONE else {"size": DESKTOP}
    with opened(browser, "about:blank", **options) as pg:
        pg.add_init_script(TIMERS)
        pg.goto(app_url)
        ready(pg)
        beside = ("#vit-image", "#vit-digit-examples", "#vit-model", "#vit-view")  # (on a phone: under the map)
        shown = ON_SCREEN + beside if size == DESKTOP else ("#vit-caption", "#vit-query-image img")
        for sel in shown:
            assert inside(box(pg, sel), size), (sel, box(pg, sel))
        assert box(pg, "#vit-layer")["y"] < size[1]  # (on a phone: the layer slider starts on it, right under the map)
        for sel in FOLDED:
            assert not pg.locator(sel).is_visible(), sel
        image, examples = box(pg, "#vit-image"), box(pg, "#vit-digit-examples")
        assert 0 <= examples["y"] - (image["y"] + image["height"]) <= 40  # right under the upload
        assert box(pg, "#vit-tour-bar")["height"] <= (60 if size == DESKTOP else 110)  # one small line
        if size == PHONE:  # the map, its sliders, then the image, its examples, the model, the view; then the tiles
            order = ["#vit-query-image img", "#vit-layer", "#vit-head", "#vit-image", "#vit-digit-examples"]
            order += ["#vit-model", "#vit-view", "#vit-gallery"]
            ys = [box(pg, s)["y"] for s in order]
            assert ys == sorted(ys), dict(zip(order, ys))
            assert box(pg, "#vit-view")["y"] - box(pg, "#vit-query-image img")["y"] <= 2 * size[1]
        timers = pg.evaluate("[...window.attentionTimers]")
        assert set(timers) <= {"vit-query-image"}, timers
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"first_screen_{size[0]}.png"))  # the first screen, as a visitor sees it
