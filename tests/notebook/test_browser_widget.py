"""The explorer widget in a real JupyterLab served on loopback (Chromium): a notebook runs `attention.explore`,
a patch clicked becomes the query and the large map is redrawn in the page to that patch's row, then the
layer and the head change; each picture drawn in the browser is compared with the package's own answer for that
query (a fresh forward pass, drawn by `views.query_image`), pixel for pixel. The same at a phone's width.
One JupyterLab for the module; its start-up seconds are printed."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

import attention
from attention.vit.draw import views
from tests.conftest import DIGIT, screenshot
from tests.notebook.conftest import rgb
from tests.notebook.lab import jupyterlab, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.subprocess]
LIVE = "document.querySelector('.ae-root').parentElement.attentionLive"
LAST = f"""() => {{
  const L = {LIVE}, c = document.createElement("canvas");
  [c.width, c.height] = [L.last.width, L.last.height];
  c.getContext("2d").putImageData(L.last, 0, 0);
  return c.toDataURL();
}}"""
SHOWN = """() => {
  const img = document.querySelector("#vit-query-image img"), c = document.createElement("canvas");
  [c.width, c.height] = [img.naturalWidth, img.naturalHeight];
  c.getContext("2d").drawImage(img, 0, 0);
  return c.toDataURL();
}"""
CELL = """import attention
model = attention.load_vit("mnist_vit")
res = attention.attention_maps(model, {digit!r}, keep_qk=True)
attention.explore(res, model="mnist_vit")"""


def expected(query: tuple[int, int], layer: int, head: int) -> np.ndarray:
    """The package's answer: a fresh pass with `query`, its head `head` at `layer` drawn as the large map."""
    res = attention.attention_maps(MODEL, DIGIT, query=query, layer=layer)
    return views.query_image(res, head=head)


MODEL = attention.load_vit("mnist_vit")


@pytest.fixture(scope="module")
def notebook(browser):
    """A page of JupyterLab with the widget's notebook run (one JupyterLab for the module)."""
    from tests.ui.pages import opened

    with jupyterlab() as (url, root, seconds):
        print(f"JupyterLab answered in {seconds:.1f} s")
        shutil.copy(DIGIT, root / "digit_3.png")
        write_notebook(root / "explore.ipynb", [CELL.format(digit="digit_3.png")])
        with opened(browser, f"{url}/lab/tree/explore.ipynb") as pg:
            pg.wait_for_function("() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel")
            t0 = time.perf_counter()
            pg.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            pg.wait_for_function(f"() => document.querySelector('.ae-root') && {LIVE}.base")
            print(f"the widget was drawn {time.perf_counter() - t0:.1f} s after the run began")
            yield pg


def click_patch(pg, row: int, col: int) -> None:
    """Click the middle of patch (row, col) of the large map, as shown."""
    img = pg.locator("#vit-query-image img")
    box = img.bounding_box()
    natural, step = pg.evaluate(
        f"() => [document.querySelector('#vit-query-image img').naturalWidth, {LIVE}.p.patch * {LIVE}.p.scale]"
    )
    k = box["width"] / natural
    img.click(position={"x": (col + 0.5) * step * k, "y": (row + 0.5) * step * k})


def drawn(pg, act) -> np.ndarray:
    """Do `act`; the large map the page draws next (the live script's own drawing), RGB."""
    n = pg.evaluate(f"() => {LIVE}.drawn")
    act()
    pg.wait_for_function(f"n => {LIVE}.drawn > n && {LIVE}.cur.maps", arg=n)
    return rgb(pg.evaluate(LAST))


def test_a_clicked_patch_becomes_the_query_then_layer_and_head_change(notebook):
    pg = notebook
    screenshot(pg, "notebook-widget")
    mine = drawn(pg, lambda: click_patch(pg, 5, 2))
    assert np.array_equal(mine, expected((5, 2), layer=-1, head=0))
    pg.locator(".ae-what").get_by_text("patch (row 5, col 2)").wait_for()  # then the kernel's picture, the same
    assert np.array_equal(rgb(pg.evaluate(SHOWN)), mine)

    layer = pg.locator("#vit-layer input")
    mine = drawn(pg, lambda: (layer.focus(), layer.press("Home")))  # layer 0, by the keyboard
    assert pg.evaluate(f"() => {LIVE}.cur.layer") == 0
    assert np.array_equal(mine, expected((5, 2), layer=0, head=0))

    mine = drawn(pg, lambda: pg.locator("#vit-gallery figure").nth(2).click())  # head 2's tile
    assert np.array_equal(mine, expected((5, 2), layer=0, head=2))
    pg.locator("#vit-caption strong").get_by_text("head 2").wait_for()
    pg.wait_for_function(f"() => {LIVE}.p.head === 2")  # the kernel has drawn it too
    screenshot(pg, "notebook-widget-clicked")

    pg.get_by_role("button", name="Export one HTML file").click()  # the Space's one-file export, from the kernel
    pg.locator(".ae-exported").get_by_text("Written: ").wait_for()
    page = Path(pg.locator(".ae-exported").inner_text().removeprefix("Written: ")).read_text()
    assert "layer 0" in page and "patch (row 5, col 2)" in page


def test_at_a_phone_width_the_widget_fits_and_a_click_still_redraws(notebook):
    pg = notebook
    pg.set_viewport_size({"width": 390, "height": 844})
    if pg.locator("#jp-left-stack").is_visible():  # the file browser folded, as on a phone one would
        pg.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
    img = pg.locator("#vit-query-image img")
    img.scroll_into_view_if_needed()
    box = img.bounding_box()
    assert 200 <= box["width"] <= 390 and box["x"] >= 0, box  # the map takes the width, whole on screen
    layer = pg.evaluate(f"() => {LIVE}.cur.layer")
    head = pg.evaluate(f"() => {LIVE}.cur.head")
    mine = drawn(pg, lambda: click_patch(pg, 1, 4))
    assert np.array_equal(mine, expected((1, 4), layer=layer, head=head))
    screenshot(pg, "notebook-widget-phone")
