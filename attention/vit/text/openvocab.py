"""Open-vocabulary attention rules: training-free changes to the image tower's last block that make each patch
token answer "is this the prompt?" on its own. Forward only; the rule's attention is computed a chunk of rows at
a time from the last block's kernel inputs (q, k, v as the kernel got them: `capture`), so no N x N matrix is
kept. Then each patch's new token goes through the final norm, the pool's head and the projection as if it were
the pooled token (`Tower.embed_each`), and its cosine with each prompt is its map value.

    out = rule_rows("naclip", kernel, grid, prefix, RuleOptions())      # (H, Np, dv), patch rows only
    tokens = last_block_tokens(trunk, block_in, out, prefix, residual)  # (Np, D)

The rules, q k v of the last block (per head), s the kernel's scale, rows over the patch tokens:
- maskclip (Zhou, Loy & Dai, ECCV 2022): the attention replaced by the identity: each patch's own value.
- sclip (Wang, Mei & Yuille 2023): softmax(q q^T s) + softmax(k k^T s) (the sum of the two, as its code).
- clearclip (Lan et al., ECCV 2024): softmax(q q^T s).
- naclip (Hajimiri, Ben Ayed & Dolz, WACV 2025): softmax(k k^T s + W), W_ij = exp(-|p_i - p_j|^2 / (2 std^2))
  over the patches' grid positions (rows, cols; 0 for prefix keys); std 5 patches.
- proxy (ProxyCLIP's idea, Lan et al., ECCV 2024): the attention from another vision model's patch features x
  (unit length, on the same grid): softmax(gamma (x x^T - beta mean(x x^T))) with entries below 0 masked out,
  keys over the patch tokens only; gamma 3, beta 1.2. A row whose entries are all masked keeps its own patch.
Residual: the original MaskCLIP and SCLIP keep the last block's residual and FFN on the new attention's output;
ClearCLIP, NACLIP and ProxyCLIP drop both (the block's output is proj(A v)). `RuleOptions.residual` (None:
the paper's choice) overrides it for any rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attention.errors import InputError, UnsupportedModelError
from attention.vit.engine.request import FIND_BETA, FIND_GAMMA, FIND_STD

OPEN_RULES = ("maskclip", "sclip", "clearclip", "naclip", "proxy")
RESIDUAL = {"maskclip": True, "sclip": True, "clearclip": False, "naclip": False, "proxy": False}
CHUNK_BYTES = 32 << 20  # working memory of one chunk of rows (float32, all heads)


@dataclass(frozen=True)
class RuleOptions:
    """The rules' options, with the papers' defaults. residual: keep the last block's residual and FFN (None:
    the rule's paper, `RESIDUAL`); std: NACLIP's Gaussian, in patches; gamma, beta: the proxy rule's scale and
    shift of the similarity."""

    residual: bool | None = None
    std: float = FIND_STD.default
    gamma: float = FIND_GAMMA.default
    beta: float = FIND_BETA.default

    def keeps_residual(self, rule: str) -> bool:
        """Whether `rule` keeps the last block's residual and FFN under these options."""
        return RESIDUAL[rule] if self.residual is None else bool(self.residual)

    def summary(self, rule: str) -> dict:
        """JSON-ready: the options that matter to `rule`."""
        out: dict = {"residual": self.keeps_residual(rule)}
        if rule == "naclip":
            out["std"] = self.std
        if rule == "proxy":
            out.update(gamma=self.gamma, beta=self.beta)
        return out


def check_options(
    residual=None, std: float = FIND_STD.default, gamma: float = FIND_GAMMA.default, beta: float = FIND_BETA.default
) -> RuleOptions:
    """RuleOptions from a caller's values, checked once (`request.FIND_STD`, ...): InputError naming what is
    accepted."""

    if residual not in (None, True, False):
        words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False, "": None}
        key = str(residual).strip().lower()
        if key not in words:
            raise InputError(f"residual = {str(residual)[:40]!r} is not accepted; accepted: true, false or empty.")
        residual = words[key]
    return RuleOptions(residual, FIND_STD.check(std), FIND_GAMMA.check(gamma), FIND_BETA.check(beta))


