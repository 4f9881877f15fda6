"""One hook mechanism for any described ViT (`backbone.describe`: timm, transformers, Meta's DINO
classes, open_clip, torchvision): what each attention module hands the attention kernel, and what
each block outputs, handed to the recorders active in the calling context. How the kernel call is
read (fused, explicit softmax, nn.MultiheadAttention) is `backbone.kernel`'s.

Every timm attention block ends in one `F.scaled_dot_product_attention(q, k, v, attn_mask)` call:
q and k there are final (after q_norm/k_norm and the rotary embedding of EVA-02, DINOv3 and the
RoPE ViTs), and `attn_mask` carries the additive position bias (BEiT, relpos ViTs). A pre-hook on
each block's `attn` module enters a `TorchFunctionMode` for that module's forward only (a
thread-local stack: other threads are not seen); the mode passes every call through unchanged
and, for the kernel call, hands its arguments and its output to the active recorders. Fused
attention stays on and the model's outputs are unchanged; nothing is kept unless a recorder keeps it.

    class Rows(Recorder):
        def on_kernel(self, layer, q, k, v, mask, scale): ...   # q, k (B, H, N, d) as the kernel got them
    with recording(model, Rows()):
        model.forward_features(x)

Why a mode scoped to the attention module rather than a global wrapper of F.scaled_dot_product_attention:
no process-wide patching (other code calling the kernel, or holding its own reference, is unaffected),
and it works whoever imported the function how.

Cost, measured here (2 cores, torch 2.14, one thread, `bench_backbones --overhead --narrow`): the mode's
own dispatch is 1-2 us per torch call inside it (10 calls in a timm attention module, 21 in
transformers', 36 in DINOv3's), about 20-30 us per layer, which no code of ours can remove short of
not entering the mode; on top of it a set lookup per call (calls that cannot begin an attention
pass straight through) and, from `rows`, one kernel per layer. Nothing inside the forward copies
between host and device or reads a value back to the host (`tests/vit/engine/test_device_copies.py`):
on a GPU either would wait for the stream once per layer.

Layers: 0..L-1 are the blocks; a model that pools by attention (`attn_pool`, SigLIP and `*_map`
ViTs) has its pool head's kernel call as layer L (q (B, H, 1, d): the pool's query).
Thread-safe: hooks are installed once per model; each context (thread, task) activates its own
recorders (a ContextVar), so passes running at once on one shared model record only their own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode

from attention.errors import UnsupportedModelError
from attention.vit.backbone import describe, kernel
from attention.vit.backbone.kernel import kernel_args  # noqa: F401  (re-exported: the engine's one reading)
from attention.vit.backbone.spec import first_tensor


class Recorder:
    """What a pass hands out. Subclasses override what they need; the defaults do nothing."""

    def on_kernel(self, layer: int, q, k, v, mask, scale: float) -> None:
        """q, k: (B, H, N, d) exactly as the kernel got them (Nq = 1 for the pool's layer L);
        v: (B, H, N, dv); mask: additive float tensor broadcastable to (B, H, Nq, N), or None
        (bool masks and is_causal converted to 0/-inf); scale: the kernel's (d ** -0.5 when it got None)."""

    def replace_kernel(self, layer: int, q, k, v, mask, scale: float) -> torch.Tensor | None:
        """The kernel's output (B, H, Nq, dv) computed in its place (the same values; e.g. with a backward of
        one's own), or None: the kernel runs. Asked only of a `scaled_dot_product_attention` call without
        dropout; the first recorder that answers wins."""
        return None

    def on_output(self, layer: int, out: torch.Tensor) -> None:
        """The kernel's output (B, H, Nq, dv); under torch.enable_grad a subclass may call
        out.register_hook(...)."""

    def on_block(self, layer: int, x: torch.Tensor) -> None:
        """Block `layer`'s output tokens (B, N, D); the last layer's after the model's final norm."""


class BlockTokens(Recorder):
    """One block's output tokens (B, N, D), fp32, on the model's device (the last block's are after the final
    norm): `BlockTokens(depth - 1)` records what the pool reads."""

    def __init__(self, layer: int):
        self.layer, self.tokens = layer, None

    def on_block(self, layer: int, x: torch.Tensor) -> None:
        if layer == self.layer:
            self.tokens = x.detach().float()


def _overrides(rec: Recorder, name: str) -> bool:
    return getattr(type(rec), name) is not getattr(Recorder, name)


@dataclass
class _Entry:
    """One recorder activated on one model in one context, with the counts that prove each
    attention module made exactly one kernel call per forward."""

    model_id: int
    recorder: Recorder
    kernel: bool  # the recorder wants kernel calls (on_kernel or on_output)
    output: bool = False  # it overrides on_output
    replaces: bool = False  # it may compute the kernel call itself (replace_kernel)
    runs: dict[int, int] = field(default_factory=dict)  # layer -> attention-module forwards
    calls: dict[int, int] = field(default_factory=dict)  # layer -> kernel calls


_ACTIVE: ContextVar[tuple[_Entry, ...]] = ContextVar("attention_capture", default=())
_LOCK = threading.Lock()
_MODES = threading.local()  # per thread: the stack of modes the pre-hooks entered (None: none entered)
# the calls that can begin an attention computation (`kernel.Explicit` follows one from its q @ k^T, or a
# 4-D q scaled before it); while none is being followed, every other call passes straight through
_WATCHED = frozenset({kernel.SDPA, kernel.MHA, *kernel.MUL, *kernel.MATMUL})


class _KernelMode(TorchFunctionMode):
    """Passes every torch call through; hands the attention computation's q, k, v, mask, scale and its
    output to `entries`, however the module computes it (`backbone.kernel`).

    It runs for every torch call inside an attention module (10 in timm's, 21 in transformers'): the
    common call costs one set lookup on top of the mode's own dispatch, and nothing here copies between
    host and device or waits for one (the recorders' work is queued on the model's device)."""

    def __init__(self, layer: int, entries: list[_Entry]):
        super().__init__()
        self.layer, self.entries = layer, entries
        self.outputs = [e.recorder for e in entries if e.output]
        self.replacers = [e.recorder for e in entries if e.replaces]
        self.explicit = kernel.Explicit()

    def _hand(self, kern: tuple) -> None:
        """On each recorder: on_kernel(layer, q, k, v, mask, scale), counted."""
        layer = self.layer
        for e in self.entries:
            e.calls[layer] = e.calls.get(layer, 0) + 1
            e.recorder.on_kernel(layer, *kern)

    def _out(self, out: torch.Tensor) -> None:
        for r in self.outputs:
            r.on_output(self.layer, out)

    def _replaced(self, kern, args, kwargs) -> torch.Tensor | None:
        """A recorder's own computation of this kernel call (`Recorder.replace_kernel`), or None."""
        if not self.replacers or kernel.dropout(args, kwargs):
            return None
        for r in self.replacers:
            out = r.replace_kernel(self.layer, *kern)
            if out is not None:
                return out
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func not in _WATCHED and self.explicit.state is None:  # the common call: nothing to follow
            return func(*args, **kwargs) if kwargs else func(*args)
        kwargs = kwargs or {}
        if func is kernel.MHA:
            got = kernel.mha_kernel(args, kwargs)
            if got is None:  # counted as no call: refused after the forward
                return func(*args, **kwargs)
            kern, a = got
            self._hand(kern)
            if a.get("need_weights", True):
                return func(*args, **kwargs)
            o, out = kernel.mha_output(kern, a)
            self._out(o)
            return out, None
        if func is not kernel.SDPA:
            out = func(*args, **kwargs)
            done = self.explicit.step(func, args, kwargs, out)
            if done is not None:
                self._hand(done[:5])
                self._out(done[5])
            return out
        kern = kernel.kernel_args(args, kwargs)
        self._hand(kern)
        out = self._replaced(kern, args, kwargs)
        if out is None:
            out = func(*args, **kwargs)
        self._out(out)
        return out


def _entries(model_id: int) -> list[_Entry]:
    return [e for e in _ACTIVE.get() if e.model_id == model_id]


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules whose attention is each layer's (`Backbone.attention`): one per block, then the
    attention-pooling head's when the model pools by attention."""
    return list(describe(model).attention)


def _install(model: torch.nn.Module) -> None:
    """Attach, once per model, the hooks: a pre-hook and an always-called post-hook on every
    attention module (entering and leaving the kernel mode when a recorder wants kernel calls),
    forward hooks on blocks 0..L-2 and on the final norm (the last layer's tokens). Thread-safe."""
    if getattr(model, "_capture_hooks", False):
        return
    with _LOCK:
        if getattr(model, "_capture_hooks", False):
            return
        bb = describe(model)
        mid = id(model)
        for i, mod in enumerate(bb.attention):

            def enter(module, args, i=i):
                entries = _entries(mid)
                for e in entries:
                    e.runs[i] = e.runs.get(i, 0) + 1
                want = [e for e in entries if e.kernel]
                mode = _KernelMode(i, want) if want else None
                if mode is not None:
                    mode.__enter__()
                stack = getattr(_MODES, "stack", None)
                if stack is None:
                    stack = _MODES.stack = []
                stack.append((module, mode))

            def leave(module, args, out):
                stack = getattr(_MODES, "stack", None)
                if not stack or stack[-1][0] is not module:  # hooks installed mid-forward: no enter to undo
                    return
                mode = stack.pop()[1]
                if mode is not None:
                    mode.__exit__(None, None, None)

            mod.register_forward_pre_hook(enter)
            mod.register_forward_hook(leave, always_call=True)
        last = bb.depth - 1
        for i, blk in enumerate(bb.blocks[:last]):

            def block(module, args, out, i=i):
                for e in _entries(mid):
                    e.recorder.on_block(i, first_tensor(out))

            blk.register_forward_hook(block)

        def final(module, args, out):
            for e in _entries(mid):
                e.recorder.on_block(last, first_tensor(out))

        bb.final.register_forward_hook(final)
        model._capture_hooks = True


@contextmanager
def recording(model: torch.nn.Module, recorder: Recorder) -> Iterator[Recorder]:
    """Activate `recorder` for the forwards of `model` run in this context (thread, task); yields it.
    Installs the hooks once per model (`describe` first: UnsupportedModelError for what it cannot
    read). Recorders nest: all active ones see
    each pass. On leaving without error, raises UnsupportedModelError when an attention module ran
    without exactly one kernel call per forward (custom code the check could not see)."""
    _install(model)
    out = _overrides(recorder, "on_output")
    replaces = _overrides(recorder, "replace_kernel")
    entry = _Entry(id(model), recorder, _overrides(recorder, "on_kernel") or out or replaces, out, replaces)
    token = _ACTIVE.set((*_ACTIVE.get(), entry))
    try:
        yield recorder
    finally:
        _ACTIVE.reset(token)
    if entry.kernel:
        for i, runs in entry.runs.items():
            if entry.calls.get(i, 0) != runs:
                mods = attention_modules(model)
                raise UnsupportedModelError(
                    f"{type(mods[i]).__name__} (layer {i}) made {entry.calls.get(i, 0)} attention-kernel calls in "
                    f"{runs} forward(s); the engine reads attention modules that make exactly one attention "
                    "computation each (an F.scaled_dot_product_attention call, or scores -> softmax -> @ v)."
                )


def check_supported(model: torch.nn.Module) -> None:
    """Raise UnsupportedModelError, naming the class and why, unless the model is described
    (`backbone.describe`) and every layer's attention is one module the engine reads exactly."""
    describe(model)
