"""In a real browser: the large map is drawn in the page the moment a patch, a layer or a head is
picked (attention/vit/serve/live.py), and it is the server's picture, pixel for pixel: a digit on mnist_vit
(PNG both sides) and a photo on a tiny DINOv3 (tiles reduced by box average; compared with the pictures
the server encodes). The server's picture then takes its place."""

from __future__ import annotations

import base64
import re
import threading

import numpy as np
import pytest
from PIL import Image

from attention.vit.draw import drawing, views
from attention.vit.draw.drawing import reduced
from attention.vit.serve import live
from tests.conftest import screenshot
from tests.hub_cache import DINOV3_REPO, add_tiny_dinov3, temporary_hf_home
from tests.ui.vit.test_browser import click_image_at

MAP = "#vit-query-image img"

# pixels where the server's pictures (in the <img>s) differ from the last ones drawn here, the large map
# first, then each head tile (-1: sizes differ)
DIFFERING = """() => {
  const differ = (img, mine) => {
    const c = document.createElement("canvas");
    [c.width, c.height] = [img.naturalWidth, img.naturalHeight];
    const g = c.getContext("2d");
    g.drawImage(img, 0, 0);
    if (mine.width !== c.width || mine.height !== c.height) return -1;
    const s = g.getImageData(0, 0, c.width, c.height).data, o = mine.data;
    let n = 0;
    for (let i = 0; i < s.length; i += 4) if (s[i] !== o[i] || s[i + 1] !== o[i + 1] || s[i + 2] !== o[i + 2]) n++;
    return n;
  };
  const L = window.attentionLive, tiles = [...document.querySelectorAll("#vit-gallery .thumbnail-item img")];
  const big = differ(document.querySelector("#vit-query-image img"), L.last);
  return [big, ...L.lastTiles.map((mine, i) => differ(tiles[i], mine))];
}"""
SERVED = """() => [...document.querySelectorAll("canvas.vit-live")].every(c => c.style.display === "none")"""


def ready(page) -> None:
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    page.wait_for_function("() => (window.attentionLive || {}).base")


def answered(page, act, tries: int = 3, each_ms: int = 15_000) -> None:
    """Do `act` and wait until the server's answer to it came (the page's own count of the answers it received,
    `window.attentionLive.answers`), not a fixed time, so the next click lands on a settled page. An act that
    brought no answer within `each_ms` (a click on a gallery Gradio was replacing is lost) is done again, at most
    `tries` times, as a visitor would click again."""
    for _ in range(tries):
        n = page.evaluate("window.attentionLive.answers")
        act()
        try:
            page.wait_for_function("n => window.attentionLive.answers > n", arg=n, timeout=each_ms)
            return
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: no answer to that act
            continue
    raise AssertionError(f"no answer from the server after {tries} tries of {each_ms} ms")


def click_range(page, slider: str, x: float) -> None:
    """Click a slider's range `x` px from its left end (negative: from its right end)."""
    rng = page.locator(f"{slider} input[type=range]")
    box = rng.bounding_box()
    rng.click(position={"x": x if x >= 0 else box["width"] + x, "y": box["height"] / 2})


def drawn_then_served(page, act, tiles: int = 5) -> list[int]:
    """Do `act`; check the large map and the `tiles` head tiles were drawn here (canvases over the
    <img>s) before the server's pictures came, then replaced by them; return the pixels where the
    server's and ours differ, the large map's first."""
    n, src = page.evaluate("window.attentionLive.drawn"), page.locator(MAP).get_attribute("src")
    act()
    page.wait_for_function("n => window.attentionLive.drawn > n", arg=n)
    page.wait_for_function("k => (window.attentionLive.lastTiles || []).length === k", arg=tiles)
    page.wait_for_function(
        "s => { const e = document.querySelector('#vit-query-image img'); return e.src !== s && e.complete }", arg=src
    )
    page.wait_for_function("() => [...document.querySelectorAll('#vit-gallery img')].every(e => e.complete)")
    page.wait_for_function(SERVED)
    return page.evaluate(DIFFERING)


@pytest.mark.browser
def test_patch_layer_head_and_opacity_are_drawn_here_first_and_match_the_servers_pictures(page):
    ready(page)
    assert drawn_then_served(page, lambda: click_image_at(page, MAP, 0.8, 0.3)) == [0] * 6  # crosshair, squares
    assert "row 2, col 5" in page.locator("#vit-query-label").inner_text()

    assert drawn_then_served(page, lambda: click_range(page, "#vit-layer", 4)) == [0] * 6
    assert page.locator("#vit-layer input[type=number]").input_value() == "0"

    assert drawn_then_served(page, lambda: page.locator("#vit-gallery .thumbnail-item").nth(2).click()) == [0] * 6
    assert page.locator("#vit-head input[type=number]").input_value() == "2"
    for slider in ("#vit-head", "#vit-alpha"):  # the head's and the opacity's ranges, at their right end
        assert drawn_then_served(page, lambda s=slider: click_range(page, s, -4)) == [0] * 6
    assert page.locator("#vit-head input[type=number]").input_value() == "3"
    assert float(page.locator("#vit-alpha input[type=number]").input_value()) > 0.9
    # the mean's tile: the large map shows the mean at once; the gallery becomes that one tile (the server's)
    assert drawn_then_served(page, lambda: page.locator("#vit-gallery .thumbnail-item").nth(4).click(), 0) == [0]
    page.locator("#vit-gallery").get_by_text("mean of 4 heads").wait_for()
    assert page.get_by_test_id("toast-body").count() == 0


