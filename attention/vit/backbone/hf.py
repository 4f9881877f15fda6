"""Hugging Face transformers vision encoders described (`Backbone`): Dinov2Model,
Dinov2WithRegistersModel, DINOv3ViTModel, ViTModel, DeiTModel, CLIPVisionModel, SiglipVisionModel
(and their *ForImageClassification wrappers: the classifier reads the class token), under any
`attn_implementation`: "sdpa" is read at its `F.scaled_dot_product_attention` call, "eager" at its
explicit softmax (`backbone.kernel`), SigLIP's pooling head at its `nn.MultiheadAttention`.

Tokens: [CLS, (distillation), registers..., patches] as each embeddings module concatenates them
(SigLIP: patches only). The last layer's tokens are the model's `last_hidden_state` (after its final
norm; CLIP's post_layernorm applies to the pooled token only, so for CLIP they are the last layer's
output, as `last_hidden_state`). Position embeddings are resampled by the library's own code
(`interpolate_pos_encoding=True` where the class takes it; DINOv2/DINOv3 always do).
Normalisation: each class's image processor's default (ImageNet's for DINOv2/DINOv3/DeiT, 0.5 for
ViT and SigLIP, OpenAI's for CLIP) unless the loader set `model.image_mean`/`image_std` from the
repo's preprocessor_config.json.
"""

from __future__ import annotations

import torch

from attention.errors import UnsupportedModelError
from attention.vit.backbone.spec import (
    CLIP_MEAN,
    CLIP_STD,
    HALF,
    IMAGENET_MEAN,
    IMAGENET_STD,
    Backbone,
    check_square,
    numbered,
    served_rules,
)

# class name -> (mean, std, takes interpolate_pos_encoding, final norm over all tokens)
CLASSES = {
    "Dinov2Model": (IMAGENET_MEAN, IMAGENET_STD, False, "layernorm"),
    "Dinov2WithRegistersModel": (IMAGENET_MEAN, IMAGENET_STD, False, "layernorm"),
    "DINOv3ViTModel": (IMAGENET_MEAN, IMAGENET_STD, False, "norm"),
    "ViTModel": (HALF, HALF, True, "layernorm"),
    "DeiTModel": (IMAGENET_MEAN, IMAGENET_STD, True, "layernorm"),
    "CLIPVisionModel": (CLIP_MEAN, CLIP_STD, True, None),
    "SiglipVisionModel": (HALF, HALF, True, "post_layernorm"),
}
CLASSIFIERS = {  # wrapper -> the attribute holding the encoder
    "ViTForImageClassification": "vit",
    "DeiTForImageClassification": "deit",
    "Dinov2ForImageClassification": "dinov2",
}


def _inner(model: torch.nn.Module) -> torch.nn.Module:
    """The module holding embeddings/encoder: the model itself, or its `vision_model` (older layouts)."""
    vm = getattr(model, "vision_model", None)
    return vm if isinstance(vm, torch.nn.Module) and hasattr(vm, "embeddings") else model


def _layers(base: torch.nn.Module) -> torch.nn.ModuleList:
    for path in ("encoder.layer", "encoder.layers", "layers", "model.layer", "layer"):
        m = base
        for part in path.split("."):
            m = getattr(m, part, None)
        if isinstance(m, torch.nn.ModuleList) and len(m):
            return m
    raise UnsupportedModelError(f"{type(base).__name__}: no list of encoder layers found.")


def _attention(layer: torch.nn.Module) -> torch.nn.Module:
    a = getattr(layer, "attention", None) or getattr(layer, "self_attn", None)
    inner = getattr(a, "attention", None)
    if isinstance(inner, torch.nn.Module):  # older layouts: Attention(SelfAttention, SelfOutput)
        a = inner
    if a is None:
        raise UnsupportedModelError(f"{type(layer).__name__} has no attention module (`attention`/`self_attn`).")
    return a


def _prefix(emb: torch.nn.Module) -> tuple[str, ...]:
    names = []
    if getattr(emb, "cls_token", None) is not None or getattr(emb, "class_embedding", None) is not None:
        names.append("cls")
    if getattr(emb, "distillation_token", None) is not None:
        names.append("dist")
    reg = getattr(emb, "register_tokens", None)
    names += [f"reg{i}" for i in range(reg.shape[1] if reg is not None else 0)]
    return tuple(names)


def describe(model: torch.nn.Module) -> Backbone:
    """The Backbone of a transformers vision encoder; UnsupportedModelError for a class not described."""
    name = type(model).__name__
    outer, head_of = model, CLASSIFIERS.get(name)
    enc = getattr(model, head_of) if head_of else model
    ename = type(enc).__name__
    if ename not in CLASSES:
        raise UnsupportedModelError(
            f"{name} (transformers) is not described; described: {', '.join(CLASSES)} and {', '.join(CLASSIFIERS)}."
        )
    mean, std, interp, final_name = CLASSES[ename]
    base = _inner(enc)
    cfg = enc.config
    layers = _layers(base)
    attn = [_attention(layer) for layer in layers]
    emb = base.embeddings
    final = getattr(base, final_name) if final_name else layers[-1]
    head = getattr(base, "head", None) if ename == "SiglipVisionModel" else None
    pool = head is not None and isinstance(getattr(head, "attention", None), torch.nn.MultiheadAttention)
    if pool:
        attn.append(head.attention)
    kw = {"interpolate_pos_encoding": True} if interp else {}

    def run(x: torch.Tensor, head: bool = False):
        out = outer(pixel_values=x, **kw)
        return out.logits if head_of and head else out

    size = int(cfg.image_size) if isinstance(cfg.image_size, int) else int(cfg.image_size[0])
    width = int(cfg.hidden_size)
    return Backbone(
        library="transformers",
        model=outer,
        blocks=tuple(layers),
        attention=tuple(attn),
        final=final,
        prefix=_prefix(emb),
        patch=check_square(name, cfg.patch_size),
        heads=int(cfg.num_attention_heads),
        width=width,
        run=run,
        mean=tuple(getattr(outer, "image_mean", None) or mean),
        std=tuple(getattr(outer, "image_std", None) or std),
        input_size=(size, size),
        **served_rules(outer),
        pool=pool,
        classifier=bool(head_of),
        extra={"readout": "token"},
        labels=(lambda: labels(outer.config)) if head_of else (lambda: ()),
    )


def labels(config) -> tuple[str, ...]:
    """A transformers classifier's class names: `config.id2label` for each of its `num_labels` outputs
    (keys as ints or, from a hand-written config.json, strings; a missing one "class i")."""
    n = int(getattr(config, "num_labels", 0) or 0)
    given = {str(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    return tuple(given.get(str(i), name) for i, name in enumerate(numbered(n)))
