"""How one attention module's computation is read, whatever library wrote it: the torch calls its
forward makes, seen by a `TorchFunctionMode` entered for that forward only (`capture`).

Three shapes of code, each read exactly, none changed:
- fused: one `F.scaled_dot_product_attention(q, k, v, attn_mask)` call (timm, transformers sdpa,
  DINOv3): q and k as the kernel gets them (`kernel_args`).
- explicit: `scores = q @ k^T` (4-D), then optionally `* scale` and `+ mask` (or `masked_fill`),
  `softmax`, then `@ v` (timm's unfused path under TIMM_FUSED_ATTN=0, transformers eager, DINO's and
  DINOv2's own classes): `Explicit` follows the scores tensor through those calls and hands
  (q, k, v, mask, scale) over at `@ v`, with its output. The library builds its N x N there (its own
  choice); the engine keeps only rows.
- `F.multi_head_attention_forward` (`nn.MultiheadAttention`: torchvision, open_clip, SigLIP's pool):
  q, k, v recomputed exactly from its input and `in_proj` weights (`mha_kernel`) and, when the caller
  asked for no weights, the output computed from them by the fused kernel and the output projection
  (the same computation the module's own path makes), so its output is in the autograd graph.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SDPA = torch._C._nn.scaled_dot_product_attention  # what the mode sees for F.scaled_dot_product_attention
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
Kernel = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, float]

T = torch.Tensor
MATMUL = {torch.matmul, T.matmul, T.__matmul__}
MUL = {torch.mul, T.mul, T.__mul__, T.__rmul__, T.mul_, T.__imul__}
ADD = {torch.add, T.add, T.__add__, T.__radd__, T.add_, T.__iadd__}
SOFTMAX = {torch.softmax, F.softmax, T.softmax}
FOLLOW = {T.to, T.float, T.type_as, T.contiguous, F.dropout, torch.dropout, T.clone}  # same values
MASKED_FILL = {T.masked_fill, T.masked_fill_}
MHA = F.multi_head_attention_forward


def additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A bool mask (True = attend) as 0/-inf floats; a float mask as is."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def kernel_args(args: tuple, kwargs: dict) -> Kernel:
    """(q, k, v, additive mask or None, scale) of a `scaled_dot_product_attention` call.
    Bool masks (True = attend) and is_causal become 0/-inf float masks; grouped k/v heads
    (enable_gqa) are repeated to the query's heads, as the kernel does."""
    a = dict(zip(_SDPA_ARGS, args, strict=False)) | kwargs
    q, k, v = a["query"], a["key"], a["value"]
    mask = additive(a.get("attn_mask"), q.dtype)
    if a.get("is_causal"):
        nq, nk = q.shape[-2], k.shape[-2]
        causal = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril()
        mask = torch.zeros(nq, nk, dtype=q.dtype, device=q.device).masked_fill(~causal, float("-inf"))
    if a.get("enable_gqa") and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
    scale = a.get("scale")
    return q, k, v, mask, float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1])


def dropout(args: tuple, kwargs: dict) -> float:
    """The dropout probability of a `scaled_dot_product_attention` call (0.0 when not given)."""
    return float((dict(zip(_SDPA_ARGS, args, strict=False)) | kwargs).get("dropout_p") or 0.0)


_MHA_ARGS = (
    "query key value embed_dim_to_check num_heads in_proj_weight in_proj_bias bias_k bias_v add_zero_attn "
    "dropout_p out_proj_weight out_proj_bias training key_padding_mask need_weights attn_mask "
    "use_separate_proj_weight q_proj_weight k_proj_weight v_proj_weight static_k static_v "
    "average_attn_weights is_causal"
).split()


def mha_kernel(args: tuple, kwargs: dict) -> tuple[Kernel, dict] | None:
    """(q, k, v (B, H, N, d), additive mask or None, scale) of an `F.multi_head_attention_forward`
    call, recomputed from its inputs and projection weights exactly as its own code does; with the
    call's arguments by name. None for what it cannot read (bias_k/v, zero attention, static k/v,
    unbatched input): the caller refuses."""
    a = dict(zip(_MHA_ARGS, args, strict=False)) | kwargs
    query, key, value = a["query"], a["key"], a["value"]
    if query.dim() != 3 or a.get("bias_k") is not None or a.get("add_zero_attn") or a.get("static_k") is not None:
        return None
    Lq, B, E = query.shape
    H = int(a["num_heads"])
    d = E // H
    if a.get("use_separate_proj_weight"):
        w = (a["q_proj_weight"], a["k_proj_weight"], a["v_proj_weight"])
    else:
        w = a["in_proj_weight"].chunk(3)
    b = a["in_proj_bias"].chunk(3) if a.get("in_proj_bias") is not None else (None, None, None)
    q, k, v = (F.linear(t, wi, bi) for t, wi, bi in zip((query, key, value), w, b, strict=True))

    def heads(t):  # (L, B, E) -> (B, H, L, d)
        return t.reshape(t.shape[0], B, H, d).permute(1, 2, 0, 3)

    q, k, v = heads(q), heads(k), heads(v)
    mask = additive(a.get("attn_mask"), q.dtype)
    if mask is not None:
        mask = mask.reshape(B, H, Lq, k.shape[-2]) if mask.dim() == 3 else mask
    kpm = a.get("key_padding_mask")
    if kpm is not None:
        kpm = additive(~kpm if kpm.dtype == torch.bool else -kpm, q.dtype) if kpm.dtype == torch.bool else kpm
        kpm = kpm.reshape(B, 1, 1, k.shape[-2])
        mask = kpm if mask is None else mask + kpm
    if a.get("is_causal") and mask is None:
        return None
    return (q, k, v, mask, 1.0 / math.sqrt(d)), a


