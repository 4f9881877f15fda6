"""Position embeddings resampled to any patch grid the way each model family's own code does it.

A ViT learns one position embedding per patch of its training grid (M x M: 14 x 14 for DINO's
224 px / 16, 37 x 37 for DINOv2's 518 px / 14). On another grid (gh, gw) the patch part is
resampled bicubically; the families differ in how, and the difference shows in the maps:

    rule         F.interpolate of the (1, D, M, M) patch embeddings    read in
    "dino"       scale_factor=((gh + 0.1) / M, (gw + 0.1) / M),        facebookresearch/dino
                 antialias off                                          vision_transformer.py
    "dinov2"     the same (interpolate_offset=0.1, antialias off)      facebookresearch/dinov2
    "dinov2_reg" size=(gh, gw), antialias on (= timm's)                dinov2/models/vision_transformer.py
    "timm"       size=(gh, gw), antialias on (timm's own code, left     + dinov2/hub/backbones.py
                 in place: `timm.layers.resample_abs_pos_embed`)
    "rope"       nothing to resample: rotary embeddings (DINOv3, timm   timm eva.py
                 `Eva`) are computed for each grid by the model itself   (RotaryEmbeddingDinoV3)

Given a scale factor s, PyTorch samples output pixel i at input (i + 0.5) / s - 0.5 with s itself,
not gh / M, so DINO's "+ 0.1" (added against a rounding error in the output size, dino#8) moves
every sample (by up to ~0.1 px of the M grid, e.g. row 4 of 23 from 2.239 to 2.227 for M = 14);
without antialias the bicubic kernel also differs from timm's (a = -0.75 vs the antialiased
filter's -0.5). Both are in the maps DINO's code draws, and both are reproduced here.
Prefix tokens keep their embeddings as in the family's code (CLS's is never resampled; DINOv2's
registers have none: timm folds CLS's into `cls_token` and sets `no_embed_class`).

    install(model, "dino")      # once, after load: model._pos_embed now resamples DINO's way
"""

from __future__ import annotations

import math
import threading
import types

import torch
import torch.nn.functional as F
from cachetools import LRUCache

from attention.errors import InputError

# Per rule: (offset added to the grid before taking the scale factor, or None to ask for the size; antialias).
# DINOv2's hub code (dinov2/hub/backbones.py) builds dinov2_vits14 with the class defaults
# interpolate_offset=0.1, interpolate_antialias=False, and every *_reg model with interpolate_offset=0.0,
# interpolate_antialias=True; since dinov2 commit e1277af (#378) an offset of 0 means `size=(gh, gw)`
# (before, scale_factor=g / M: the same samples, but the output size could round one short). The
# register models were released (9c7e324) and evaluated with those settings, so those are what we use.
RULES: dict[str, tuple[float | None, bool]] = {
    "dino": (0.1, False),
    "dinov2": (0.1, False),
    "dinov2_reg": (None, True),
    "timm": (None, True),
}
ROPE = "rope"  # models whose positions are rotary only (no absolute pos_embed): nothing to resample
CACHE_SIZE = 8  # resampled embeddings kept per model (grid sizes), least recently used out first
# guards every model's LRUCache (cachetools' caches are not thread-safe): one lock for all models,
# so a model holds no lock and stays copyable
_lock = threading.Lock()


def check_rule(rule: str) -> str:
    """`rule` when it is one of RULES or ROPE, else InputError listing them."""
    if rule not in RULES and rule != ROPE:
        raise InputError(f"Position-embedding rule {rule!r} is not known; accepted: {', '.join([*RULES, ROPE])}.")
    return rule


