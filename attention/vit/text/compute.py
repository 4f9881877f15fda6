"""The gradient rules of text relevance: for each prompt, which patches make the image match the prompt by the
score the model itself uses (CLIP: the scaled cosine logit; SigLIP: the sigmoid's logit, bias included).

    logits, chefer, legrad, sim = text_relevance_rows(clip, tower, x, text)   # (P,), 3 x (P, N)

(`find.text_relevance` is the entry point: the open-vocabulary rules are `dense`'s.)

One forward with fused attention untouched (the engine's kernel hook keeps each layer's q, k, v, mask and
its output), one backward for all prompts at once (autograd's batched grad over the prompts' logits; for one
prompt a plain backward) to every kernel output; then, from the top down, rows of A and of P dA = dO V^T a
chunk at a time (`rows`).
LeGrad's per-layer scores reach only their own layer's tail and head (a short backward each, its last
`legrad_layers` blocks). Memory: O(layers x N x d + P x layers x N x d); no N x N matrix per layer.

Chefer et al.: R = I; per layer R <- R + mean_h((dA * A)^+) R; the map is the pooled row of R: the class
token's ("token"), the patch mean's ("avg"), or, for an attention-pooling head ("map", SigLIP), its own
cross-attention's cam (the generic rule's R^{qi} = mean_h((dA * A)^+) R^{ii}).
LeGrad (WalBouss/LeGrad `LeWrapper`): for each of the last `legrad_layers` blocks l, the score s_l of that
block's tokens pooled as LeGrad pools them (CLIP: the mean of all tokens, final norm, head; an attention-pooling
head: that head on the block's tokens), its gradient dA_l at the attention LeGrad reads (CLIP: block l's
self-attention, mean over heads and query rows; a pooling head: that head's attention on block l's tokens,
mean over heads), positive part, summed over layers, min-max scaled per prompt. LeGrad's optional SigLIP
"correction" (zeroing where an empty prompt's map is high) is not applied.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attention.errors import InputError
from attention.vit.engine.capture import recording
from attention.vit.text.dense import logits_of, scale_bias
from attention.vit.text.prompts import tokenize
from attention.vit.text.record import Pass, last_block
from attention.vit.text.rows import CHUNK_BYTES, PromptRows, batched_grad
from attention.vit.text.tower import Tower

LEGRAD_LAYERS = 2  # LeGrad's default (`LeWrapper(model, layer_index=-2)`): its last two blocks


def text_relevance_rows(
    clip: torch.nn.Module,
    tower: Tower,
    x: torch.Tensor,
    text: torch.Tensor,
    *,
    legrad_layers: int = LEGRAD_LAYERS,
    chunk_bytes: int = CHUNK_BYTES,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The engine of `text_relevance` on a preprocessed x (1, C, H, W) and unit text embeddings (P, E).

    Returns (logits (P,), chefer (P, N), legrad (P, N), similarity (P, N)) float32 on CPU, over all N tokens
    (prefix tokens first; LeGrad's and the similarity's prefix entries are 0)."""
    trunk = tower.trunk
    n_blocks = len(trunk.blocks)
    if not 1 <= legrad_layers <= n_blocks:
        raise InputError(f"legrad_layers = {legrad_layers} is out of range; accepted: 1 to {n_blocks}.")
    param = next(trunk.parameters())
    text = text.float().to(param.device)
    scale, bias = scale_bias(clip)
    pooled = tower.pool == "map"
    P = len(text)
    start = None if pooled or P > 1 else (lambda n: tower.start_row(n, param.device))
    rec = Pass(n_blocks + pooled, n_blocks, start)
    with torch.inference_mode(False), torch.enable_grad():
        with recording(trunk, rec), last_block(trunk) as last:
            tokens = trunk.forward_features(x.to(param.device, param.dtype).clone().requires_grad_(True))
            logits = logits_of(tower.embed(tokens), text, scale, bias)[0]
        rec.blocks[n_blocks - 1] = last["out"]
        # fused: blocks L-1..1 do Chefer's update in their own backward (`backward.FusedRows`), block 0 below
        grads = batched_grad(logits, rec.out[:1] if rec.fused else rec.out, retain=True)
        legrad = _legrad(tower, rec, text, scale, legrad_layers, chunk_bytes)
    N = tokens.shape[1]
    if rec.fused:  # blocks L-1..1 done in the backward; block 0's rows here
        if rec.state.layers != list(range(n_blocks - 1, 0, -1)):
            raise RuntimeError(f"Chefer's update ran for layers {rec.state.layers}, not {n_blocks - 1} down to 1.")
        r = PromptRows(rec.kernel[0], P, chunk_bytes).chefer(grads[0][:, 0], rec.state.r[None])
    else:
        if pooled:  # the pooling head's cross-attention: its cam is the pooled row over the tokens it reads
            r_pool = PromptRows(rec.kernel[-1], P, chunk_bytes).chefer(
                grads[-1][:, 0], torch.ones(P, 1, device=param.device), residual=False
            )
            r = torch.zeros(P, N, device=param.device)
            r[:, tower.pool_offset :] = r_pool
        else:
            r = tower.start_row(N, param.device).expand(P, N).clone()
        for layer in reversed(range(n_blocks)):
            r = PromptRows(rec.kernel[layer], P, chunk_bytes).chefer(grads[layer][:, 0], r)
            rec.kernel[layer] = None  # free as we go
    with torch.no_grad():
        each = tower.embed_each(tokens[0].detach())  # (N, E)
        sim = logits_of(each, text, scale, bias).T  # (P, N)
        sim[:, : tower.num_prefix_tokens] = 0
    return logits.detach().float().cpu(), r.float().cpu(), legrad.cpu(), sim.float().cpu()


