"""open_clip's own image tower (`open_clip.transformer.VisionTransformer`, OpenAI and LAION CLIP) rebuilt as
the timm ViT it is, weights and all, so the engine's kernel hook reads it: timm's `vit_*_clip_*` models are
this architecture (pre-norm, class token, QuickGELU for OpenAI's), and timm's own converter
(`_convert_openai_clip`, what timm loads OpenAI's CLIP weights with) maps the weights.

    visual = timm_visual(clip.visual)    # .trunk: a timm VisionTransformer, .head: Identity (proj is trunk.head)

Exact: the same operations in the same order (nn.MultiheadAttention's in_proj is timm's qkv, its out_proj
timm's proj; ln_post then the class token then proj is timm's norm, token pool, head with zero bias);
tests/vit/test_text_models.py checks encode_image before and after.
"""

from __future__ import annotations

from functools import partial

import torch

from attention.errors import UnsupportedModelError


class TimmVisual(torch.nn.Module):
    """An image tower as open_clip's `TimmModel` is: `trunk` (timm) then `head`."""

    def __init__(self, trunk: torch.nn.Module, image_size, preprocess_cfg: dict | None):
        super().__init__()
        self.trunk, self.head = trunk, torch.nn.Identity()
        self.image_size = image_size
        if preprocess_cfg is not None:
            self.preprocess_cfg = preprocess_cfg

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))


def _refuse(visual, why: str) -> UnsupportedModelError:
    return UnsupportedModelError(
        f"This open_clip {type(visual).__name__} image tower is not read: {why}; text relevance reads CLIP towers "
        "pooled by their class token (OpenAI and LAION CLIP) and timm towers (SigLIP, SigLIP 2)."
    )


def timm_visual(visual: torch.nn.Module) -> TimmVisual:
    """The timm equivalent of a native open_clip VisionTransformer, its weights converted.
    UnsupportedModelError for what has no exact timm equivalent here (attention pooling, mean pool, layer scale)."""
    import timm.layers
    from timm.models.vision_transformer import VisionTransformer, _convert_openai_clip

    if getattr(visual, "attn_pool", None) is not None:
        raise _refuse(visual, "it pools by an attentional pooler (CoCa)")
    if getattr(visual, "pool_type", "tok") != "tok" or getattr(visual, "final_ln_after_pool", False):
        raise _refuse(visual, f"it pools by {getattr(visual, 'pool_type', '?')!r} (the class token is read)")
    blk = visual.transformer.resblocks[0]
    if not isinstance(blk.attn, torch.nn.MultiheadAttention) or not isinstance(blk.ls_1, torch.nn.Identity):
        raise _refuse(visual, "its blocks use layer scale or a custom attention")
    width, patch = visual.conv1.out_channels, visual.conv1.kernel_size[0]
    quick = type(blk.mlp.gelu).__name__ == "QuickGELU"
    trunk = VisionTransformer(
        img_size=tuple(visual.image_size),
        patch_size=patch,
        embed_dim=width,
        depth=len(visual.transformer.resblocks),
        num_heads=blk.attn.num_heads,
        mlp_ratio=blk.mlp.c_fc.out_features / width,
        pre_norm=not isinstance(visual.ln_pre, torch.nn.Identity),
        num_classes=visual.proj.shape[1],
        global_pool="token",
        act_layer=timm.layers.QuickGELU if quick else torch.nn.GELU,
        norm_layer=partial(torch.nn.LayerNorm, eps=blk.ln_1.eps),
        dynamic_img_size=True,
    )
    state = _convert_openai_clip({f"visual.{k}": v for k, v in visual.state_dict().items()}, trunk)
    trunk.load_state_dict(state)
    p = next(visual.parameters())
    trunk = trunk.to(p.device, p.dtype).eval()
    return TimmVisual(trunk, tuple(visual.image_size), getattr(visual, "preprocess_cfg", None))
