"""A stateless API endpoint registered from its handler: the hidden inputs are read off the handler's
signature (each parameter's name and default), so an endpoint's parameters and defaults are written
once, in the handler, and its hidden form cannot drift from them.

    with gr.Row(visible=False):
        endpoint(attention_maps_fn(model, defaults), "attention_maps", image_path(type="filepath", label="image"),
                 [gr.Image(format="png", type="filepath", label="overlays"), gr.File(label="maps")],
                 validator=queue_share())
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import gradio as gr

from attention.ui.common.components import number


def hidden_input(name: str, default: object, **options) -> gr.components.Component:
    """The input of an API parameter with a default, labelled with its name (what API clients see): a
    checkbox for a bool, a text box for a string, else a number field (None: empty)."""
    if isinstance(default, bool):
        return gr.Checkbox(default, label=name, **options)
    if isinstance(default, str):
        return gr.Textbox(default, label=name, **options)
    return number(default, label=name, **options)


def endpoint(
    fn: Callable,
    api_name: str,
    first: gr.components.Component,
    outputs: list[gr.components.Component],
    *,
    options: dict[str, dict] | None = None,
    **click,
) -> None:
    """Register `fn` as the public API endpoint `api_name`, behind a hidden button of that name.

    first: the input of `fn`'s first parameter (the image or video, which has no default); every other
    parameter gets its `hidden_input`, in signature order (a `gr.Progress` default is Gradio's, not an
    input). options: per parameter name, more keyword arguments for its input (e.g. `info`). click: the
    queue's keywords for `.click` (validator, concurrency). Call it inside a hidden `gr.Row`.
    """
    params = list(inspect.signature(fn).parameters.values())[1:]
    if missing := [p.name for p in params if p.default is p.empty]:
        raise TypeError(f"{api_name}: every parameter after the first needs a default; none: {', '.join(missing)}")
    inputs = [first] + [
        hidden_input(p.name, p.default, **(options or {}).get(p.name, {}))
        for p in params
        if not isinstance(p.default, gr.Progress)
    ]
    gr.Button(api_name).click(fn, inputs, outputs, api_name=api_name, api_visibility="public", **click)