def _legrad(tower: Tower, rec: Pass, text, scale, layers: int, chunk_bytes: int) -> torch.Tensor:
    """LeGrad's map (P, N) over all tokens, min-max scaled per prompt over the patch tokens."""
    trunk = tower.trunk
    n_blocks = len(trunk.blocks)
    N = rec.blocks[n_blocks - 1].shape[1]
    P = len(text)
    dev = text.device
    total = torch.zeros(P, N, device=dev)
    for layer in range(n_blocks - layers, n_blocks):
        z = rec.blocks[layer]
        if tower.pool == "map":  # the pooling head on this block's tokens, its own attention
            head = Pass(n_blocks + 1)
            with recording(trunk, head):
                v = trunk.attn_pool(z[:, tower.pool_offset :])
            s = logits_of(tower.embed_pooled(v), text, scale, None)[0]
            (g,) = batched_grad(s, [head.out[-1]], retain=True)
            total[:, tower.pool_offset :] += PromptRows(head.kernel[-1], P, chunk_bytes).positive_grad(g[:, 0])
        else:  # CLIP: the mean of all tokens, final norm, head; block l's own attention
            s = logits_of(tower.embed_pooled(trunk.norm(z.mean(1))), text, scale, None)[0]
            (g,) = batched_grad(s, [rec.out[layer]], retain=True)
            total += PromptRows(rec.kernel[layer], P, chunk_bytes).positive_grad(g[:, 0])
    total[:, : tower.num_prefix_tokens] = 0
    patches = total[:, tower.num_prefix_tokens :]
    lo, hi = patches.min(1, keepdim=True).values, patches.max(1, keepdim=True).values
    total[:, tower.num_prefix_tokens :] = (patches - lo) / (hi - lo).clamp(min=1e-12)
    return total.float()


def encode_prompts(clip: torch.nn.Module, prompts: list[str]) -> torch.Tensor:
    """Unit text embeddings (P, E) of `prompts` (already checked), float32, by the model's own tokenizer."""
    param = next(clip.parameters())
    with torch.no_grad():
        ids = tokenize(clip, prompts).to(param.device)
        return F.normalize(clip.encode_text(ids).float(), dim=-1)
