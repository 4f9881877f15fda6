"""Spec of attention.ui.common.endpoint: an API endpoint's hidden inputs are its handler's parameters, defaults
and order, one component kind per default's type, and a parameter without a default is refused."""

from __future__ import annotations

import gradio as gr
import pytest

from attention.ui.common.endpoint import endpoint


def toy(image, model="m", layer=-1, threshold=0.6, query_row=None, npz=False, progress=gr.Progress()):
    return image


def registered(fn, **kw) -> tuple[dict, list[dict]]:
    with gr.Blocks() as demo:
        with gr.Row(visible=False):
            endpoint(fn, "toy", gr.File(label="image"), [gr.JSON(label="info")], **kw)
    cfg = demo.get_config_file()
    comps = {c["id"]: c for c in cfg["components"]}
    dep = next(d for d in cfg["dependencies"] if d.get("api_name") == "toy")
    return dep, [comps[i] for i in dep["inputs"]]


def test_hidden_inputs_are_the_handlers_parameters_with_their_defaults_in_order():
    dep, inputs = registered(toy, options={"model": {"info": "a model"}})
    got = [(c["props"]["label"], c["type"], c["props"].get("value")) for c in inputs]
    assert got == [
        ("image", "file", None),
        ("model", "textbox", "m"),
        ("layer", "number", -1),
        ("threshold", "number", 0.6),
        ("query_row", "number", None),
        ("npz", "checkbox", False),
    ]  # progress (gr.Progress) is Gradio's, not an input
    assert inputs[1]["props"]["info"] == "a model" and dep["api_visibility"] == "public"


def test_a_parameter_without_a_default_is_refused_naming_it():
    def bad(image, model, layer=-1):
        return image

    with pytest.raises(TypeError, match="none: model"):
        registered(bad)
