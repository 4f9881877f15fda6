"""Attention Explorer's engine: load vision transformers, extract and render attention,
retrieve MNIST digits by attention, and compute attention step by step.

Knows nothing of Gradio: `app.py` is one user of it, the command line
(`python -m attention`) and notebooks are others.

    import attention
    model = attention.load_vit("dino_vits16")         # or "mnist_vit" offline
    res = attention.attention_maps(model, "cat.jpg")  # res.maps: (heads, gh, gw)
    steps = attention.attend(Q, K, V, heads=2, mask="causal")  # steps.weights: (heads, n, m)
"""

from attention.calculator import attend, attend_from_x
from attention.errors import AttentionError, ImageError, InputError, ModelLoadError
from attention.extract import AttentionMaps, attention_maps, rollout, rollout_map, threshold_masks
from attention.images import load_image
from attention.models import DEFAULT_MODEL, OFFLINE_MODEL, REGISTRY, available, default_device, load_vit
from attention.render import colorize, grid, mark_patch, mask_overlay, overlay, upsample

__all__ = [
    "attend", "attend_from_x",
    "AttentionError", "ImageError", "InputError", "ModelLoadError",
    "AttentionMaps", "attention_maps", "rollout", "rollout_map", "threshold_masks",
    "load_image",
    "DEFAULT_MODEL", "OFFLINE_MODEL", "REGISTRY", "available", "default_device", "load_vit",
    "colorize", "grid", "mark_patch", "mask_overlay", "overlay", "upsample",
]
