"""The Q/K/V calculator's image endpoint for `gradio_client` and MCP callers: /patch_attention.

Its inputs are hidden components of their own, empty by default, rather than the tab's: the tab's
image holds a picture in the server's cache, and an endpoint's defaults are published (`view_api`,
the MCP schema), so a server path would be shown to every caller.
"""

from __future__ import annotations

import gradio as gr

from attention.calculator import patches as qkv_patches
from attention.ui.components import image_path, number, slider


def build(fn) -> None:
    """Register /patch_attention: `fn(image, patch, heads, seed, index)` -> (grid, maps, matrices, info,
    index update), on hidden inputs (every parameter after `image` has a default)."""
    with gr.Row(visible=False):
        image = image_path(type="filepath", image_mode=None, label="image")
        patch = number(16, label="patch")
        heads = number(4, label="heads")
        seed = number(0, label="seed")
        index = number(None, label="index")
        grid = gr.Image(format="png", label="grid")
        maps = gr.Image(format="png", label="maps")
        matrices = gr.Image(format="png", label="matrices")
        info = gr.Markdown(label="info")
        chosen = slider(0, qkv_patches.MAX_HEADS, value=0, step=1, label="index")
        go = gr.Button("patch_attention")
    go.click(
        fn,
        [image, patch, heads, seed, index],
        [grid, maps, matrices, info, chosen],
        api_name="patch_attention",
        api_visibility="public",
    )
