"""The image tower of a CLIP-like model as the engine reads it: one small adapter, the only place that
knows how an open_clip model's image side is built.

    tower = vision_tower(clip)              # Tower(trunk, pool, ...): trunk is a timm ViT (capture reads it)
    emb = tower.embed(tokens)                # (B, N, D) final tokens -> (B, E) the model's own image embedding
    each = tower.embed_each(tokens[0])       # (N, D) -> (N, E): every token as if it were the pooled one

Supported today: open_clip's `TimmModel` towers (SigLIP, SigLIP 2 and any `timm_model_name` config;
the shipped digit_clip), pooled by the class token ("token"), the mean of patch tokens ("avg") or an
attention-pooling head ("map"); open_clip's own `VisionTransformer` (OpenAI and LAION CLIP, nn.MultiheadAttention)
is rebuilt once as the timm ViT it is (`native.timm_visual`, timm's own weight converter), in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attention.errors import UnsupportedModelError

POOLS = ("token", "avg", "map")


@dataclass(frozen=True)
class Tower:
    """An image tower: `trunk` a timm ViT whose attention `attention.vit.engine.capture` reads (blocks, final
    norm, attention kernel per layer; the pooling head's kernel as layer L for "map"), and the head after it."""

    trunk: torch.nn.Module
    head: torch.nn.Module  # after the trunk's own head: open_clip's projection (Identity when none)
    pool: str  # one of POOLS

    @property
    def num_prefix_tokens(self) -> int:
        return int(self.trunk.num_prefix_tokens)

    @property
    def pool_offset(self) -> int:
        """The first token the attention-pooling head reads (it skips prefix tokens unless told otherwise)."""
        return 0 if getattr(self.trunk, "pool_include_prefix", False) else self.num_prefix_tokens

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N, D) tokens after the trunk's final norm -> (B, E) image embedding, as `encode_image` makes it."""
        return self.head(self.trunk.forward_head(tokens))

    def embed_pooled(self, v: torch.Tensor) -> torch.Tensor:
        """(B, D) a pooled vector -> (B, E): what follows the pool (fc_norm, the trunk's head, the projection)."""
        t = self.trunk
        return self.head(t.head(t.head_drop(t.fc_norm(v))))

    def pool_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, D): the trunk's own pool (the attention-pooling head for "map")."""
        return self.trunk.pool(tokens)

    def embed_each(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N, D) final tokens -> (N, E): each token alone through the pool and head (for "map", the pool
        over a one-token sequence, whose attention is that token), the raw patch-text similarity's embedding."""
        if self.pool == "map":
            return self.embed_pooled(self.trunk.attn_pool(tokens[:, None]))
        return self.embed_pooled(tokens)

    def start_row(self, n: int, device) -> torch.Tensor | None:
        """The pool's weights over the n tokens, float32 (n,), for a pool without attention: the class
        token for "token", the patch tokens' mean for "avg"; None for "map" (its own attention row)."""
        if self.pool == "map":
            return None
        r = torch.zeros(n, device=device)
        if self.pool == "token":
            r[0] = 1.0
        else:
            p = 0 if getattr(self.trunk, "pool_include_prefix", False) else self.num_prefix_tokens
            r[p:] = 1.0 / (n - p)
        return r


def vision_tower(clip: torch.nn.Module) -> Tower:
    """The Tower of an open_clip model (`clip.visual`). UnsupportedModelError, naming the tower class, when
    its image side is not a timm ViT pooled by its class token, its patch mean or an attention-pooling head."""
    visual = getattr(clip, "visual", None)
    if type(visual).__name__ == "VisionTransformer" and hasattr(visual, "transformer"):  # open_clip's own tower
        from attention.vit.text.native import timm_visual

        visual = clip.visual = timm_visual(visual)  # the same model as a timm ViT, once
    trunk = getattr(visual, "trunk", None)
    if trunk is None or not hasattr(trunk, "blocks") or not hasattr(trunk, "forward_head"):
        raise UnsupportedModelError(
            f"The image tower {type(visual).__name__} is not read yet: text relevance reads open_clip towers built "
            "on a timm ViT (SigLIP, SigLIP 2, digit_clip, any `timm_model_name` config)."
        )
    pool = "map" if getattr(trunk, "attn_pool", None) is not None else str(trunk.global_pool)
    if pool not in POOLS:
        raise UnsupportedModelError(
            f"{type(trunk).__name__} pools its tokens by {pool!r}; text relevance follows the pool 'token' "
            "(class token), 'avg' (mean of patches) or 'map' (attention pooling)."
        )
    return Tower(trunk, visual.head, pool)


def ready(clip: torch.nn.Module) -> Tower:
    """`vision_tower(clip)` with its trunk set up once to serve any image size (timm's `dynamic_img_size`:
    position embeddings resampled per grid) and normalise as open_clip does (`visual.preprocess_cfg`'s
    mean and std, else OpenAI's). Marks the trunk `text_model` (not a submodule) so `load_vit` callers find the
    text tower. Idempotent; returns the Tower."""
    tower = vision_tower(clip)
    t = tower.trunk
    if t.__dict__.get("text_model") is not clip:
        from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

        pe = t.patch_embed
        from timm.layers import Format

        pe.strict_img_size, pe.flatten, pe.output_fmt = False, False, Format.NHWC
        pe.dynamic_img_size = True
        t.dynamic_img_size = True
        cfg = getattr(clip.visual, "preprocess_cfg", None) or {}
        size = getattr(clip.visual, "image_size", None) or pe.img_size
        t.pretrained_cfg = {
            **(getattr(t, "pretrained_cfg", None) or {}),
            "mean": tuple(cfg.get("mean", OPENAI_DATASET_MEAN)),
            "std": tuple(cfg.get("std", OPENAI_DATASET_STD)),
            "input_size": (pe.proj.in_channels, *tuple(size)),
        }
        t.__dict__["text_model"] = clip  # a plain attribute: no module cycle (state_dict, .to stay the trunk's)
    return tower


def has_text_tower(model: torch.nn.Module) -> bool:
    """Whether `model` (an open_clip model, or what `load_vit` returns) has a text tower."""
    return (hasattr(model, "encode_text") and hasattr(model, "visual")) or "text_model" in model.__dict__


def text_model_of(model: torch.nn.Module) -> torch.nn.Module:
    """The open_clip model of `model`: itself, or the one `load_vit` attached to its image tower.
    NoTextTowerError naming the registry's models that have a text tower otherwise."""
    from attention.errors import NoTextTowerError

    if hasattr(model, "encode_text") and hasattr(model, "visual"):
        return model
    clip = model.__dict__.get("text_model")
    if clip is not None:
        return clip
    from attention.vit.models.registry import REGISTRY

    names = [s.alias for s in REGISTRY.values() if getattr(s, "text", False)]
    name = getattr(model, "alias", type(model).__name__)
    raise NoTextTowerError(
        f"{name} has no text tower, so there is no prompt to match; pick a model that has one: {', '.join(names)}."
    )
