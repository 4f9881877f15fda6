"""What one text-relevance pass records (`capture.recording`): each layer's kernel inputs and output (in the
graph), each block's output, and, for one prompt on the CPU, each block's kernel run as `backward.FusedRows`
so the backward does Chefer's update as it goes.

    rec = Pass(layers, start=tower.start_row)      # start: the relevance row before the top layer, or None
    with recording(trunk, rec), last_block(trunk) as last:
        ...forward...
    rec.fused                                       # True when every block's kernel ran as FusedRows
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager

import torch

from attention.vit.engine.capture import Recorder
from attention.vit.text.backward import CheferState, FusedRows, fits


class Pass(Recorder):
    """Each layer's kernel inputs (q, k, v, mask, scale) and output (in the graph), each block's output.
    n: the layers recorded (the blocks, then a pooling head's); with `start` (n -> (N,) float32 row; given
    for one prompt only), blocks 0..blocks-1 run as FusedRows when `backward.fits` (CPU float32, no mask)."""

    def __init__(self, n: int, blocks: int | None = None, start: Callable[[int], torch.Tensor] | None = None):
        self.kernel: list[tuple | None] = [None] * n
        self.out: list[torch.Tensor | None] = [None] * n
        self.blocks: dict[int, torch.Tensor] = {}
        self.n_blocks = n if blocks is None else blocks
        self.start, self.state = start, None
        self.replaced: list[int] = []  # the blocks whose kernel ran as FusedRows

    @property
    def fused(self) -> bool:
        """Every block's kernel ran as FusedRows (its backward updates `state.r`)."""
        return self.replaced == list(range(self.n_blocks))

    def on_kernel(self, layer: int, q, k, v, mask, scale: float) -> None:
        m = None if mask is None else mask.detach()
        if m is not None:
            m = m.reshape((1,) * (4 - m.dim()) + tuple(m.shape))[0]
        self.kernel[layer] = (q[0].detach(), k[0].detach(), v[0].detach(), m, float(scale))

    def replace_kernel(self, layer: int, q, k, v, mask, scale: float) -> torch.Tensor | None:
        if self.start is None or layer >= self.n_blocks or not torch.is_grad_enabled() or not fits(q, k, mask):
            return None
        if self.state is None:
            self.state = CheferState(self.start(k.shape[-2]))
        self.replaced.append(layer)
        return FusedRows.apply(q, k, v, scale, self.state, layer)

    def on_output(self, layer: int, out: torch.Tensor) -> None:
        self.out[layer] = out

    def on_block(self, layer: int, x: torch.Tensor) -> None:
        self.blocks[layer] = x


_HOOK_LOCK = threading.Lock()
_LAST = threading.local()


@contextmanager
def last_block(trunk: torch.nn.Module):
    """The last block's own input ("in") and output ("out", before the final norm), kept for this thread's
    passes in the context."""
    if not getattr(trunk, "_text_last_hook", False):
        with _HOOK_LOCK:
            if not getattr(trunk, "_text_last_hook", False):

                def keep(module, args, out):
                    box = getattr(_LAST, "box", None)
                    if box is not None and box.get("trunk") is trunk:
                        box["out"] = out

                def keep_in(module, args):
                    box = getattr(_LAST, "box", None)
                    if box is not None and box.get("trunk") is trunk:
                        box["in"] = args[0]

                trunk.blocks[-1].register_forward_hook(keep)
                trunk.blocks[-1].register_forward_pre_hook(keep_in)
                trunk._text_last_hook = True
    saved = getattr(_LAST, "box", None)
    _LAST.box = box = {"trunk": trunk}
    try:
        yield box
    finally:
        _LAST.box = saved
