"""The description of a backbone (`Backbone`) and `describe(model)`, which picks the library's.

    from attention.vit.backbone import describe
    bb = describe(model)     # timm, transformers, Meta's dino/dinov2/dinov3 classes, open_clip, torchvision

A model nobody describes is refused with UnsupportedModelError naming its class and the families
that are described (`FAMILIES`).
"""

from __future__ import annotations

import torch

from attention.errors import UnsupportedModelError
from attention.vit.backbone.spec import Backbone

FAMILIES = (
    "timm ViTs (VisionTransformer, DeiT, Eva: EVA-02/DINOv3/RoPE ViTs, BEiT, relpos ViTs)",
    "transformers Dinov2Model, Dinov2WithRegistersModel, DINOv3ViTModel, ViTModel, DeiTModel, CLIPVisionModel, "
    "SiglipVisionModel",
    "Meta's DINO, DINOv2 (with and without registers) and DINOv3 ViTs as torch.hub returns them",
    "open_clip visual towers (VisionTransformer, TimmModel)",
    "torchvision VisionTransformer (vit_b_16 ...)",
)


def library_of(model: torch.nn.Module) -> str | None:
    """Which library's description applies to `model`: by the module its class comes from, else by
    its layout (Meta's classes copied into a project); None when none does."""
    mod = type(model).__module__ or ""
    root = mod.split(".", 1)[0]
    if root in ("timm", "transformers", "open_clip", "torchvision"):
        return root
    if root in ("dinov2", "dinov3", "dino"):
        return "meta"
    if hasattr(model, "blocks") and (hasattr(model, "prepare_tokens") or hasattr(model, "prepare_tokens_with_masks")):
        return "meta"
    if hasattr(model, "blocks") and hasattr(model, "patch_embed") and hasattr(model, "forward_features"):
        return "timm"  # a subclass of a timm ViT defined elsewhere
    return None


def describe(model: torch.nn.Module) -> Backbone:
    """The Backbone of `model` (timm, transformers, Meta's DINO classes, open_clip, torchvision).
    UnsupportedModelError naming its class and why, or the described families when no library's
    description applies."""
    lib = library_of(model)
    if lib == "timm":
        from attention.vit.backbone import timm

        return timm.describe(model)
    if lib == "transformers":
        from attention.vit.backbone import hf

        return hf.describe(model)
    if lib == "meta":
        from attention.vit.backbone import meta

        return meta.describe(model)
    if lib == "open_clip":
        from attention.vit.backbone import openclip

        return openclip.describe(model)
    if lib == "torchvision":
        from attention.vit.backbone import tv

        return tv.describe(model)
    raise UnsupportedModelError(
        f"{type(model).__name__} (from {type(model).__module__}) is not a model the engine describes; "
        f"described: {'; '.join(FAMILIES)}."
    )


__all__ = ["Backbone", "FAMILIES", "describe", "library_of"]
