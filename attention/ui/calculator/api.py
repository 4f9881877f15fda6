"""The Q/K/V calculator's endpoints for `gradio_client` and MCP callers: /calculate and
/calculate_from_x (text matrices in, the calculator's JSON out), and /patch_attention (an image).

/patch_attention's inputs are hidden components of their own, empty by default, rather than the tab's: the tab's
image holds a picture in the server's cache, and an endpoint's defaults are published (`view_api`,
the MCP schema), so a server path would be shown to every caller.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import gradio as gr

from attention.calculator import patches as qkv_patches
from attention.calculator import report as qkv
from attention.calculator.settings import Settings
from attention.ui.common.components import image_path, number, slider, user_errors


def _json(matrices: dict, mode: str, settings: Settings) -> dict:
    """The API's answer: the calculator's JSON for `matrices` in `mode` with `settings`."""
    return qkv.to_json(qkv.compute(matrices, settings, mode=mode))


# the endpoints' settings parameters, after the matrices, in order: (name, type, default), as a client sends them
API_SETTINGS = (
    ("heads", int, 1),
    ("scale_mode", str, "default"),
    ("scale", float, 1.0),
    ("mask_mode", str, "none"),
    ("mask", str, ""),
    ("dropout", float, 0.0),
    ("seed", int, 0),
)


def _settings_api(fn: Callable) -> Callable:
    """`fn(*matrices, settings)` published as `fn(*matrices, heads=1, ..., seed=0)` (API_SETTINGS): the
    signature Gradio reads for the endpoint's parameters; the settings reach `fn` as one `Settings`."""
    own = list(inspect.signature(fn).parameters.values())[:-1]
    extra = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d, annotation=t.__name__)
        for n, t, d in API_SETTINGS
    ]
    sig = inspect.Signature(own + extra, return_annotation="dict")  # annotations as text, as the module's own

    @functools.wraps(fn)
    def endpoint(*args, **kwargs) -> dict:
        given = sig.bind(*args, **kwargs)
        given.apply_defaults()
        a = given.arguments
        return fn(*(a[p.name] for p in own), Settings(*(a[n] for n, _, _ in API_SETTINGS)))

    endpoint.__signature__ = sig
    endpoint.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()} | {"return": "dict"}
    return user_errors(endpoint)


@_settings_api
def qkv_calculate(Q: str, K: str, V: str, settings: Settings) -> dict:
    """Scaled dot-product attention step by step from text matrices (rows by newline or ';',
    numbers by spaces or commas, or [[1, 0], [0, 1]]). scale_mode: default (1/sqrt(d_head)),
    none or custom (uses `scale`); mask_mode: none, causal or custom (`mask`: n x m 0/1, 1 = may
    attend). Returns scores, scaled, masked, weights as [head][query][key] (null = masked),
    output (n x d_v), notes and the check against torch's scaled_dot_product_attention."""
    return _json({"Q": Q, "K": K, "V": V}, qkv.DIRECT, settings)


@_settings_api
def qkv_calculate_from_x(X: str, W_q: str, W_k: str, W_v: str, W_o: str = "", settings: Settings = None) -> dict:
    """Self-attention of X with Q = X W_q, K = X W_k, V = X W_v (W_o optional: blank = none); the
    other parameters as in /calculate. Also returns Q, K, V, the concatenated heads and the
    check against torch.nn.MultiheadAttention with the same weights."""
    return _json({"X": X, "W_q": W_q, "W_k": W_k, "W_v": W_v, "W_o": W_o}, qkv.FROM_X, settings)


def build_matrices() -> None:
    """Register /calculate and /calculate_from_x (their parameters: `qkv_calculate`'s and
    `qkv_calculate_from_x`'s signatures)."""
    gr.api(qkv_calculate, api_name="calculate")
    gr.api(qkv_calculate_from_x, api_name="calculate_from_x")


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
