"""One patch's row of the last block's attention: the model's own (softmax(q k^T s)) beside the row an
open-vocabulary rule puts in its place, both the mean over heads: what the rule changed, as attention.

    pr = patch_rows(model, "cat.jpg", "naclip", (3, 4))     # the patch at grid row 3, column 4
    pr.own, pr.rule        # float32 (gh, gw): each row's weight on every patch (the prefix tokens' in pr.prefix)

MaskCLIP's row is the patch itself (its attention is the identity); the proxy rule's is over the patches only
(`openvocab.proxy_attention`); SCLIP's sums two softmax rows, so it adds up to 2. One forward without gradients.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from PIL import Image

from attention.errors import InputError, UnsupportedModelError
from attention.images import MAX_TOKENS, ImageSource
from attention.vit.engine.capture import recording
from attention.vit.engine.preprocess import prepare
from attention.vit.engine.request import RESOLUTION
from attention.vit.text.dense import LastKernel
from attention.vit.text.openvocab import OPEN_RULES, RuleOptions, attention_rows, proxy_attention
from attention.vit.text.proxy import proxy_features
from attention.vit.text.tower import ready, text_model_of


@dataclass(frozen=True)
class PatchRows:
    """The last block's attention rows of one patch: the model's own and the rule's, each the mean over heads
    of its weights on the patches, float32 (gh, gw); prefix: (own, rule) weight on the prefix tokens."""

    rule_name: str
    patch: tuple[int, int]
    own: torch.Tensor
    rule: torch.Tensor
    prefix: tuple[float, float]
    image: Image.Image  # the shown image the grid aligns to
    seconds: float = 0.0

    @property
    def grid(self) -> tuple[int, int]:
        return tuple(self.own.shape)

    @property
    def nbytes(self) -> int:
        """Bytes held (both rows and the shown image), for a server's bounded store."""
        return 2 * self.own.numel() * 4 + self.image.width * self.image.height * 3


def rows_of(kernel: tuple, grid: tuple[int, int], prefix: int, rule: str, opts: RuleOptions, index: int, proxy=None):
    """(own (N,), rule's (N,)) rows, mean over heads, of patch `index` (0 .. gh * gw - 1) from the last block's
    kernel inputs (q, k, v (H, N, d), mask, scale); proxy: the proxy model's (Np, D) features (rule "proxy")."""
    q, k, _, mask, scale = kernel
    if mask is not None:
        raise UnsupportedModelError(
            "The last block's attention is biased here (an attention mask or relative positions), which the rules "
            "replace; accepted: towers whose last block has plain attention (CLIP, SigLIP)."
        )
    q, k = q.float(), k.float()
    i = prefix + index
    own = torch.softmax(q[:, i : i + 1] @ k.mT * scale, -1).mean(0)[0]
    if rule == "maskclip":
        new = torch.zeros_like(own)
        new[i] = 1.0
    elif rule == "proxy":
        new = torch.zeros_like(own)
        new[prefix:] = proxy_attention(F.normalize(proxy.float().to(q.device), dim=-1), opts, index, index + 1)[0]
    else:
        new = attention_rows(rule, q, k, scale, grid, prefix, opts, index, index + 1).mean(0)[0]
    return own, new


def patch_rows(
    model: torch.nn.Module,
    image: ImageSource,
    rule: str,
    patch: tuple[int, int],
    *,
    options: RuleOptions | None = None,
    proxy: torch.nn.Module | None = None,
    resolution: int | str | None = RESOLUTION,
    max_tokens: int = MAX_TOKENS,
    max_gflop: float | None = None,
) -> PatchRows:
    """The last block's attention row of the patch at grid (row, col) `patch` of `image` for `model` (a CLIP or
    SigLIP whose image tower the engine reads, or what `load_vit` returns for one), the model's own beside the
    open-vocabulary `rule`'s (one of OPEN_RULES; the proxy rule with a `proxy` vision model). resolution,
    max_tokens, max_gflop: as `text_relevance` (priced as a forward). InputError for another rule, a patch off
    the grid, or the proxy rule without a proxy model."""
    if rule not in OPEN_RULES:
        raise InputError(f"Rule {rule!r} has no attention row; accepted: {', '.join(OPEN_RULES)}.")
    if rule == "proxy" and proxy is None:
        raise InputError("The proxy rule needs a proxy model (a DINO or DINOv2, `proxy=`); none was given.")
    tower = ready(text_model_of(model))
    trunk = tower.trunk
    x, shown, grid = prepare(trunk, image, resolution, max_tokens, max_gflop)
    r, c = (int(v) for v in patch)
    if not (0 <= r < grid[0] and 0 <= c < grid[1]):
        raise InputError(f"Patch ({r}, {c}) is off the {grid[0]} x {grid[1]} grid; accepted: rows 0 to "
                         f"{grid[0] - 1}, columns 0 to {grid[1] - 1}.")  # fmt: skip
    t0 = time.perf_counter()
    rec = LastKernel(len(trunk.blocks) - 1)
    p = next(trunk.parameters())
    with torch.inference_mode(), recording(trunk, rec):
        trunk.forward_features(x.to(p.device, p.dtype))
    feats = proxy_features(proxy, shown, grid) if rule == "proxy" else None
    T = tower.num_prefix_tokens
    with torch.inference_mode():
        own, new = rows_of(rec.kernel, grid, T, rule, options or RuleOptions(), r * grid[1] + c, feats)
    own, new = own.cpu(), new.cpu()
    return PatchRows(
        rule, (r, c), own[T:].reshape(grid), new[T:].reshape(grid), (float(own[:T].sum()), float(new[:T].sum())),
        shown, time.perf_counter() - t0,
    )  # fmt: skip
