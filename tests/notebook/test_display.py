"""Every result type shows itself in a notebook (`_repr_png_`, `_repr_html_`) as the picture a user wants first:
the large map (drawn as the Space draws it) with the others beside it, captioned, escaped; `.show(...)` draws
another view and refuses a bad one by name."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import attention
from attention.notebook import display
from attention.vit.draw import drawing, views
from attention.vit.draw.frames import pictures
from attention.vit.text.result import TextRelevance
from tests.conftest import DIGIT
from tests.notebook.conftest import rgb

PNG = b"\x89PNG\r\n\x1a\n"


def test_attention_maps_show_the_mean_large_and_every_head_beside_it(maps):
    png, html = maps._repr_png_(), maps._repr_html_()
    assert png.startswith(PNG) and "<figure" in html and "query: CLS" in html and "head 3" in html
    img = rgb(png)
    large = drawing.reduced(views.query_image(maps, head=None), display.LARGE)  # the Space's large map, reduced
    assert np.array_equal(img[: large.shape[0], : large.shape[1]], large)
    assert img.shape[1] > large.shape[1] + 4 * display.SMALL  # four heads and the mean beside it


def test_show_draws_another_head_layer_and_query_from_the_kept_q_and_k(maps, mnist_vit):
    pic = maps.show(layer=1, head=2, query=(5, 2))
    fresh = attention.attention_maps(mnist_vit, DIGIT, query=(5, 2), layer=1)  # the package's own answer
    large = drawing.reduced(views.query_image(fresh, head=2), display.LARGE)
    assert np.array_equal(pic.image[: large.shape[0], : large.shape[1]], large)
    assert "layer 1/3 · query: patch (5, 2) · large: head 2" in pic.caption
    assert rgb(pic._repr_png_()).shape == pic.image.shape


@pytest.mark.parametrize("view", ["mean", "rollout", "masks", "fig3"])
def test_each_view_of_the_space_is_drawn(maps, view):
    pic = maps.show(view=view)
    assert pic.image.shape[0] >= 100 and views.VIEWS[view] in pic.caption


def test_a_bad_view_head_or_query_is_refused_by_name(maps):
    with pytest.raises(attention.InputError, match="heads"):
        maps.show(view="nope")
    with pytest.raises(attention.InputError, match="4 heads"):
        maps.show(head=9)
    bare = attention.attention_maps(attention.load_vit("mnist_vit"), DIGIT)
    with pytest.raises(attention.InputError, match="keep_qk=True"):
        bare.show(query=(1, 1))


def test_relevance_names_its_class_and_the_top_classes(mnist_vit):
    rel = attention.relevance(mnist_vit, DIGIT)
    html = rel._repr_html_()
    assert "Why &#x27;3&#x27;?" in html and "top classes: 3 " in html
    assert rel._repr_png_().startswith(PNG)
    assert "Grad-rollout" in rel.show(view="grad_rollout").caption


def test_a_row_step_by_step_shows_its_tables(maps):
    steps = attention.explain_row(maps, query=(3, 4), head=0)
    assert steps._repr_png_() is None  # a table: no picture of its own
    assert "<table" in steps._repr_html_() and "Step by step: layer 3, head 0" in steps._repr_html_()


def test_a_video_frame_shows_beside_its_map(mnist_vit):
    frame = next(iter(attention.attention_video(mnist_vit, "examples/videos/digits.mp4", seconds=0.2)))
    pic = frame.show(view="head", head=1)
    assert pic.caption.startswith("Frame 0 at 0.00 s · head (head 1)")
    assert frame._repr_png_().startswith(PNG)


def text_result(prompts: tuple[str, ...]) -> TextRelevance:
    """A text relevance of DIGIT's 7x7 grid with made-up maps (drawing only reads them)."""
    rng = np.random.default_rng(0)
    P = len(prompts)
    maps = {r: rng.random((P, 49), dtype=np.float32) for r in ("chefer", "legrad", "sclip")}
    image = Image.open(DIGIT).convert("RGB")
    return TextRelevance(prompts, np.arange(P, dtype=np.float32), "clip", 100.0, maps, (7, 7), image, 4, 1)


def test_text_relevance_names_every_prompt_escaped():
    tr = text_result(("<img src=x onerror=alert(1)>", "a 7"))
    html = tr._repr_html_()
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert "Where is &#x27;a 7&#x27;?" in html  # the best match large
    with pytest.raises(attention.InputError, match="0 to 1"):
        tr.show(prompt=2)
    with pytest.raises(attention.InputError, match="chefer"):
        tr.show(rule="nope")


def test_ipython_gets_the_picture_and_its_html_from_one_drawing(maps, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    drawn = []
    monkeypatch.setattr(display, "pictures", lambda *a, **k: drawn.append(1) or pictures(*a, **k))
    data, _ = InteractiveShell.instance().display_formatter.format(maps)
    assert {"image/png", "text/html", "text/plain"} <= set(data) and len(drawn) == 1
