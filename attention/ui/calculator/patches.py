"""The calculator tab's image part: an image cut into patches, + positions, random Q, K, V, attention.

`build` lays it out under the Q/K/V calculator and registers /patch_attention (calculator.api)."""

from __future__ import annotations

import os

import gradio as gr

from attention.calculator import patches as qkv_patches
from attention.config import EXAMPLES_DIR
from attention.ui.calculator import api as calculator_api
from attention.ui.common.components import QUIET, image_path, number, picture, slider, user_errors

QKV_PHOTOS_DIR = os.path.join(EXAMPLES_DIR, "photos")
QKV_PHOTOS = sorted(
    os.path.join(QKV_PHOTOS_DIR, f)
    for f in (os.listdir(QKV_PHOTOS_DIR) if os.path.isdir(QKV_PHOTOS_DIR) else [])
    if f.lower().endswith((".jpg", ".png"))
)
QKV_IMAGE = next(
    (p for p in QKV_PHOTOS if p.endswith("chelsea.jpg")),
    QKV_PHOTOS[0] if QKV_PHOTOS else os.path.join(EXAMPLES_DIR, "digits", "digit_3.png"),
)


def _qkv_patches(image, patch, heads, seed, index=None, click=None):
    v = qkv_patches.patch_view(image, patch, heads, seed, index, click)
    return v.grid, v.maps, v.matrices, v.info, gr.update(maximum=v.count - 1, value=v.index)


@user_errors
def qkv_patch_attention(image, patch=16, heads=4, seed=0, index=None):
    """Image -> patches -> + sinusoidal positions -> random Q, K, V -> attention. Returns the patch grid
    with the chosen patch (raster index; empty or out of range = the centre) outlined, its attention on
    the image per head, the N x N attention matrices per head, a description of the shapes, and the index."""
    return _qkv_patches(image, patch, heads, seed, index)


def build() -> None:
    """The image -> patches -> Q, K, V part of the calculator tab; registers /patch_attention."""
    p_start = qkv_patches.patch_view(QKV_IMAGE, 16, 4, 0)
    gr.Markdown(
        "### From an image to Q, K and V\nThe image is cut into patches, each flattened to a vector, a "
        "sinusoidal position added, then multiplied by random (seeded) W_q, W_k, W_v: untrained, so the "
        "maps show the mechanism, not learned meaning: nearby positions and similar colours attend to each other."
    )
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=320):
            p_img = image_path(
                QKV_IMAGE,
                type="filepath",
                image_mode=None,
                label="Image",
                sources=["upload", "clipboard"],
                height=260,
                elem_id="qkv-image",
            )
            if QKV_PHOTOS:
                gr.Examples(QKV_PHOTOS, [p_img], label="Example photos", examples_per_page=12)
            with gr.Row():
                p_size = gr.Dropdown(
                    list(qkv_patches.PATCH_SIZES),
                    value=16,
                    label="Patch size (px)",
                    min_width=90,
                    elem_id="qkv-patch-size",
                )
                p_heads = slider(1, qkv_patches.MAX_HEADS, value=4, step=1, label="Heads", elem_id="qkv-patch-heads")
                p_seed = number(0, label="Weights seed", precision=0, min_width=90, elem_id="qkv-patch-seed")
            p_index = slider(
                0,
                p_start.count - 1,
                value=p_start.index,
                step=1,
                label="Chosen patch (raster index)",
                elem_id="qkv-patch-index",
            )
            p_go = gr.Button("Cut into patches and attend", variant="primary", elem_id="qkv-patch-go")
        with gr.Column(scale=3, min_width=480):
            p_info = gr.Markdown(p_start.info, elem_id="qkv-patch-info")
            with gr.Row():
                p_grid = picture(p_start.grid, label="Patch grid (click a patch)", height=300, elem_id="qkv-patch-grid")
                p_maps = picture(
                    p_start.maps, label="Attention of the chosen patch, per head", height=300, elem_id="qkv-patch-maps"
                )
            p_mats = picture(
                p_start.matrices,
                label="N x N attention weights per head (row = query patch, column = key patch)",
                elem_id="qkv-patch-matrices",
            )
    p_in = [p_img, p_size, p_heads, p_seed, p_index]
    p_out = [p_grid, p_maps, p_mats, p_info, p_index]
    p_go.click(qkv_patch_attention, p_in, p_out, **QUIET)
    calculator_api.build(qkv_patch_attention)  # /patch_attention, on inputs without a server path

    @user_errors
    def regrid(image, patch, h, s):  # a new image or patch size: a new grid, so the centre patch
        if image is None:  # the image cleared (before an upload): the last grid stays, no toast of its own
            return [gr.skip()] * 5  # (p_out)
        return _qkv_patches(image, patch, h, s)

    for c in (p_img, p_size):
        c.change(regrid, p_in[:4], p_out, **QUIET)
    p_heads.change(qkv_patch_attention, p_in, p_out, **QUIET)
    p_seed.submit(qkv_patch_attention, p_in, p_out, **QUIET)
    p_index.release(qkv_patch_attention, p_in, p_out, **QUIET)

    @user_errors
    def pick(image, patch, h, s, evt: gr.SelectData):
        return _qkv_patches(image, patch, h, s, click=evt.index)

    p_grid.select(pick, p_in[:4], p_out, **QUIET)
