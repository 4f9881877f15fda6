"""Keyboard and screen readers, page-wide: what Gradio 6.31's own controls leave out, put back by a script
(`a11y.js`) that a tab's hidden component carries.

- A slider moved by keys (arrows, Home/End, Page Up/Down) commits as a drag does: Gradio fires `release` on
  pointerup and on leaving the number box only, so a tab that redraws on `release` missed every keyboard change.
- Enter in a slider's number box commits it, as leaving the box does.
- A radio group's choice moves with the arrow keys: Gradio names each choice's input apart, so the browser sees
  groups of one.
- Focusable controls Gradio leaves nameless (a picture to click, an example's thumbnail) get the names a tab
  gives (`component(names)`).

Focus is drawn visibly by `app.css`.
"""

from __future__ import annotations

import json
from importlib import resources

import gradio as gr

A11Y_JS = (resources.files(__package__) / "a11y.js").read_text()


def component(names: dict[str, str | list[str]], elem_id: str) -> gr.HTML:
    """The hidden component (in the page, not on screen) carrying the script and a tab's `names`: CSS selector ->
    the accessible name of every focusable match without one, or a list of names for the matches in document
    order."""
    return gr.HTML(json.dumps(names), html_template="", js_on_load=A11Y_JS, visible="hidden", elem_id=elem_id)
