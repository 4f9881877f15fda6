"""The open-vocabulary rules' pass: one forward without gradients (fused attention untouched), the last
block's kernel inputs and its input tokens kept, then each rule's new last block for the patch rows
(`openvocab`), each patch through the final norm and head, its cosine with each prompt.

    logits, maps, sim = open_vocabulary_rows(clip, tower, x, text, ("clearclip", "naclip"), RuleOptions())
    maps["clearclip"]      # (P, Np) float32: cosine of each patch's embedding with each prompt

Memory: the last block's q, k, v and input (O(N d)) and a chunk of one rule's attention rows at a time.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attention.vit.engine.capture import Recorder, recording
from attention.vit.text.openvocab import CHUNK_BYTES, RuleOptions, last_block_tokens, rule_rows
from attention.vit.text.record import last_block
from attention.vit.text.tower import Tower


class LastKernel(Recorder):
    """The kernel inputs (q, k, v (H, N, d), additive mask or None, scale) of one layer, first sample."""

    def __init__(self, layer: int):
        self.layer, self.kernel = layer, None

    def on_kernel(self, layer: int, q, k, v, mask, scale: float) -> None:
        if layer == self.layer:
            m = None if mask is None else mask.detach()
            self.kernel = (q[0].detach(), k[0].detach(), v[0].detach(), m, float(scale))


def logits_of(emb: torch.Tensor, text: torch.Tensor, scale: torch.Tensor, bias) -> torch.Tensor:
    """(B, E) image embeddings, (P, E) unit text embeddings -> (B, P): scale * cosine (+ bias)."""
    out = scale * (F.normalize(emb.float(), dim=-1) @ text.T)
    return out if bias is None else out + bias


def scale_bias(clip: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The model's logit scale (exp of its parameter) and bias (SigLIP; None for CLIP), float32."""
    scale = clip.logit_scale.detach().float().exp()
    bias = None if getattr(clip, "logit_bias", None) is None else clip.logit_bias.detach().float()
    return scale, bias


def open_vocabulary_rows(
    clip: torch.nn.Module,
    tower: Tower,
    x: torch.Tensor,
    text: torch.Tensor,
    rules: tuple[str, ...],
    opts: RuleOptions,
    proxy: torch.Tensor | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """The forward-only rules on a preprocessed x (1, C, H, W) and unit text embeddings (P, E).

    Returns (logits (P,), {rule: (P, Np) cosine of each patch with each prompt}, similarity (P, Np): each final
    patch token's own logit), float32 on CPU. proxy: (Np, D) the proxy model's patch features (rule "proxy")."""
    trunk = tower.trunk
    param = next(trunk.parameters())
    text = text.float().to(param.device)
    scale, bias = scale_bias(clip)
    prefix = tower.num_prefix_tokens
    gh, gw = x.shape[2] // trunk.patch_embed.patch_size[0], x.shape[3] // trunk.patch_embed.patch_size[1]
    rec = LastKernel(len(trunk.blocks) - 1)
    with torch.inference_mode():
        with recording(trunk, rec), last_block(trunk) as last:
            tokens = trunk.forward_features(x.to(param.device, param.dtype))
        logits = logits_of(tower.embed(tokens), text, scale, bias)[0]
        sim = logits_of(tower.embed_each(tokens[0, prefix:]), text, scale, bias).T
        maps = {}
        for rule in rules:
            out = rule_rows(rule, rec.kernel, (gh, gw), prefix, opts, proxy, chunk_bytes)
            z = last_block_tokens(trunk, last["in"][0], out, prefix, opts.keeps_residual(rule))
            maps[rule] = (F.normalize(tower.embed_each(z).float(), dim=-1) @ text.T).T.cpu()
    return logits.float().cpu(), maps, sim.float().cpu()
