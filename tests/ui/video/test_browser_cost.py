"""In a real browser, at 1400x1000 and 390x844: the Video tab says what a video will cost before it
runs (issue 37: after the digit example, the cat clip ran at its native size for 53 s unannounced, its
progress frozen at 0 %). The walk: the example, then the cat clip (the example left a cheap resolution),
then its native size (over the threshold: the run asks for confirmation and refuses without it), then
its first 0.3 s, which runs with its progress moving frame by frame, and plays."""

from __future__ import annotations

import time

import pytest

from tests.conftest import ROOT, screenshot
from tests.ui.pages import opened
from tests.ui.video.test_browser import open_video_tab
from tests.ui.vit.test_browser_layout import DESKTOP, PHONE

CAT = str(ROOT / "examples" / "videos" / "chelsea.mp4")


def estimate(pg, words: str) -> str:
    pg.locator("#video-estimate").get_by_text(words, exact=False).wait_for()
    return pg.locator("#video-estimate").inner_text()


def typed(pg, sel: str, value: str) -> None:
    box = pg.locator(f"{sel} input")
    box.fill(value)
    box.press("Enter")
    box.blur()


@pytest.mark.browser
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_videos_cost_is_known_and_confirmed_before_it_runs(browser, app_url, size):
    with opened(browser, app_url, size) as pg:
        open_video_tab(pg)
        run = pg.locator("#video-run").bounding_box()
        assert run["y"] + run["height"] <= size[1], run  # the run button on the first screen
        pg.locator("#video-controls .gallery-item, #video-controls tbody tr").first.click()  # the digit example
        estimate(pg, "40 frames · grid 14×28 patches")
        assert pg.locator("#video-resolution input").input_value() != "native"  # nothing costly left behind
        pg.locator("#video-in button[aria-label='Clear']").click()
        pg.locator("#video-in input[type=file]").set_input_files(CAT)
        estimate(pg, "40 frames · grid 14×18 patches")  # the cat at the example's 56 px: cheap
        assert pg.locator("#video-confirm").is_hidden()
        typed(pg, "#video-resolution", "native")
        text = estimate(pg, "grid 90×120 patches")
        assert "confirm" in text and "s on this server" in text
        pg.locator("#video-confirm").wait_for()
        pg.locator("#video-run").click()  # not confirmed: a toast, no run
        pg.get_by_test_id("toast-body").get_by_text("Run it anyway").wait_for()
        assert pg.locator("#video-out video").count() == 0
        typed(pg, "#video-seconds", "0.3")
        estimate(pg, "3 frames · grid 90×120")
        pg.locator("#video-confirm").wait_for(state="hidden")
        pg.locator("#video-run").click()
        t0, seen = time.perf_counter(), []
        while pg.locator("#video-out video").count() == 0 and time.perf_counter() - t0 < 120:
            txt = pg.locator("#video-out").inner_text()
            if "Frame" in txt and txt not in seen:
                seen.append(txt)
            time.sleep(0.05)
        pg.locator("#video-details").get_by_text("3 frames at 10 fps").wait_for()
        assert any("Frame 1 of about 3" in s for s in seen), seen  # the progress moved after the first frame
        screenshot(pg, f"video_cost_{size[0]}")