@pytest.mark.browser
def test_the_drawings_lie_exactly_over_the_pictures_and_let_clicks_through(page):
    ready(page)
    assert drawn_then_served(page, lambda: click_image_at(page, MAP, 0.2, 0.7)) == [0] * 6
    assert page.evaluate("window.attentionLive.show()")  # drawn again over the same pictures: they stay
    page.wait_for_function("() => window.attentionLive.lastTiles.length === 5")
    imgs = page.locator("#vit-query-image img, #vit-gallery .thumbnail-item img")
    canvases = page.locator("#vit-query-image canvas.vit-live, #vit-gallery canvas.vit-live")
    assert imgs.count() == canvases.count() == 6
    for i in range(6):  # each drawing in its picture's box, fitted the same way
        a, b = imgs.nth(i).bounding_box(), canvases.nth(i).bounding_box()
        assert all(abs(a[k] - b[k]) < 1 for k in ("x", "y", "width", "height")), (i, a, b)
        fit = "e => getComputedStyle(e).objectFit"
        assert canvases.nth(i).evaluate(fit) == imgs.nth(i).evaluate(fit) in ("contain", "scale-down")
    assert page.evaluate(DIFFERING) == [0] * 6
    screenshot(page, "vit_live_drawn")
    click_image_at(page, MAP, 0.9, 0.1)  # through the drawing: the <img> gets it, as Gradio's select
    page.locator("#vit-query-label").get_by_text(re.compile(r"row 0, col 6")).wait_for()


@pytest.mark.browser
def test_quick_clicks_end_on_the_last_one(page, monkeypatch):
    """A second click made while the first one's job is still computing (a busy server) is the one the
    maps end on. The server's pixel -> patch rule holds the first click's job until the second click is
    made, so the second always lands on a running job (as it sometimes did under load). Two causes made it
    fail: Gradio 6.31's `always_last` rerun replays the first click's SelectData (the tab reads the latest
    click's pixel from the page, `ui.vit.live.AFTER_CLICK`), and the visitor's queue share counted the first
    answer's three panel redraws and refused the rerun (ATTENTION_VISITOR_JOBS is 6, room for them)."""
    ready(page)
    real, got = views.patch_at, []
    first_in, first_out, second_in = threading.Event(), threading.Event(), threading.Event()

    def held(x: int, y: int, base):
        got.append((x, y))
        if len(got) == 1:
            first_in.set()
            first_out.wait(60)
        else:
            second_in.set()
        return real(x, y, base)

    monkeypatch.setattr(views, "patch_at", held)
    try:
        click_image_at(page, MAP, 0.1, 0.1)
        assert first_in.wait(60), "the first click's job never ran"
        click_image_at(page, MAP, 0.9, 0.6)  # while the first click's job runs
    finally:
        first_out.set()
    assert second_in.wait(30), "no job ran after the first (refused, or never asked)"
    assert got[1] != got[0], f"the second job got the first click's pixel {got[0]} again"
    page.locator("#vit-query-label").get_by_text(re.compile(r"row 4, col 6")).wait_for()
    # the tiles drawn here again once the gallery settled (live.js `tiles`: it may be mid-update when the
    # second click's maps come), then the server's pictures in
    page.wait_for_function("() => window.attentionLive.lastTiles.length === 5")
    page.wait_for_function("() => [...document.querySelectorAll('#vit-gallery img')].every(e => e.complete)")
    page.wait_for_function(SERVED)
    assert page.evaluate(DIFFERING) == [0] * 6  # the last drawings are the last answer's pictures


@pytest.mark.browser
def test_enter_in_a_sliders_number_box_updates_the_maps(page):
    ready(page)
    box = page.locator("#vit-layer input[type=number]")
    box.fill("1")
    box.press("Enter")  # Gradio alone would wait until the box loses focus
    page.locator("#vit-details").get_by_text("layer 1/3").wait_for()


# the pictures last drawn here, as base64 RGBA: the large map, then each head tile
DRAWN = """() => {
  const b64 = (im) => {
    let s = "";
    for (let i = 0; i < im.data.length; i += 0x8000) s += String.fromCharCode(...im.data.subarray(i, i + 0x8000));
    return [im.height, im.width, btoa(s)];
  };
  const L = window.attentionLive;
  return [L.last, ...L.lastTiles].map(b64);
}"""


def drawn_here(page) -> list[np.ndarray]:
    """The large map and the head tiles last drawn in the page, uint8 (H, W, 3) each."""
    out = []
    for h, w, data in page.evaluate(DRAWN):
        out.append(np.frombuffer(base64.b64decode(data), np.uint8).reshape(h, w, 4)[..., :3])
    return out