def resample(patch_pos: torch.Tensor, grid: tuple[int, int], rule: str) -> torch.Tensor:
    """The patch position embeddings of an M x M grid resampled to `grid` = (gh, gw) by `rule`.

    patch_pos: (1, M*M, D), row-major over the grid, any float dtype. Returns (1, gh*gw, D) in
    patch_pos's dtype, computed in float32; patch_pos itself when the grid is already M x M
    (the families' own early exit: no resampling at the trained size).
    """
    if check_rule(rule) == ROPE:
        raise InputError("Rotary position embeddings are computed per grid by the model; there is nothing to resample.")
    offset, antialias = RULES[rule]
    n, d = patch_pos.shape[1], patch_pos.shape[2]
    m = math.isqrt(n)
    if m * m != n:
        raise InputError(f"Position embeddings of {n} patches are not a square grid; accepted: M x M patches.")
    gh, gw = grid
    if (gh, gw) == (m, m):
        return patch_pos
    img = patch_pos.float().reshape(1, m, m, d).permute(0, 3, 1, 2)  # (1, D, M, M): rows, then columns
    if offset is None:
        out = F.interpolate(img, size=(gh, gw), mode="bicubic", antialias=antialias, align_corners=False)
    else:  # the scale factor itself sets where samples fall; the output size is floor(M * s) = g
        scale = ((gh + offset) / m, (gw + offset) / m)
        out = F.interpolate(img, scale_factor=scale, mode="bicubic", antialias=antialias, align_corners=False)
    if tuple(out.shape[-2:]) != (gh, gw):  # floor(M * (g + 0.1) / M) is g; checked, as DINO's code asserts
        raise RuntimeError(f"Resampling position embeddings to {gh}x{gw} gave {tuple(out.shape[-2:])}.")
    return out.permute(0, 2, 3, 1).reshape(1, gh * gw, d).to(patch_pos.dtype)


def pos_embed_for(model: torch.nn.Module, grid: tuple[int, int]) -> torch.Tensor:
    """`model.pos_embed` for a (gh, gw) patch grid by the model's rule (`model.pos_embed_rule`):
    (1, gh*gw, D) with `no_embed_class`, else (1, P + gh*gw, D) with the prefix embeddings first,
    unchanged. Cached per grid (`CACHE_SIZE`), thread-safe; recomputed when the parameter moves or
    changes, and never cached while it is being trained."""
    pos = model.pos_embed
    P = 0 if model.no_embed_class else model.num_prefix_tokens

    def compute() -> torch.Tensor:
        patches = pos[:, P:]
        out = resample(patches, grid, model.pos_embed_rule)
        if out is patches:  # the trained grid: the embeddings as they are
            return pos
        return torch.cat([pos[:, :P], out], 1) if P else out

    if pos.requires_grad and torch.is_grad_enabled():
        return compute()
    stamp = (pos.device, pos.dtype, pos.data_ptr(), pos._version, model.pos_embed_rule)
    with _lock:
        held, cache = model.__dict__.get("_pos_cache", (None, None))
        if held != stamp:  # first use, or the parameter moved (.to) or changed: start afresh
            cache = LRUCache(maxsize=CACHE_SIZE)
            model.__dict__["_pos_cache"] = (stamp, cache)
        hit = cache.get(grid)  # marks it used
        if hit is not None:
            return hit
    with torch.inference_mode(False), torch.no_grad():  # a plain tensor, usable in and out of inference mode
        out = compute()
    with _lock:
        cache[grid] = out  # the least recently used grid out when full
    return out


def _family_pos_embed(self: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """timm's `VisionTransformer._pos_embed` with the family's resampling: x (B, gh, gw, D) patch
    tokens -> (B, P + gh*gw, D) with CLS and registers prepended as timm does."""
    if not (self.dynamic_img_size and x.ndim == 4 and self.pos_embed is not None):
        return type(self)._pos_embed(self, x)
    B, gh, gw, D = x.shape
    pos = pos_embed_for(self, (gh, gw))
    x = x.reshape(B, gh * gw, D)
    prefix = [t.expand(B, -1, -1) for t in (self.cls_token, self.reg_token) if t is not None]
    if self.no_embed_class:  # DINOv2 with registers: patches get embeddings, prefix tokens none
        x = torch.cat([*prefix, x + pos], 1)
    else:
        x = torch.cat([*prefix, x], 1) + pos
    return self.pos_drop(x)


def install(model: torch.nn.Module, rule: str) -> torch.nn.Module:
    """Make `model` (a timm VisionTransformer) resample its position embeddings by `rule` on any
    grid: its `_pos_embed` is replaced on this instance only. "timm" leaves timm's own code in
    place; "rope" too, for a model with no absolute embeddings (InputError when it has some).
    Returns the model; `model.pos_embed_rule` names the rule."""
    check_rule(rule)
    if rule == ROPE and getattr(model, "pos_embed", None) is not None:
        raise InputError(
            f"Position-embedding rule 'rope' is for models with rotary embeddings only; this "
            f"{type(model).__name__} has absolute ones; accepted: {', '.join(RULES)}."
        )
    model.pos_embed_rule = rule
    if rule in ("timm", ROPE):
        model.__dict__.pop("_pos_embed", None)
    else:
        model._pos_embed = types.MethodType(_family_pos_embed, model)
    return model
