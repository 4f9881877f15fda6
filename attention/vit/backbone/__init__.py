"""The description of a backbone (`Backbone`) and `describe(model)`, which asks the registry which library's.

    from attention.vit.backbone import describe
    bb = describe(model)     # timm, transformers, Meta's dino/dinov2/dinov3 classes, open_clip, torchvision,
                             # and any class registered with register_backbone (`registry`, `layout.Layout`)

Holders are looked through (`wrappers`: DataParallel/DDP's `module`, torch.compile, timm's features_only).
A model nobody describes is refused with UnsupportedModelError naming its class and the families that are
described (`families()`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace

import torch

from attention.errors import UnsupportedModelError
from attention.vit.backbone.layout import Layout
from attention.vit.backbone.registry import (
    Library,
    add_builtin,
    entries,
    entry_of,
    families,
    register_backbone,
    unregister_backbone,
)
from attention.vit.backbone.spec import Backbone
from attention.vit.backbone.wrappers import held, unwrap

FAMILIES = (
    "timm ViTs (VisionTransformer, DeiT, Eva: EVA-02/DINOv3/RoPE ViTs, BEiT, relpos ViTs)",
    "transformers Dinov2Model, Dinov2WithRegistersModel, DINOv3ViTModel, ViTModel, DeiTModel, CLIPVisionModel, "
    "SiglipVisionModel",
    "Meta's DINO, DINOv2 (with and without registers) and DINOv3 ViTs as torch.hub returns them",
    "open_clip visual towers (VisionTransformer, TimmModel)",
    "torchvision VisionTransformer (vit_b_16 ...)",
)


def _root(model: torch.nn.Module) -> str:
    return (type(model).__module__ or "").split(".", 1)[0]


def _meta(model: torch.nn.Module) -> bool:
    """Meta's classes: by their package, or by their layout (a copy of the classes in one's own project)."""
    if _root(model) in ("dinov2", "dinov3", "dino"):
        return True
    prepares = hasattr(model, "prepare_tokens") or hasattr(model, "prepare_tokens_with_masks")
    return hasattr(model, "blocks") and prepares


def _timm(model: torch.nn.Module) -> bool:
    """timm's classes, or a subclass of a timm ViT defined elsewhere (by layout, when not Meta's)."""
    if _root(model) == "timm":
        return True
    layout = hasattr(model, "blocks") and hasattr(model, "patch_embed") and hasattr(model, "forward_features")
    return layout and not _meta(model)


def _lazy(module: str) -> Callable[[torch.nn.Module], Backbone]:
    """A library module's `describe`, imported at its first use (the libraries are optional imports)."""

    def describe(model: torch.nn.Module) -> Backbone:
        return importlib.import_module(f"attention.vit.backbone.{module}").describe(model)

    return describe


for _name, _family, _matches, _module in (
    ("timm", FAMILIES[0], lambda m: _root(m) == "timm", "timm"),
    ("transformers", FAMILIES[1], lambda m: _root(m) == "transformers", "hf"),
    ("open_clip", FAMILIES[3], lambda m: _root(m) == "open_clip", "openclip"),
    ("torchvision", FAMILIES[4], lambda m: _root(m) == "torchvision", "tv"),
    ("meta", FAMILIES[2], _meta, "meta"),
    ("timm", FAMILIES[0], _timm, "timm"),  # by layout, after Meta's (their classes have the same attributes)
):
    add_builtin(Library(_name, _family, _matches, _lazy(_module)))


def library_of(model: torch.nn.Module) -> str | None:
    """The name of the registry entry that describes `model` (held models looked through): "timm",
    "transformers", "meta", "open_clip", "torchvision" or a registered one's; None when none does."""
    entry = entry_of(held(model))
    return entry.name if entry else None


def describe(model: torch.nn.Module) -> Backbone:
    """The Backbone of `model`, by the first registry entry that matches it (users' first, then timm,
    transformers, open_clip, torchvision, Meta's DINO classes); a holder (`wrappers.HOLDERS`) is described as
    the model it holds, run on that model, with `Backbone.model` the holder. UnsupportedModelError naming its
    class and why, or the described families when no entry matches."""
    inner = held(model)
    entry = entry_of(inner)
    if entry is None:
        raise UnsupportedModelError(
            f"{type(inner).__name__} (from {type(inner).__module__}) is not a model the engine describes; "
            f"described: {'; '.join(families())}. Describe your own class with attention.register_backbone."
        )
    bb = entry.describe(inner)
    return bb if inner is model else replace(bb, model=model)


__all__ = [
    "Backbone",
    "FAMILIES",
    "Layout",
    "Library",
    "describe",
    "entries",
    "families",
    "library_of",
    "register_backbone",
    "unregister_backbone",
    "unwrap",
]
