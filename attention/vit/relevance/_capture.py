"""A stand-in for `attention.vit.capture` (the engine's kernel hook), with the same contract, used only
until that module lands: relevance is written against `Recorder` / `recording` and swaps this file out.

It wraps `torch.nn.functional.scaled_dot_product_attention` once (a pass-through unless a recorder is
active in the calling context and a timm attention block is running) and hooks each block, so a
recorder sees what the fused kernel got (q, k, v, mask, scale) and what it returned.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar

import torch
import torch.nn.functional as F

from attention.errors import InputError


class UnsupportedModelError(InputError):
    """A block the engine cannot read exactly."""


class Recorder:
    """What a pass hands over; subclasses override what they need (the defaults do nothing)."""

    def on_kernel(self, layer: int, q, k, v, mask, scale: float) -> None:
        """q, k (B, H, N, d) and v (B, H, N, dv) as the kernel got them; mask additive or None."""

    def on_output(self, layer: int, out: torch.Tensor) -> None:
        """The kernel's output (B, H, N, dv)."""

    def on_block(self, layer: int, x: torch.Tensor) -> None:
        """Block output tokens (B, N, D)."""


_ACTIVE: ContextVar[tuple[Recorder, list[int | None]] | None] = ContextVar("relevance_recorder", default=None)
_LOCK = threading.Lock()
_SDPA = F.scaled_dot_product_attention


def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
    state = _ACTIVE.get()
    if state is None or state[1][0] is None:
        return _SDPA(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, **kw)
    rec, cur = state
    layer = cur[0]
    s = float(scale) if scale is not None else q.shape[-1] ** -0.5
    rec.on_kernel(layer, q, k, v, attn_mask, s)
    out = _SDPA(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, **kw)
    rec.on_output(layer, out)
    return out


def check_supported(model: torch.nn.Module) -> None:
    """Raises UnsupportedModelError unless every block is a fused timm `Attention` the stand-in reads."""
    from timm.models.vision_transformer import Attention

    for i, blk in enumerate(getattr(model, "blocks", [])):
        attn = getattr(blk, "attn", None)
        if type(attn) is not Attention or not attn.fused_attn:
            raise UnsupportedModelError(
                f"Block {i} has a {type(attn).__name__} the engine cannot read exactly; accepted: timm ViT/DeiT blocks."
            )


def _install(model: torch.nn.Module) -> None:
    if getattr(model, "_relevance_hooks", False):
        return
    with _LOCK:
        if getattr(model, "_relevance_hooks", False):
            return
        F.scaled_dot_product_attention = _sdpa
        for i, blk in enumerate(model.blocks):

            def pre(module, args, i=i):
                state = _ACTIVE.get()
                if state is not None:
                    state[1][0] = i

            def post(module, args, out, i=i):
                state = _ACTIVE.get()
                if state is not None:
                    state[1][0] = None

            def block(module, args, out, i=i):
                state = _ACTIVE.get()
                if state is not None:
                    state[0].on_block(i, out)

            blk.attn.register_forward_pre_hook(pre)
            blk.attn.register_forward_hook(post)
            blk.register_forward_hook(block)
        model._relevance_hooks = True


@contextmanager
def recording(model: torch.nn.Module, recorder: Recorder):
    """Within the context, forwards of `model` in this thread hand their kernels to `recorder`."""
    check_supported(model)
    _install(model)
    token = _ACTIVE.set((recorder, [None]))
    try:
        yield recorder
    finally:
        _ACTIVE.reset(token)
