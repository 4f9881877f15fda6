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


def with_models(fn: Callable) -> Callable:
    """`fn` with "{models}" and "{classifiers}" in its docstring replaced by the registry's lists now."""
    doc = fn.__doc__ or ""
    fn.__doc__ = doc.replace("{models}", models_text()).replace("{classifiers}", classifiers_text())
    return fn