def mha_output(kernel: Kernel, a: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-head output (B, H, Lq, d), the call's output (Lq, B, E)) from recomputed q, k, v: the
    fused kernel then the output projection, as `F.multi_head_attention_forward` computes it."""
    q, k, v, mask, _ = kernel
    o = SDPA(q, k, v, mask, 0.0, False)
    B, H, Lq, d = o.shape
    out = F.linear(o.permute(2, 0, 1, 3).reshape(Lq, B, H * d), a["out_proj_weight"], a["out_proj_bias"])
    return o, out


class Explicit:
    """Follows one explicit attention computation through the calls of a module's forward:
    scores = q @ k^T -> [* scale] [+ mask] -> softmax -> [dropout, casts] -> @ v. `step` is handed
    every call with its result; it returns (q, k, v, mask, scale, out) when `@ v` completes one,
    else None. A call on the scores it cannot account for (another op of the same shape) makes
    it give up for this forward (`lost`): nothing is handed over, and `capture` refuses the module."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.t = None  # the tensor followed
        self.state = None  # "scores" or "weights"
        self.q = self.k = self.mask = None
        self.scale = 1.0
        self.lost = False
        self.pre = None  # (q * s, q, s): the last 4-D tensor scaled by a number (timm, DINOv2 scale q first)

    def step(self, func, args, kwargs, out):
        if not args:
            return None
        a0 = args[0]
        if self.state is None:
            if func in MUL and len(args) == 2 and isinstance(a0, torch.Tensor) and a0.dim() == 4:
                if isinstance(args[1], (int, float)):
                    self.pre = (out, a0, float(args[1]))
            elif func in MATMUL and len(args) == 2 and _is_qk(a0, args[1], out):
                self.q, self.k, self.t, self.state = a0, args[1].transpose(-2, -1), out, "scores"
                if self.pre is not None and self.pre[0] is a0:  # q scaled before q @ k^T: q and its scale
                    self.q, self.scale = self.pre[1], self.pre[2]
                self.pre = None
            return None
        others = args[1:] + tuple(kwargs.values())
        touched = a0 is self.t or any(o is self.t for o in others)
        if not touched:
            return None
        if self.state == "weights" and func in MATMUL and a0 is self.t and len(args) == 2:
            v, q, k, mask, scale = args[1], self.q, self.k, self.mask, self.scale
            self.reset()
            return q, k, v, mask, scale, out
        if func in FOLLOW and a0 is self.t:
            self.t = out
        elif self.state == "scores" and func in MUL and len(args) == 2:
            other = args[1] if a0 is self.t else a0
            if isinstance(other, torch.Tensor) and other.numel() != 1:
                return self._lose()
            self.scale *= float(other)
            if self.mask is not None:
                self.mask = self.mask * float(other)
            self.t = out
        elif self.state == "scores" and func in ADD and len(args) == 2 and not kwargs.get("alpha"):
            other = args[1] if a0 is self.t else a0
            self.mask = other if self.mask is None else self.mask + other
            self.t = out
        elif self.state == "scores" and func in MASKED_FILL and a0 is self.t:
            fill = torch.zeros(args[1].shape, dtype=out.dtype, device=out.device).masked_fill(args[1], args[2])
            self.mask = fill if self.mask is None else self.mask + fill
            self.t = out
        elif self.state == "scores" and func in SOFTMAX and a0 is self.t:
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if dim not in (-1, 3):
                return self._lose()
            self.t, self.state = out, "weights"
        elif isinstance(out, torch.Tensor) and out.shape == self.t.shape:
            return self._lose()
        return None

    def _lose(self):
        self.reset()
        self.lost = True
        return None


def _is_qk(a, b, out) -> bool:
    """a (B, H, Nq, d) @ b (B, H, d, N) with d small against N: the scores of an attention."""
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and isinstance(out, torch.Tensor)
        and a.dim() == 4
        and b.dim() == 4
        and a.shape[-1] == b.shape[-2]
        and out.shape[-1] == b.shape[-1]
    )
