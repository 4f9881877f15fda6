"""Why this class? Class relevance of a ViT classifier's decision, beside the raw attention of the same pass.

    rel = relevance(model, image)            # target: the top class
    rel.top(5)                               # [(index, name, probability), ...]
    rel.chefer_map                           # (gh, gw) Chefer, Gur & Wolf (ICCV 2021), the generic rule
    rel.grad_rollout_map                     # (gh, gw) jacobgil/vit-explain's grad-rollout, layers paired
    rel.attention_map                        # (gh, gw) the last layer's CLS attention, mean of heads

One forward pass with fused attention untouched (the engine's kernel hook keeps each layer's q, k, v and
mask), one backward pass from the target's logit (a hook on each kernel output keeps dO), then, from the
top layer down, rows of A = softmax(q k^T * scale + mask) and dA = dO v^T a chunk of rows at a time,
carrying only the class token's row of R. Memory: O(layers x N x d) kept, plus one chunk of rows
(`CHUNK_BYTES`); no N x N matrix per layer.

Chefer et al.: R = I; per layer R <- R + mean_h((dA * A)^+) R; the map is R[cls, prefix:].
grad-rollout (vit-explain): per layer G = (mean_h(A * dA))^+, its lowest `discard_ratio` of entries
(the whole matrix's, entry 0 not spared) zeroed, A' = (G + I) rows renormalised (vit-explain divides
without keepdim, its issue #16), R = A'_L ... A'_1 with each layer's A and dA paired by layer (its
backward-hook order mirrors them, its issue #6); the map is R[cls, prefix:].
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from attention.errors import InputError, NoClassifierError, UnsupportedModelError
from attention.images import MAX_TOKENS, ImageSource
from attention.shows import Shows
from attention.vit.backbone import describe
from attention.vit.engine.capture import Recorder, recording
from attention.vit.engine.cost import relevance_gflop
from attention.vit.engine.flow import nth_smallest
from attention.vit.engine.preprocess import prepare
from attention.vit.engine.request import GRAD_DISCARD, RESOLUTION
from attention.vit.relevance.labels import check_classifier, class_index, class_names, short_name

CHUNK_BYTES = 64 << 20  # working memory of one chunk of rows of A, dA and A * dA (float32, all heads)
DISCARD_RATIO = GRAD_DISCARD.default  # vit-explain's default for grad-rollout (`request.GRAD_DISCARD`)


@dataclass
class Relevance(Shows):
    """Class relevance of one image. C classes, L layers, H heads, N = P + gh*gw tokens."""

    logits: np.ndarray  # float32 (C,)
    probs: np.ndarray  # float32 (C,): softmax of logits
    names: tuple[str, ...]  # (C,) class names
    target: int  # the explained class
    chefer: np.ndarray  # float32 (N,): Chefer et al.'s R, class token's row
    grad_rollout: np.ndarray  # float32 (N,): vit-explain's grad-rollout, class token's row
    attention: np.ndarray  # float32 (L, H, N): each layer's class-token attention row, same pass
    grid: tuple[int, int]
    image: Image.Image  # the preprocessed RGB image the grid aligns to
    patch_size: int
    num_prefix_tokens: int  # P
    discard_ratio: float
    seconds: float = 0.0

    @property
    def nbytes(self) -> int:
        """Bytes held (arrays and the shown image), for the server's bounded store."""
        arrays = (self.logits, self.probs, self.chefer, self.grad_rollout, self.attention)
        return sum(a.nbytes for a in arrays) + self.image.width * self.image.height * 3

    def top(self, k: int = 5) -> list[tuple[int, str, float]]:
        """The k most probable classes: (index, name, probability), most probable first."""
        order = np.argsort(-self.probs, kind="stable")[:k]
        return [(int(i), self.names[i], float(self.probs[i])) for i in order]

    def _patches(self, row: np.ndarray) -> np.ndarray:
        return row[self.num_prefix_tokens :].reshape(self.grid)

    @property
    def chefer_map(self) -> np.ndarray:
        """float32 (gh, gw): Chefer et al.'s relevance over patches."""
        return self._patches(self.chefer)

    @property
    def grad_rollout_map(self) -> np.ndarray:
        """float32 (gh, gw): grad-rollout over patches."""
        return self._patches(self.grad_rollout)

    @property
    def attention_map(self) -> np.ndarray:
        """float32 (gh, gw): the last layer's class-token attention over patches, mean of heads."""
        return self._patches(self.attention[-1].mean(0))

    def summary(self, k: int = 5) -> dict:
        """JSON-ready: the target, the top k classes with probabilities, the grid."""
        t = self.target
        return {
            "target": {"index": t, "name": self.names[t], "probability": float(self.probs[t])},
            "top": [{"index": i, "name": n, "probability": round(p, 6)} for i, n, p in self.top(k)],
            "grid": list(self.grid),
            "discard_ratio": self.discard_ratio,
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """For a .npz: chefer, grad_rollout, attention maps (gh, gw); rows chefer_row, grad_rollout_row (N,),
        attention_rows (L, H, N); logits, probs (C,); target, num_prefix_tokens; image uint8."""
        return {
            "chefer": self.chefer_map,
            "grad_rollout": self.grad_rollout_map,
            "attention": self.attention_map,
            "chefer_row": self.chefer,
            "grad_rollout_row": self.grad_rollout,
            "attention_rows": self.attention,
            "logits": self.logits,
            "probs": self.probs,
            "target": np.array(self.target, np.int32),
            "num_prefix_tokens": np.array(self.num_prefix_tokens, np.int32),
            "image": np.asarray(self.image, dtype=np.uint8),
        }


class _Kept(Recorder):
    """Each layer's kernel inputs (q, k, v, mask, scale) and its output (in the autograd graph)."""

    def __init__(self, n_layers: int):
        self.kernel: list[tuple | None] = [None] * n_layers
        self.out: list[torch.Tensor | None] = [None] * n_layers

    def on_kernel(self, layer: int, q, k, v, mask, scale: float) -> None:
        m = None if mask is None else mask.detach()
        if m is not None:  # additive (the engine converts bool masks), broadcastable to (B, H, N, N)
            m = m.reshape((1,) * (4 - m.dim()) + tuple(m.shape))[0]  # (H or 1, N or 1, N)
        self.kernel[layer] = (q[0].detach(), k[0].detach(), v[0].detach(), m, float(scale))

    def on_output(self, layer: int, out: torch.Tensor) -> None:
        self.out[layer] = out


class _Layer:
    """One layer's rows, float32, a chunk of rows at a time: the class token's attention row (H, N),
    Chefer's cam = mean_h((A * dA)^+) and grad-rollout's G = (mean_h(A * dA))^+ (c, N) each."""

    def __init__(self, kernel: tuple, dout: torch.Tensor | None, chunk_bytes: int):
        q, k, v, mask, scale = kernel
        self.q, self.kt, self.vt, self.mask = q.float() * scale, k.float().mT, v.float().mT, mask
        self.dout = torch.zeros(q.shape[:2] + v.shape[-1:], device=q.device) if dout is None else dout.float()
        H, N, _ = q.shape
        rows = max(1, chunk_bytes // (2 * 4 * H * N))  # two (H, c, N) buffers live at once
        self.spans = [(s, min(s + rows, N)) for s in range(0, N, rows)]
        # ((s, e), rows) of the last call, kept only when one chunk holds the layer: one slot for this
        # object's life, filled on a condition; functools.lru_cache on a method would hold `self` in a
        # cache shared by every instance, and cachetools.cachedmethod would add a cache and a key for one slot
        self._memo: tuple | None = None

    def __call__(self, s: int, e: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(rows s..e-1 of A's row 0 when s == 0 else None, cam (e - s, N), G (e - s, N))."""
        if self._memo is not None and self._memo[0] == (s, e):
            return self._memo[1]
        z = self.q[:, s:e] @ self.kt  # (H, c, N)
        if self.mask is not None:
            m = self.mask.float()
            z += m if m.shape[-2] == 1 else m[:, s:e]
        a = torch.softmax(z, -1)
        del z
        att = a[:, 0].clone() if s == 0 else None
        prod = torch.matmul(self.dout[:, s:e], self.vt).mul_(a)  # A * dA, dA = dO V^T
        del a
        g = prod.mean(0).clamp_(min=0)
        cam = prod.clamp_(min=0).mean(0)
        out = (att, cam, g)
        if len(self.spans) == 1:  # one chunk holds the layer: kept for the cut's passes
            self._memo = ((s, e), out)
        return out

    def fused_grad(self, s: int, e: int) -> torch.Tensor:
        """grad-rollout's G rows: (mean_h(A * dA))^+, float32 (c, N)."""
        return self(s, e)[2]


def relevance_rows(
    model: torch.nn.Module,
    x: torch.Tensor,
    target: int | None = None,
    *,
    discard_ratio: float = DISCARD_RATIO,
    chunk_bytes: int = CHUNK_BYTES,
) -> tuple[torch.Tensor, int, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The engine of `relevance`, on a preprocessed input x (1, C, H, W): one forward, one backward
    (autograd.grad from the target's logit to the kernel outputs, nothing below layer 0's).

    Returns (logits float32 (C,), target, chefer (N,), grad_rollout (N,), attention (L, H, N)), on CPU.
    target: an output index, None = the top class.
    """
    check_classifier(model)
    bb = describe(model)
    discard_ratio = GRAD_DISCARD.check(discard_ratio)
    param = next(model.parameters())
    n_layers = bb.depth
    rec = _Kept(n_layers)
    with torch.inference_mode(False), torch.enable_grad():
        with recording(model, rec):
            out = bb.run(x.to(param.device, param.dtype).clone().requires_grad_(True), True)[0]
        if any(k is None for k in rec.kernel):
            raise InputError("Unsupported attention block: a layer ran without the engine's kernel hook.")
        t = int(out.argmax()) if target is None else int(target)
        grads = torch.autograd.grad(out[t], rec.out, allow_unused=True)
    logits = out.detach().float().cpu()
    rec.out = []
    N = rec.kernel[0][0].shape[1]
    r_ch = torch.zeros(N, device=param.device)
    r_ch[0] = 1.0
    r_gr = r_ch.clone()
    attention = []
    for layer in reversed(range(n_layers)):  # r <- r (I + cam_l), r <- r A'_l: from the top layer down
        dout = grads[layer]
        lay = _Layer(rec.kernel[layer], None if dout is None else dout[0], chunk_bytes)
        n_drop = int(N * N * discard_ratio)
        cut = nth_smallest(lay.fused_grad, lay.spans, n_drop) if n_drop else None
        new_ch, new_gr = r_ch.clone(), torch.zeros_like(r_gr)
        for s, e in lay.spans:
            if s and not (r_ch[s:e].any() or r_gr[s:e].any()):
                continue
            att, cam, g = lay(s, e)
            if att is not None:
                attention.append(att.cpu())
            new_ch += r_ch[s:e] @ cam
            if cut is not None:
                g = g.masked_fill(g <= cut, 0.0)  # a copy: the memo's G stays whole
            else:
                g = g.clone()
            g[torch.arange(e - s), torch.arange(s, e)] += 1.0  # (G + I), rows renormalised
            new_gr += r_gr[s:e] @ g.div_(g.sum(-1, keepdim=True))
        r_ch, r_gr = new_ch, new_gr
        rec.kernel[layer] = None  # free as we go
    att = torch.stack(attention[::-1]).float()
    return logits, t, r_ch.float().cpu(), r_gr.float().cpu(), att


def relevance(
    model: torch.nn.Module,
    image: ImageSource,
    target: int | str | None = None,
    *,
    resolution: int | str | None = RESOLUTION,
    discard_ratio: float = DISCARD_RATIO,
    max_tokens: int = MAX_TOKENS,
    max_gflop: float | None = None,
) -> Relevance:
    """Why `model` says `target` about `image`: the class relevance maps and the top classes.

    model: a timm ViT with a classifier head read from its class token (`load_vit("mnist_vit")`,
    DeiT, supervised ViTs); NoClassifierError for a backbone. target: an output index, a class name
    ("tabby") or None for the top class. resolution, max_tokens: as `attention_maps`. max_gflop: the budget
    of the whole job, priced by `cost.relevance_gflop` (forward, backward and rows), checked before it runs.
    discard_ratio: grad-rollout's share of lowest entries zeroed per layer (vit-explain's 0.9).
    Thread-safe on a shared model (each call records only its own pass).
    """
    check_classifier(model)
    names = class_names(model)
    t = None if target is None or (isinstance(target, str) and not target.strip()) else class_index(target, names)
    x, shown, grid = prepare(
        model, image, resolution, max_tokens, max_gflop, gflop=relevance_gflop, job="relevance job"
    )
    t0 = time.perf_counter()
    logits, t, chefer, grad_rollout, attention = relevance_rows(model, x, t, discard_ratio=discard_ratio)
    if len(names) != logits.shape[0]:
        raise UnsupportedModelError(
            f"{type(model).__name__}'s head gives {logits.shape[0]} logits but its library records "
            f"{len(names)} class names; accepted: a classifier whose names are one per output."
        )
    return Relevance(
        logits=logits.numpy(),
        probs=torch.softmax(logits, -1).numpy(),
        names=names,
        target=t,
        chefer=chefer.numpy(),
        grad_rollout=grad_rollout.numpy(),
        attention=attention.numpy(),
        grid=grid,
        image=shown,
        patch_size=describe(model).patch_size,
        num_prefix_tokens=describe(model).num_prefix_tokens,
        discard_ratio=float(discard_ratio),
        seconds=time.perf_counter() - t0,
    )


__all__ = ["Relevance", "NoClassifierError", "relevance", "relevance_rows", "short_name"]
