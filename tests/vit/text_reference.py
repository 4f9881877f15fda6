"""Text relevance written from the papers with full N x N matrices and autograd on the model's own explicit
attention: the oracle for `attention.vit.text` (never our code).

The model is copied and runs with timm's fused attention off (blocks and the attention-pooling head), so each
attention's explicit softmax is in the graph; a TorchFunctionMode keeps every softmax output (A, full
matrix), and autograd gives dS/dA from the image-text logit S = scale * cos(encode_image(x), t) (+ bias),
open_clip's own encode_image.

Chefer, Gur & Wolf, ICCV 2021: R = I; per block R = R + mean_h((dA * A)^+) @ R; the pooled row: R[0]
(class token), the mean of the patch rows (mean pool), or, for an attention-pooling head (one query over
the tokens, the generic rule's cross-attention) mean_h((dA_pool * A_pool)^+) @ R.
LeGrad (Bousselham et al. 2024; WalBouss/LeGrad `compute_legrad_clip`, `compute_legrad_siglip`): for each of
the last K blocks, s_l = cos(t, pooled(block l's output)), pooled as LeGrad does (CLIP: ln_post(mean of all
tokens) then the projection; SigLIP: the attention-pooling head on the block's tokens); dS/dA at the
attention it reads (CLIP: block l's, mean over heads and rows, prefix columns dropped; SigLIP: the pool's on
block l's tokens, mean over heads); clamp(min=0); summed over layers; min-max.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode


class _Softmaxes(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.kept = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.Tensor.softmax, torch.softmax, F.softmax):
            self.kept.append(out)
        return out


def explicit(clip):
    """A float32 copy of `clip` whose attention (blocks, pooling head) computes its softmax explicitly."""
    ref = copy.deepcopy(clip).float().eval()
    trunk = ref.visual.trunk
    for blk in trunk.blocks:
        blk.attn.fused_attn = False
    if getattr(trunk, "attn_pool", None) is not None:
        trunk.attn_pool.fused_attn = False
    return ref


def logit(ref, emb, t):
    s = ref.logit_scale.exp() * (F.normalize(emb, dim=-1) @ t)
    return s + ref.logit_bias if getattr(ref, "logit_bias", None) is not None else s


def chefer(clip, x, t, inplace: bool = False):
    """Chefer et al.'s pooled row (N,) for unit text embedding t (E,), and the logit, float64 / float.
    inplace: `clip` is already `explicit(...)`'s (a bench's: no copy inside the measured call)."""
    ref = clip if inplace else explicit(clip)
    trunk = ref.visual.trunk
    with torch.enable_grad(), _Softmaxes() as mode:
        s = logit(ref, ref.encode_image(x.float().clone().requires_grad_(True))[0], t)
        grads = torch.autograd.grad(s, mode.kept)
    A = [a[0].detach() for a in mode.kept]
    G = [g[0] for g in grads]
    L = len(trunk.blocks)
    N = A[0].shape[-1]
    R = torch.eye(N, dtype=torch.float64, device=A[0].device)
    for a, g in zip(A[:L], G[:L]):
        R = R + (g * a).clamp(min=0).mean(0).double() @ R
    T = trunk.num_prefix_tokens
    if getattr(trunk, "attn_pool", None) is not None:
        cam = (G[L] * A[L]).clamp(min=0).mean(0).double()  # (1, N - T): the pool reads the patch tokens
        row = cam @ R[T:] if cam.shape[-1] == N - T else cam @ R
        return row[0], float(s.detach())
    if trunk.global_pool == "avg":
        return R[T:].mean(0), float(s.detach())
    return R[0], float(s.detach())


def legrad(clip, x, t, layers):
    """LeGrad's map over the patch tokens (N - T,), min-max scaled, float64."""
    ref = explicit(clip)
    trunk = ref.visual.trunk
    L = len(trunk.blocks)
    T = trunk.num_prefix_tokens
    outs = {}
    for i, blk in enumerate(trunk.blocks):
        blk.register_forward_hook(lambda m, a, o, i=i: outs.__setitem__(i, o))
    total = 0
    with torch.enable_grad(), _Softmaxes() as mode:
        ref.encode_image(x.float().clone().requires_grad_(True))
        A = list(mode.kept[:L])
        for layer in range(L - layers, L):
            z = outs[layer]
            if getattr(trunk, "attn_pool", None) is not None:
                n = len(mode.kept)
                pooled = trunk.attn_pool(z[:, T:])
                a = mode.kept[n]
                s = F.normalize(pooled, dim=-1)[0] @ t
                (g,) = torch.autograd.grad(s, [a])
                total = total + g.clamp(min=0).mean(1)[0, 0].double()
            else:
                feat = ref.visual.head(trunk.head(trunk.fc_norm(trunk.norm(z.mean(1)))))  # ln_post(mean) @ proj
                s = F.normalize(feat, dim=-1)[0] @ t
                (g,) = torch.autograd.grad(s, [A[layer]])
                total = total + g.clamp(min=0).mean(1).mean(1)[0, T:].double()
    return (total - total.min()) / (total.max() - total.min())


def similarity(clip, x, t):
    """Each patch's own logit: the model's own head with that patch in the pooled token's place (the class
    token's; for a pool over the patches, the sequence with that one patch), (N - T,) float64."""
    ref = explicit(clip)
    trunk = ref.visual.trunk
    T = trunk.num_prefix_tokens
    with torch.no_grad():
        tokens = trunk.forward_features(x.float())
        out = []
        for i in range(T, tokens.shape[1]):
            if trunk.global_pool in ("map", "avg"):  # the pool reads the one patch
                seq = torch.cat([tokens[:, :T], tokens[:, i : i + 1]], 1)  # the pool skips the prefix
            else:
                seq = tokens.clone()
                seq[:, 0] = tokens[:, i]
            emb = ref.visual.head(trunk.forward_head(seq))[0]
            out.append(float(logit(ref, emb, t)))
    return torch.tensor(out, dtype=torch.float64)
