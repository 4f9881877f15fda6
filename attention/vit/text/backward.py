"""One attention backward that also does Chefer et al.'s update: for text relevance of one prompt on the CPU,
each layer's kernel runs as `FusedRows` (the same fused CPU kernel forward), and its backward builds each chunk
of rows of A and dA once, for both the kernel's gradients (dq, dk, dv, as the fused backward) and the relevance
row update r <- r (I + mean_h((dA * A)^+)) (`rows.PromptRows.chefer`'s rule, from the top layer down, in the
order the backward visits the layers).

    state = CheferState(start_row)                     # r (N,) before the top layer
    out = FusedRows.apply(q, k, v, scale, state, layer)   # q, k, v (1, H, N, d): in the forward
    torch.autograd.grad(logit, [out_of_layer_0])       # runs layers L-1 .. 1: state.r updated by each

Why: on the CPU the fused kernel's own backward rebuilds the rows of A internally, then Chefer's rule built
them again (QK^T, softmax, dO V^T); here they are built once (measured in docs/text-relevance.md#cost).
Per chunk of c rows (all heads): A = exp(q k^T * scale - lse), dA = dO V^T, dv += A^T dO, G = dA * A,
r's update from G^+, dS = G - A * rowsum(dO * O), dq = dS k * scale, dk += dS^T q * scale. Memory: the
kernel's own saved tensors (q, k, v, out, logsumexp) and O(H x c x N) per chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

CHUNK_BYTES = 16 << 20  # one chunk's rows of A (float32, all heads); three such buffers at once


@dataclass
class CheferState:
    """The relevance row r (N,) float32, updated in place of the top-down order by each layer's backward;
    `layers` lists the layers whose update ran, in order (checked by the caller)."""

    r: torch.Tensor
    layers: list[int] = field(default_factory=list)


def fits(q: torch.Tensor, k: torch.Tensor, mask) -> bool:
    """Whether a kernel call can run as `FusedRows`: one sample, float32 on the CPU, no mask, as many key as
    query heads (one prompt: the caller's to decide, it alone knows how many)."""
    return (
        mask is None
        and q.device.type == "cpu"
        and q.dtype == torch.float32
        and q.dim() == 4
        and q.shape[0] == 1
        and k.shape[:2] == q.shape[:2]
    )


def backward_rows(q, k, v, out, lse, dout, scale: float, r: torch.Tensor | None, chunk_bytes: int | None = None):
    """The fused kernel's gradients and Chefer's row update, a chunk of rows at a time.

    q, k, v, out, dout: (H, N, d) float32; lse: (H, N) the forward's log-sum-exp of the scaled scores;
    r: (N,) the relevance row before this layer, or None (gradients only); chunk_bytes: one chunk's A
    (default CHUNK_BYTES). Returns dq, dk, dv (H, N, d) and
    r (I + mean_h((dA * A)^+)) (N,) (None when r is None)."""
    H, N, _ = q.shape
    delta = (dout * out).sum(-1, keepdim=True)  # (H, N, 1): rowsum(dO * O) = rowsum(dA * A)
    dq = torch.empty_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    kt, vt = k.mT, v.mT
    new = None if r is None else r.clone()
    rows = max(1, (chunk_bytes or CHUNK_BYTES) // (4 * H * N))
    for s in range(0, N, rows):
        e = min(s + rows, N)
        a = torch.baddbmm(-lse[:, s:e, None], q[:, s:e], kt, alpha=scale).exp_()  # (H, c, N)
        g = torch.bmm(dout[:, s:e], vt)  # dA
        dv.baddbmm_(a.mT, dout[:, s:e])
        g.mul_(a)
        if new is not None and bool(r[s:e].any()):
            new += (r[s:e] @ g.clamp(min=0)).sum(0) / H
        g.addcmul_(a, delta[:, s:e], value=-1)  # dS = A * (dA - delta)
        torch.bmm(g, k, out=dq[:, s:e])
        dk.baddbmm_(g.mT, q[:, s:e])
    return dq.mul_(scale), dk.mul_(scale), dv, new


class FusedRows(torch.autograd.Function):
    """The fused CPU attention kernel whose backward also updates `state` (see the module's docstring)."""

    @staticmethod
    def forward(ctx, q, k, v, scale: float, state: CheferState, layer: int):
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, scale=scale)[:2]
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale, ctx.state, ctx.layer = scale, state, layer
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        state = ctx.state
        r = None if ctx.layer in state.layers else state.r  # a later backward through it: gradients only
        dq, dk, dv, new = backward_rows(q[0], k[0], v[0], out[0], lse[0], dout[0].float(), ctx.scale, r)
        if new is not None:
            state.r = new
            state.layers.append(ctx.layer)
        return dq[None], dk[None], dv[None], None, None, None
