"""The model lists of the API's and MCP tools' descriptions, generated from the registry when the
endpoints are built (after the operator's checkpoint is registered), never written by hand.

    @user_errors
    def attention_maps(image, model=...):
        \"\"\"...  model: {models}.\"\"\"
    attention_maps = with_models(attention_maps)    # "{models}" -> "dino_vits16, ..., mnist_vit or deit_small"
"""

from __future__ import annotations

from collections.abc import Callable

from attention.vit.models.registry import REGISTRY


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def models_text() -> str:
    """Every registry alias, in the registry's order: "dino_vits16, ..., mnist_vit or deit_small"."""
    return _listed(list(REGISTRY))


def classifiers_text() -> str:
    """The registry's classifiers with what they are: "mnist_vit (ViT trained here ...) or deit_small (...)"."""
    return _listed([f"{s.alias} ({s.description})" for s in REGISTRY.values() if s.classifier])


ARGS = {  # the parameters several endpoints share, described once: "{image}" in a docstring's Args
    "image": "the image (PNG, JPEG, WebP, GIF, BMP or TIFF; EXIF orientation honoured)",
    "layer": "the layer whose attention is shown: 0 = first, -1 = last (negative counts from the end)",
    "head": "the head, from 0",
    "resolution": "'auto' (480 px for DINO, 768 px high for DINOv3), 'native', 'dino480' (480x480), or px",
    "query_row": "the query patch's row on the patch grid; both empty = the model's own token (CLS)",
    "query_col": "the query patch's column on the patch grid (give both, or neither for the model's own token)",
}


def text_models_text() -> str:
    """The registry's models with a text tower with what they are: "digit_clip (...) or siglip2_vitb16 (...)"."""
    return _listed([f"{s.alias} ({s.description})" for s in REGISTRY.values() if s.text])


def with_models(fn: Callable) -> Callable:
    """`fn` with "{models}", "{classifiers}" and "{text_models}" in its docstring replaced by the registry's
    lists now, and
    each "{name}" of ARGS by its shared description."""
    doc = (fn.__doc__ or "").replace("{models}", models_text()).replace("{classifiers}", classifiers_text())
    doc = doc.replace("{text_models}", text_models_text())
    for name, text in ARGS.items():
        doc = doc.replace("{" + name + "}", text)
    fn.__doc__ = doc
    return fn
