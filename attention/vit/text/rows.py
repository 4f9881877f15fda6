"""Rows of one layer's attention A and of its gradient dA for P prompts at once, a chunk of rows at a time,
for text relevance's two rules (no N x N matrix kept; float32 whatever the model's dtype).

    rows = PromptRows(kernel, P)               # kernel: (q, k, v, mask, scale) of one layer, q (H, Nq, d)
    r = rows.chefer(dout, r, residual=True)    # Chefer et al.: r <- r + r mean_h((dA * A)^+), (P, Nk)
    m = rows.positive_grad(dout)               # LeGrad: mean over heads and rows of (dA)^+, (P, Nk)
    dout = batched_grad(logits, [out])[0]       # d logits[p] / d out for each prompt p: (P, *out.shape)

dA = dO V^T, dO the gradient at the kernel's output (P, H, Nq, dv): one row block of A and of dA costs
two matmuls per chunk, so memory stays O(P x H x rows x N) for `chunk_bytes`.
"""

from __future__ import annotations

import torch

CHUNK_BYTES = 64 << 20  # working memory of one chunk: A's rows and P rows of dA * A (float32, all heads)


class PromptRows:
    """One layer's rows, float32. kernel: (q (H, Nq, d), k (H, Nk, d), v (H, Nk, dv), additive mask
    broadcastable to (H, Nq, Nk) or None, scale)."""

    def __init__(self, kernel: tuple, prompts: int, chunk_bytes: int = CHUNK_BYTES):
        q, k, v, mask, scale = kernel
        self.q, self.kt, self.vt, self.mask = q.float() * scale, k.float().mT, v.float().mT, mask
        H, nq, _ = q.shape
        rows = max(1, chunk_bytes // (4 * H * k.shape[1] * (prompts + 2)))
        self.spans = [(s, min(s + rows, nq)) for s in range(0, nq, rows)]

    def attention(self, s: int, e: int) -> torch.Tensor:
        """Rows s..e-1 of A = softmax(q k^T * scale + mask), float32 (H, e - s, Nk)."""
        z = self.q[:, s:e] @ self.kt
        if self.mask is not None:
            m = self.mask.float()
            z += m if m.shape[-2] == 1 else m[..., s:e, :]
        return torch.softmax(z, -1)

    def grad(self, dout: torch.Tensor, s: int, e: int) -> torch.Tensor:
        """Rows s..e-1 of dA = dO V^T for each prompt, float32 (P, H, e - s, Nk). dout (P, H, Nq, dv)."""
        return dout[:, :, s:e].float() @ self.vt

    def chefer(self, dout: torch.Tensor, r: torch.Tensor, *, residual: bool = True) -> torch.Tensor:
        """Chefer et al.'s update of the relevance rows r (P, Nq): r (I + cam) with residual (a self-attention
        layer, Nq = Nk), r cam without (a pooling head's cross-attention); cam = mean_h((dA * A)^+). (P, Nk)."""
        out = r.clone() if residual else torch.zeros(r.shape[0], self.kt.shape[-1], device=r.device)
        for s, e in self.spans:
            w = r[:, s:e]
            if not w.any():
                continue
            cam = self.grad(dout, s, e).mul_(self.attention(s, e)).clamp_(min=0).mean(1)  # (P, c, Nk)
            out += torch.bmm(w[:, None], cam)[:, 0]
        return out

    def positive_grad(self, dout: torch.Tensor) -> torch.Tensor:
        """LeGrad's layer map: the mean over heads and query rows of (dA)^+, float32 (P, Nk)."""
        total = torch.zeros(dout.shape[0], self.kt.shape[-1], device=dout.device)
        for s, e in self.spans:
            total += self.grad(dout, s, e).clamp_(min=0).sum((1, 2))
        return total / (self.q.shape[0] * self.q.shape[1])


def batched_grad(outputs: torch.Tensor, inputs: list, retain: bool) -> list:
    """d outputs[p] / d inputs for every p at once: a list of (P, *input.shape) tensors (zeros where unused)."""
    eye = torch.eye(len(outputs), device=outputs.device, dtype=outputs.dtype)
    try:
        if len(outputs) == 1:  # one prompt: a plain backward (autograd's batching would only add copies)
            gs = torch.autograd.grad(outputs[0], inputs, retain_graph=retain, allow_unused=True)
            gs = [None if g is None else g[None] for g in gs]
        else:
            gs = torch.autograd.grad(
                outputs, inputs, eye, retain_graph=retain, is_grads_batched=True, allow_unused=True
            )
    except RuntimeError:  # an op without a batching rule: one backward per prompt
        per = [torch.autograd.grad(o, inputs, retain_graph=True, allow_unused=True) for o in outputs]
        gs = [None if all(p[i] is None for p in per) else torch.stack([p[i] for p in per]) for i in range(len(inputs))]
    return [torch.zeros((len(outputs), *t.shape), device=t.device) if g is None else g for g, t in zip(gs, inputs)]
