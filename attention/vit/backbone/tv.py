"""torchvision `VisionTransformer` (vit_b_16, vit_b_32, vit_l_16, vit_h_14) described (`Backbone`): its
`EncoderBlock`s' `nn.MultiheadAttention` read with q and k recomputed from its input and `in_proj`
weights (`backbone.kernel`); tokens [CLS, patches]; the last layer's tokens are `encoder.ln`'s output;
its position embeddings are for one grid, so it takes its trained size only; ImageNet normalisation
(its weights' transforms). A classifier: `heads` reads the class token, so `relevance` explains it.
"""

from __future__ import annotations

import torch

from attention.errors import UnsupportedModelError
from attention.vit.backbone.spec import IMAGENET_MEAN, IMAGENET_STD, Backbone, check_square, numbered, served_rules


def describe(model: torch.nn.Module) -> Backbone:
    """The Backbone of a torchvision VisionTransformer."""
    name = type(model).__name__
    if name != "VisionTransformer" or not hasattr(model, "encoder"):
        raise UnsupportedModelError(f"{name} (torchvision) is not described; described: VisionTransformer (vit_*).")
    blocks = list(model.encoder.layers)
    attn = [b.self_attention for b in blocks]
    width = int(model.hidden_dim)
    size = (int(model.image_size), int(model.image_size))

    def run(x: torch.Tensor, head: bool = False):
        return model(x)

    return Backbone(
        library="torchvision",
        model=model,
        blocks=tuple(blocks),
        attention=tuple(attn),
        final=model.encoder.ln,
        prefix=("cls",),
        patch=check_square(name, model.patch_size),
        heads=int(attn[0].num_heads),
        width=width,
        run=run,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        input_size=size,
        fixed=size,
        **served_rules(model, resize="bilinear"),
        classifier=True,
        extra={"readout": "token"},
        labels=lambda: labels(model),
    )


def labels(model: torch.nn.Module) -> tuple[str, ...]:
    """The names of its head's outputs: torchvision's weights meta `categories` (ImageNet-1k's, which
    every ViT weights enum carries) for a 1000-way head, else "class 0", ..."""
    heads = [m for m in model.heads.modules() if isinstance(m, torch.nn.Linear)]
    n = int(heads[-1].out_features) if heads else 0
    from torchvision.models import ViT_B_16_Weights

    names = tuple(ViT_B_16_Weights.IMAGENET1K_V1.meta["categories"])
    return names if len(names) == n else numbered(n)