def servers_pictures(page, head: int) -> list[np.ndarray]:
    """The server's own pictures of the view on screen, before encoding (the tab sends them as JPEG for a
    photo): `frames.tab_frame`'s large map and gallery tiles, from the pass the page's token names."""
    pl = page.evaluate("(({token, query, layer, alpha}) => ({token, query, layer, alpha}))(window.attentionLive.p)")
    cur = page.evaluate("(({query, layer}) => ({query, layer}))(window.attentionLive.cur)")
    res = live.find(pl["token"]).at(tuple(cur["query"]), cur["layer"])
    big = views.query_image(res, head=head, alpha=pl["alpha"])
    return [big, *(reduced(t.image, drawing.THUMB_SIDE) for t in views.tiles(res, "heads", alpha=pl["alpha"]))]


@pytest.fixture
def tiny_dinov3(tmp_path):
    """A tiny DINOv3 (random weights, 2 heads, patch 16) in the app's Hub cache, offline: its model name."""
    with temporary_hf_home(tmp_path / "hf") as add:
        add_tiny_dinov3(add)
        yield f"hf-hub:{DINOV3_REPO}"


@pytest.mark.browser
def test_on_a_photo_the_drawings_are_the_servers_pictures_reduced_by_box_average(page, app_url, tiny_dinov3):
    """chelsea at 320 px: a 480x320 image, the large map 960x640, the tiles reduced 2x (240x160) by box average.
    The server sends JPEGs for photos; ours must equal the pictures it encodes, every pixel (both sides do
    the same integer arithmetic: PIL's float32 blend, the same rectangles, Pillow's box-average rounding)."""
    page.goto(app_url.rstrip("/") + f"/?example=chelsea&model={tiny_dinov3}&res=320&q=5,7")
    page.locator("#vit-query-label").get_by_text("row 5, col 7").wait_for()
    ready(page)
    assert page.evaluate("[window.attentionLive.p.tile_reduce, window.attentionLive.p.heads]") == [2, 2]

    drawn_then_served(page, lambda: click_image_at(page, MAP, 0.93, 0.12), tiles=3)  # the right edge: arms cut
    assert "row 2, col 27" in page.locator("#vit-query-label").inner_text()
    ours, server = drawn_here(page), servers_pictures(page, head=0)
    assert [a.shape for a in ours] == [a.shape for a in server] == [(640, 960, 3)] + [(160, 240, 3)] * 3
    for i, (a, b) in enumerate(zip(ours, server)):
        assert np.array_equal(a, b), (i, int((a != b).any(-1).sum()))
    # and those are what the page shows: the served JPEGs within their encoding's error of ours
    assert max(d for d in page.evaluate(JPEG_ERROR)) < 6

    drawn_then_served(page, lambda: page.locator("#vit-gallery .thumbnail-item").nth(1).click(), tiles=3)
    ours, server = drawn_here(page), servers_pictures(page, head=1)
    assert all(np.array_equal(a, b) for a, b in zip(ours, server))
    assert page.get_by_test_id("toast-body").count() == 0
    screenshot(page, "vit_live_photo")


# the mean absolute difference (levels) between each served picture and the one drawn here
JPEG_ERROR = (
    DIFFERING.replace("let n = 0;", "let n = 0, d = 0;")
    .replace(
        "if (s[i] !== o[i] || s[i + 1] !== o[i + 1] || s[i + 2] !== o[i + 2]) n++;",
        "{ d += Math.abs(s[i] - o[i]) + Math.abs(s[i + 1] - o[i + 1]) + Math.abs(s[i + 2] - o[i + 2]); n += 3; }",
    )
    .replace("return n;\n  };", "return d / n;\n  };")
)


@pytest.mark.browser
@pytest.mark.parametrize("k, shape", [(2, (160, 240)), (3, (37, 23)), (4, (45, 18)), (7, (9, 50))])
def test_the_browsers_box_average_is_pillows_reduce(page, k, shape):
    """live.js `boxReduce` against Pillow's Image.reduce (what the server reduces with), edge boxes too."""
    page.wait_for_function("() => (window.attentionLive || {}).boxReduce")
    img = np.random.default_rng(k).integers(0, 256, (*shape, 3), dtype=np.uint8)
    rgba = np.concatenate([img, np.full((*shape, 1), 255, np.uint8)], -1)
    h, w, data = page.evaluate(
        """([h, w, k, b64]) => {
          const s = atob(b64), im = new ImageData(w, h);
          for (let i = 0; i < s.length; i++) im.data[i] = s.charCodeAt(i);
          const out = window.attentionLive.boxReduce(im, k);
          let t = "";
          for (const v of out.data) t += String.fromCharCode(v);
          return [out.height, out.width, btoa(t)];
        }""",
        [*shape, k, base64.b64encode(rgba.tobytes()).decode()],
    )
    ours = np.frombuffer(base64.b64decode(data), np.uint8).reshape(h, w, 4)[..., :3]
    assert np.array_equal(ours, np.asarray(Image.fromarray(img).reduce(k)))
