"""In a real browser: the ViT tab's Video sub-tab offline. Pick the digit clip, make its attention
video, and see it play in the page: Chromium decodes the MP4 (its duration and size are read from
the <video> element) and a drawn frame has the attention's colours."""

from __future__ import annotations

import pytest

from tests.conftest import screenshot
from tests.ui.pages import opened

READ_VIDEO = """async () => {
  const v = document.querySelector('#video-out video');
  if (v.readyState < 2) await new Promise(r => v.addEventListener('loadeddata', r, {once: true}));
  v.pause();
  v.currentTime = 2.0;
  await new Promise(r => v.addEventListener('seeked', r, {once: true}));
  const c = document.createElement('canvas');
  c.width = v.videoWidth; c.height = v.videoHeight;
  const g = c.getContext('2d');
  g.drawImage(v, 0, 0);
  const half = (x0) => {  // the share of coloured pixels (channels 40 apart) in one half of the frame
    const d = g.getImageData(x0, 0, c.width / 2, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 40) n++;
    }
    return n / (d.length / 4);
  };
  return {duration: v.duration, width: v.videoWidth, height: v.videoHeight, left: half(0), right: half(c.width / 2)};
}"""


def open_video_tab(page):
    page.get_by_role("tab", name="ViT attention").click()
    page.get_by_role("tab", name="Video").click()
    page.locator("#video-run").wait_for()


@pytest.mark.browser
def test_the_digit_clip_makes_a_video_that_plays_in_the_page(page):
    open_video_tab(page)
    page.locator("#video-controls").get_by_text("Examples").wait_for()
    page.locator("#video-controls .gallery-item, #video-controls tbody tr").first.click()
    page.locator("#video-in video").wait_for()
    page.locator("#video-run").click()
    page.locator("#video-out video").wait_for(timeout=120_000)
    page.locator("#video-details").get_by_text("layer 2 · 40 frames at 10 fps").wait_for()
    got = page.evaluate(READ_VIDEO)
    assert got["duration"] == pytest.approx(4.0, abs=0.15)
    assert (got["width"], got["height"]) == (896, 224)  # 112x56 frames, 4x, the frame beside head 3's map
    screenshot(page, "video_digits_desktop")
    print("frame at 2 s, share of coloured pixels left and right:", got["left"], got["right"])
    assert got["left"] < 0.002  # the frame: grey digits on black
    assert got["right"] > 0.01  # the map: inferno's colours where the head looks (3.5% measured)


@pytest.mark.browser
def test_the_video_tab_on_a_phone(browser, app_url):
    with opened(browser, app_url, (390, 844)) as pg:
        open_video_tab(pg)
        pg.locator("#video-in").wait_for()
        box = pg.locator("#video-controls").bounding_box()
        assert box["width"] <= 390
        screenshot(pg, "video_phone")
