"""Class relevance written from the papers' algorithms with full N x N matrices and autograd: the oracle
for `attention.vit.relevance` (never our code).

The model runs with timm's fused attention switched off, so the explicit softmax is in the graph; as both
originals do, the attention A is taken after the softmax (at `attn_drop`, the module vit-explain hooks)
and its gradient is autograd's, from the target's logit.

Chefer, Gur & Wolf, ICCV 2021 (hila-chefer/Transformer-MM-Explainability, the ViT notebook): per layer
cam = mean over heads of clamp(grad * A, min=0); R = R + cam @ R from R = I; the map is R[0, prefix:].
jacobgil/vit-explain `grad_rollout`: per layer (A * grad).mean over heads, negatives zeroed, the lowest
int(N * N * discard_ratio) entries of the flattened matrix zeroed (`topk(..., largest=False)`, index 0
not spared), (A + I) / 2, rows renormalised (with keepdim, the fix of its issue #16), result = a @ result;
each layer's attention paired with its own gradient (its issue #6).
"""

from __future__ import annotations

import copy

import torch


def full_attention_and_grads(model: torch.nn.Module, x: torch.Tensor, target: int | None = None, inplace=False):
    """Every layer's A and dLogit/dA, float32 (L, H, N, N) each, and (logits (C,), target).
    The model is copied (inplace=False) or switched to unfused attention itself (inplace, a bench's)."""
    ref = model if inplace else copy.deepcopy(model).float().eval()
    kept = []

    def keep(module, args, out):
        out.retain_grad()
        kept.append(out)

    for blk in ref.blocks:
        blk.attn.fused_attn = False
        blk.attn.attn_drop.register_forward_hook(keep)
    with torch.inference_mode(False), torch.enable_grad():
        out = ref(x.float().clone().requires_grad_(True))[0]
        t = int(out.argmax()) if target is None else target
        out[t].backward()
    A = torch.stack([a[0].detach() for a in kept])
    G = torch.stack([a.grad[0] for a in kept])
    return A, G, out.detach(), t


def chefer_row(A: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """Chefer et al.'s R (N x N, float64), the class token's row (N,)."""
    N = A.shape[-1]
    R = torch.eye(N, dtype=torch.float64)
    for a, g in zip(A, G):
        cam = (g * a).clamp(min=0).mean(0).double()
        R = R + cam @ R
    return R[0]


def grad_rollout_row(A: torch.Tensor, G: torch.Tensor, discard_ratio: float) -> torch.Tensor:
    """vit-explain's grad_rollout (layers paired, rows renormalised with keepdim), the class token's row."""
    N = A.shape[-1]
    result = torch.eye(N, dtype=torch.float64)
    for a, g in zip(A, G):
        fused = (a * g).mean(0)
        fused[fused < 0] = 0
        flat = fused.view(-1)
        _, indices = flat.topk(int(flat.numel() * discard_ratio), -1, False)
        flat[indices] = 0
        eye = torch.eye(N)
        w = ((fused + 1.0 * eye) / 2).double()
        w = w / w.sum(dim=-1, keepdim=True)
        result = w @ result
    return result[0]


def hf_attention_and_grads(model: torch.nn.Module, x: torch.Tensor, target: int | None = None):
    """A transformers classifier's every layer's A and dLogit/dA, float32 (L, H, N, N) each, and (logits (C,),
    target): a float copy run eagerly with `output_attentions=True` (its softmax after dropout, the tensor its
    `@ v` uses), gradients by autograd from the target's logit; the caller's model is left as it was."""
    import inspect

    ref = copy.deepcopy(model).float().eval()
    ref.set_attn_implementation("eager")
    kw = (
        {"interpolate_pos_encoding": True}
        if "interpolate_pos_encoding" in inspect.signature(ref.forward).parameters
        else {}
    )
    with torch.inference_mode(False), torch.enable_grad():
        out = ref(pixel_values=x.float().clone(), output_attentions=True, **kw)
        for a in out.attentions:
            a.retain_grad()
        logits = out.logits[0]
        t = int(logits.argmax()) if target is None else target
        logits[t].backward()
    A = torch.stack([a[0].detach() for a in out.attentions])
    G = torch.stack([a.grad[0] for a in out.attentions])
    return A, G, logits.detach(), t
