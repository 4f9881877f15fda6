"""Attention Explorer's engine: load vision transformers, extract and render attention,
retrieve MNIST digits by attention, and compute attention step by step.

Knows nothing of Gradio: `app.py` is one user of it, the command line
(`python -m attention`) and notebooks are others.

    import attention
    model = attention.load_vit("dino_vits16")         # or "mnist_vit" offline
    res = attention.attention_maps(model, "examples/photos/chelsea.jpg")  # res.maps: (heads, gh, gw)
    rel = attention.relevance(model, image, target=None)  # classifiers: why this class? (Chefer et al.)
    steps = attention.explain_row(res, query=(3, 4), head=0)  # res with keep_qk=True: q, k, v step by step
    tr = attention.text_relevance(model, image, "a cat, a dog")  # CLIP/SigLIP: where is "a cat"?
    res                        # in a notebook every result shows itself; res.show(view="masks") another view
    attention.explore(res)     # res with keep_qk=True: click a patch to make it the query (a widget)
    attention.register_backbone(MyViT, attention.Layout(blocks="layers", attention="mixer", ...))  # your own class
    for f in attention.attention_video(model, "examples/videos/digits.mp4"):   # f.maps, f.mean, f.masks per frame
        ...
    s = attention.calculator.Settings(heads=2, mask_mode="causal")
    steps = attention.attend(Q, K, V, s)  # steps.weights: (heads, n, m)

One subpackage per feature over a small shared core:

    vit/          ViT attention maps (models, extract, passes, views, frames, outputs)
    retrieval/    MNIST retrieval by attention (lookup, models, train, panels, plots)
    calculator/   the Q/K/V calculator (steps, reference, matrices, form, presets, report, plots, patches)
    config        every setting, read once from the environment
    errors        the typed errors and the checks every feature shares
    images        decoding, size guards, resizing and cropping to patches
    videos        video decoding at a constant rate and H.264 encoding (PyAV)
    render        colour maps, overlays, grids, PNG encoding
    cache         the bounded, thread-safe store shared between requests (a share per visitor)
    turns         how many forward passes one visitor may run at once
    mnist, net    the shipped digits; is the network there
    ui/           the Gradio tabs (the only code that imports gradio)
"""

from attention.calculator import attend, attend_from_x
from attention.errors import (
    AttentionError,
    BudgetError,
    CheckpointError,
    ImageError,
    InputError,
    ModelLoadError,
    UnsupportedModelError,
    VideoError,
)
from attention.images import load_image
from attention.notebook import explore  # (registers every result's rich display)
from attention.render import colorize, grid, mark_patch, mask_overlay, overlay, upsample
from attention.vit import (
    OFFLINE_MODEL,
    REGISTRY,
    AttentionMaps,
    attention_maps,
    attention_video,
    available,
    default_device,
    default_model,
    explain_row,
    load_vit,
    rollout,
    rollout_map,
    threshold_masks,
)
from attention.vit.backbone import Layout, register_backbone, unregister_backbone, unwrap
from attention.vit.models.registry import default_model_attribute
from attention.vit.relevance import Relevance, relevance
from attention.vit.text import RuleOptions, TextRelevance, text_relevance

__all__ = [
    "attend",
    "attend_from_x",
    "AttentionError",
    "BudgetError",
    "ImageError",
    "InputError",
    "ModelLoadError",
    "UnsupportedModelError",
    "CheckpointError",
    "VideoError",
    "AttentionMaps",
    "attention_maps",
    "attention_video",
    "explain_row",
    "rollout",
    "rollout_map",
    "threshold_masks",
    "relevance",
    "Relevance",
    "text_relevance",
    "TextRelevance",
    "RuleOptions",
    "load_image",
    "DEFAULT_MODEL",
    "OFFLINE_MODEL",
    "REGISTRY",
    "available",
    "default_device",
    "load_vit",
    "register_backbone",
    "unregister_backbone",
    "Layout",
    "unwrap",
    "default_model",
    "colorize",
    "grid",
    "mark_patch",
    "mask_overlay",
    "overlay",
    "upsample",
    "explore",
]


__getattr__ = default_model_attribute(__name__)  # `DEFAULT_MODEL`: the default model now, at each read
