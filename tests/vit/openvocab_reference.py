"""The open-vocabulary rules written from their papers with full N x N matrices, on the model's own modules: the
oracle for `attention.vit.text.openvocab` / `dense` (never our code).

The tower runs its own modules step by step (patch embedding, positions, the first L-1 blocks); the last
block's q, k, v come from its own qkv projection; the rule's whole attention matrix is formed, then its output
goes through the block's proj (and, with residual, the block's residual and FFN), the final norm, and each patch
token alone through the head (fc_norm, the trunk's head, open_clip's projection; SigLIP's attention-pooling head
on a one-token sequence). The map: cos(patch embedding, prompt).

MaskCLIP (Zhou et al. 2022): A = I. SCLIP (Wang et al. 2023): A = softmax(qq^T s) + softmax(kk^T s).
ClearCLIP (Lan et al. 2024): A = softmax(qq^T s). NACLIP (Hajimiri et al. 2025): A = softmax(kk^T s + W),
W the Gaussian of the grid distance between patches (std in patches), zero where the class token is involved.
ProxyCLIP (Lan et al. 2024): over patches only, A = softmax(gamma (S - beta mean(S))) with S = x x^T (x unit
proxy features) and the entries below 0 set to -inf.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

RESIDUAL = {"maskclip": True, "sclip": True, "clearclip": False, "naclip": False, "proxy": False}


def _last_input(trunk, x):
    h = trunk.patch_embed(x)
    h = trunk._pos_embed(h)
    h = trunk.norm_pre(trunk.patch_drop(h))
    for blk in trunk.blocks[:-1]:
        h = blk(h)
    return h[0]


def neighbourhood(gh: int, gw: int, std: float, prefix: int) -> torch.Tensor:
    """(N, N) NACLIP's additive bias: exp(-d^2 / (2 std^2)) between patches, 0 in the prefix rows and columns."""
    rr, cc = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
    pos = np.stack([rr.ravel(), cc.ravel()], 1).astype(np.float64)
    d2 = ((pos[:, None, :] - pos[None, :, :]) ** 2).sum(-1)
    w = np.zeros((prefix + gh * gw,) * 2)
    w[prefix:, prefix:] = np.exp(-d2 / (2 * std * std))
    return torch.from_numpy(w).float()


def _qkv(trunk, h):
    blk = trunk.blocks[-1]
    a = blk.attn
    N, D = h.shape
    H = a.num_heads
    qkv = a.qkv(blk.norm1(h)).reshape(N, 3, H, D // H).permute(1, 2, 0, 3)
    return a.q_norm(qkv[0]), a.k_norm(qkv[1]), qkv[2], (D // H) ** -0.5


def attention(clip, x, rule, *, std=5.0, gamma=3.0, beta=1.2, proxy=None) -> torch.Tensor:
    """The last block's whole attention under `rule`, or the model's own ("own": softmax(q k^T s)): (H, N, N);
    the proxy rule's (1, Np, Np), over the patches only."""
    trunk = clip.visual.trunk
    T = trunk.num_prefix_tokens
    gh, gw = x.shape[2] // trunk.patch_embed.patch_size[0], x.shape[3] // trunk.patch_embed.patch_size[1]
    with torch.no_grad():
        q, k, _, s = _qkv(trunk, _last_input(trunk, x))
        H, N, _ = q.shape
        if rule == "proxy":
            xp = F.normalize(proxy, dim=-1)
            S = xp @ xp.T
            Z = gamma * (S - beta * S.mean())
            return torch.softmax(Z.masked_fill(Z < 0, float("-inf")), -1)[None]
        if rule == "own":
            return torch.softmax(q @ k.mT * s, -1)
        if rule == "maskclip":
            return torch.eye(N).expand(H, N, N)
        if rule == "sclip":
            return torch.softmax(q @ q.mT * s, -1) + torch.softmax(k @ k.mT * s, -1)
        if rule == "clearclip":
            return torch.softmax(q @ q.mT * s, -1)
        return torch.softmax(k @ k.mT * s + neighbourhood(gh, gw, std, T), -1)  # naclip


def maps(clip, x, text, rule, *, std=5.0, gamma=3.0, beta=1.2, residual=None, proxy=None) -> torch.Tensor:
    """(P, Np) the cosine of each patch's embedding under `rule` with each unit prompt embedding text (P, E)."""
    trunk = clip.visual.trunk
    T = trunk.num_prefix_tokens
    A = attention(clip, x, rule, std=std, gamma=gamma, beta=beta, proxy=proxy)
    with torch.no_grad():
        h = _last_input(trunk, x)
        blk = trunk.blocks[-1]
        a = blk.attn
        _, _, v, _ = _qkv(trunk, h)
        N, D = h.shape
        if rule == "proxy":
            o = (A @ v[:, T:]).transpose(0, 1).reshape(N - T, D)
        else:
            o = (A @ v).transpose(0, 1).reshape(N, D)[T:]
        o = a.proj(o)
        keep = RESIDUAL[rule] if residual is None else residual
        if keep:
            z = h[T:] + blk.ls1(o)
            o = z + blk.ls2(blk.mlp(blk.norm2(z)))
        z = trunk.norm(o)
        if getattr(trunk, "attn_pool", None) is not None:
            z = trunk.attn_pool(z[:, None])
        emb = clip.visual.head(trunk.head(trunk.fc_norm(z)))
        return F.normalize(emb, dim=-1) @ text.T.float()
