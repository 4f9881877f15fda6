"""An error shown inside a panel (not as a toast) goes through the escape for Markdown (`errors.markdown_text`):
visitor text in its message (a model name typed in a box) shows as text, never as markup, HTML or Markdown."""

from __future__ import annotations

import gradio as gr

from attention.ui.common.components import error, error_note
from attention.ui.vit.fields import vit_pass
from attention.ui.vit.panels import ComparePanel
from attention.vit.serve.passes import Ref

MARKUP = "<img src=x onerror=alert(1)>"


def test_an_error_note_shows_its_message_as_text():
    from tests.test_errors import markdown_rendered

    typed = f"Model {MARKUP!r} & co, [Log in](https://evil.example) ![a](http://127.0.0.1:9/x.png)"
    page = markdown_rendered(error_note(typed))
    assert page.tags == ["p"] and page.text.strip() == f"⚠️ {typed}"
    assert error(MARKUP, visible=False).message == "&lt;img src=x onerror=alert(1)>"


def test_the_compare_panel_shows_a_bad_second_model_as_text():
    with gr.Blocks():
        panel = ComparePanel(vit_pass)
    st = Ref(("d", "mnist_vit", "auto", ""), (7, 7), 4, 4)
    img = "examples/digits/digit_3.png"
    out = panel.update(
        img, "mnist_vit", MARKUP, "auto", None, None, -1, "heads", 0, 0.6, 0.6, "inferno", st, None, None
    )
    note = out[panel.cdetails]
    from tests.test_errors import markdown_rendered

    page = markdown_rendered(note)
    assert note.startswith("⚠️ ") and page.tags == ["p"] and MARKUP in page.text
