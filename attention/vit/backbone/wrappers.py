"""Where people keep their models: the holders the engine looks through to the model they hold.

    describe(nn.DataParallel(model))      # the held model's description, run on the held model (`module.`)
    describe(DistributedDataParallel(m))  # likewise
    describe(torch.compile(model))        # its `_orig_mod` (run uncompiled: its attention read exactly)
    describe(timm.create_model(..., features_only=True))   # timm's FeatureGetterNet: its (pruned) ViT
    unwrap(pipeline("image-classification", model=...))   # a transformers pipeline: its model

A pipeline is not a torch module (the engine runs and hooks modules), so the engine refuses it by name and
says to pass `pipe.model` or `unwrap(pipe)`, which also carries the pipeline's normalisation.
"""

from __future__ import annotations

import torch

from attention.errors import UnsupportedModelError

# holder class name -> the attribute holding the model (a torch.nn.Module)
HOLDERS = {
    "DataParallel": "module",
    "DistributedDataParallel": "module",
    "OptimizedModule": "_orig_mod",  # torch.compile
    "FeatureGetterNet": "model",  # timm's features_only ViTs (prune_intermediate_layers: blocks cut, norm Identity)
}


def is_pipeline(obj) -> bool:
    """Whether `obj` is a transformers pipeline (a `Pipeline` holding a `model`)."""
    return any(c.__name__ == "Pipeline" and c.__module__.startswith("transformers") for c in type(obj).__mro__)


def held(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside `model`'s holders (`HOLDERS`, nested ones too), or `model` itself. A transformers
    pipeline is refused by name (UnsupportedModelError saying what to pass); so is any other non-module."""
    if is_pipeline(model):
        raise UnsupportedModelError(
            f"{type(model).__name__} is a transformers pipeline, not a model; accepted: its model, "
            "`pipe.model`, or `attention.unwrap(pipe)` (its model with the pipeline's normalisation)."
        )
    if not isinstance(model, torch.nn.Module):
        raise UnsupportedModelError(f"{type(model).__name__} is not a torch.nn.Module; accepted: a model object.")
    for _ in range(8):
        attr = HOLDERS.get(type(model).__name__)
        inner = getattr(model, attr, None) if attr else None
        if not isinstance(inner, torch.nn.Module):
            return model
        model = inner
    return model


def unwrap(obj) -> torch.nn.Module:
    """The model a holder holds (`HOLDERS`, a transformers pipeline), ready for the engine. A pipeline's
    image processor's `image_mean`/`image_std` are set on its model (as `load_vit` does from a repo's
    preprocessor_config.json), so it is fed as the pipeline feeds it. A plain model is returned as is."""
    if is_pipeline(obj):
        model = obj.model
        proc = getattr(obj, "image_processor", None)
        mean, std = getattr(proc, "image_mean", None), getattr(proc, "image_std", None)
        if mean is not None and std is not None:
            model.image_mean, model.image_std = tuple(mean), tuple(std)
        return held(model)
    return held(obj)