def gaussian(grid: tuple[int, int], s: int, e: int, std: float, device=None) -> torch.Tensor:
    """NACLIP's neighbourhood bias for patch rows s..e-1 over all patches of a (gh, gw) grid, float32
    (e - s, gh * gw): exp(-squared grid distance / (2 std^2))."""
    gh, gw = grid
    idx = torch.arange(gh * gw, device=device)
    r, c = (idx // gw).float(), (idx % gw).float()
    d2 = (r[s:e, None] - r[None]) ** 2 + (c[s:e, None] - c[None]) ** 2
    return torch.exp(-d2 / (2 * std**2))


def _rows(n: int, heads: int, keys: int, chunk_bytes: int) -> int:
    return max(1, min(n, chunk_bytes // (4 * max(1, heads) * keys * 3)))


def rule_rows(
    rule: str,
    kernel: tuple,
    grid: tuple[int, int],
    prefix: int,
    opts: RuleOptions,
    proxy: torch.Tensor | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> torch.Tensor:
    """The last block's attention output under `rule` for the patch rows, float32 (H, Np, dv), Np = gh * gw.

    kernel: (q, k, v, mask, scale) of the last block, q k v (H, N, d) with N = prefix + Np; proxy: (Np, D) the
    proxy model's patch features on the same grid (rule "proxy" only)."""
    q, k, v, mask, scale = kernel
    if mask is not None:
        raise UnsupportedModelError(
            f"The rule {rule} replaces the last block's attention, which this model biases (an attention mask or "
            "relative positions); accepted: towers whose last block has plain attention (CLIP, SigLIP)."
        )
    q, k, v = q.float(), k.float(), v.float()
    H, N, _ = q.shape
    n = N - prefix
    if n != grid[0] * grid[1]:
        raise InputError(f"{N} tokens with {prefix} prefix do not make a {grid[0]} x {grid[1]} grid.")
    if rule == "maskclip":
        return v[:, prefix:].clone()
    if rule == "proxy":
        return _proxy_rows(proxy, v[:, prefix:], opts, chunk_bytes)
    if rule not in ("sclip", "clearclip", "naclip"):
        raise InputError(f"Rule {rule!r} is not accepted; accepted: {', '.join(OPEN_RULES)}.")
    out = torch.empty(H, n, v.shape[-1], device=v.device)
    step = _rows(n, H, N, chunk_bytes)
    for s in range(0, n, step):
        e = min(s + step, n)
        out[:, s:e] = attention_rows(rule, q, k, scale, grid, prefix, opts, s, e) @ v
    return out


def attention_rows(
    rule: str, q: torch.Tensor, k: torch.Tensor, scale: float, grid: tuple[int, int], prefix: int, opts, s: int, e: int
) -> torch.Tensor:
    """The attention of SCLIP, ClearCLIP or NACLIP (`rule`) for patch rows s..e-1 over all N keys, float32
    (H, e - s, N), from the last block's q, k (H, N, d) float32 and the kernel's scale."""
    i, j = prefix + s, prefix + e
    if rule == "sclip":
        return torch.softmax(q[:, i:j] @ q.mT * scale, -1).add_(torch.softmax(k[:, i:j] @ k.mT * scale, -1))
    if rule == "clearclip":
        return torch.softmax(q[:, i:j] @ q.mT * scale, -1)
    z = k[:, i:j] @ k.mT * scale  # naclip
    z[..., prefix:] += gaussian(grid, s, e, opts.std, z.device)
    return torch.softmax(z, -1)


def _proxy_rows(proxy: torch.Tensor | None, v: torch.Tensor, opts: RuleOptions, chunk_bytes: int) -> torch.Tensor:
    """softmax(gamma (x x^T - beta mean(x x^T)), entries < 0 masked) @ v over the patches, (H, Np, dv)."""
    n = v.shape[1]
    if proxy is None or proxy.shape[0] != n:
        got = "none" if proxy is None else f"{proxy.shape[0]} patches"
        raise InputError(f"The proxy rule needs the proxy model's features for {n} patches; got {got}.")
    x = F.normalize(proxy.float().to(v.device), dim=-1)
    out = torch.empty_like(v)
    step = _rows(n, 1, n, chunk_bytes)
    for s in range(0, n, step):
        e = min(s + step, n)
        out[:, s:e] = proxy_attention(x, opts, s, e)[None] @ v
    return out


def proxy_attention(x: torch.Tensor, opts: RuleOptions, s: int, e: int) -> torch.Tensor:
    """The proxy rule's attention of patch rows s..e-1 over the patches, float32 (e - s, Np), from the proxy
    model's unit patch features x (Np, D): softmax(gamma (x x^T - beta mean(x x^T))), entries below 0 masked;
    a row with every entry masked keeps its own patch."""
    n = x.shape[0]
    mean = (x.sum(0) ** 2).sum() / (n * n)  # the mean of x x^T without forming it
    z = opts.gamma * (x[s:e] @ x.T - opts.beta * mean)
    lost = z < 0
    empty = lost.all(-1)
    if empty.any():  # nothing left in the row: the patch keeps its own value
        own = torch.arange(s, e, device=z.device)[empty]
        lost[empty.nonzero()[:, 0], own] = False
        z[empty.nonzero()[:, 0], own] = 0.0
    return torch.softmax(z.masked_fill(lost, float("-inf")), -1)


def last_block_tokens(
    trunk: torch.nn.Module, block_in: torch.Tensor, out: torch.Tensor, prefix: int, residual: bool
) -> torch.Tensor:
    """The patch tokens the last block outputs when its attention output is `out` (H, Np, dv), after the final
    norm, (Np, D): proj(out) alone, or with residual the block's own residual and FFN on it (block_in (N, D),
    the block's input tokens)."""
    blk = trunk.blocks[-1]
    attn = blk.attn
    if (
        getattr(attn, "gate", None) is not None
        or not all(hasattr(attn, a) for a in ("proj", "num_heads"))
        or (residual and not all(hasattr(blk, a) for a in ("ls1", "norm2", "mlp", "ls2")))
    ):
        raise UnsupportedModelError(
            f"The last block ({type(blk).__name__}) is not read by the open-vocabulary rules; accepted: timm "
            "ViT blocks (CLIP, SigLIP, digit_clip)."
        )
    H, n, dv = out.shape
    p = next(attn.proj.parameters())
    y = out.transpose(0, 1).reshape(n, H * dv).to(p.dtype)
    y = attn.proj(getattr(attn, "norm", torch.nn.Identity())(y))
    if residual:
        z = block_in[prefix:].to(p.dtype) + blk.ls1(y)
        y = z + blk.ls2(blk.mlp(blk.norm2(z)))
    return trunk.norm(y)
