"""Where is "a cat"? Text-prompted relevance of a CLIP-like model: for each prompt, which patches make the
image match the prompt by the score the model itself uses (CLIP: the scaled cosine logit; SigLIP: the
sigmoid's logit, bias included).

    tr = text_relevance(model, image, ["a cat", "a remote"])
    tr.maps("chefer")        # (P, gh, gw) Chefer, Gur & Wolf (ICCV 2021), the generic rule, the logit as target
    tr.maps("legrad")        # (P, gh, gw) LeGrad (Bousselham et al. 2024), each layer's (dA)^+ summed, min-max
    tr.maps("similarity")    # (P, gh, gw) each patch token alone through the pool and head, its logit
    tr.segmentation()        # (gh, gw) the prompt each patch matches most (an index into tr.prompts)
    tr.ranking()             # [(prompt, logit, probability)], best first

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

import time
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from attention.errors import InputError
from attention.images import MAX_TOKENS, ImageSource
from attention.shows import Shows
from attention.vit.engine.capture import recording
from attention.vit.engine.preprocess import prepare
from attention.vit.text.price import text_relevance_gflop
from attention.vit.text.prompts import check_prompts, tokenize
from attention.vit.text.record import Pass, last_block
from attention.vit.text.rows import CHUNK_BYTES, PromptRows, batched_grad
from attention.vit.text.tower import Tower, ready, text_model_of

RULES = ("chefer", "legrad", "similarity")
LEGRAD_LAYERS = 2  # LeGrad's default (`LeWrapper(model, layer_index=-2)`): its last two blocks


@dataclass
class TextRelevance(Shows):
    """Text relevance of one image for P prompts over a (gh, gw) grid, N = T + gh*gw tokens (T prefix)."""

    prompts: tuple[str, ...]
    logits: np.ndarray  # float32 (P,): the model's image-text logit per prompt
    kind: str  # "clip" (softmax over prompts) or "siglip" (sigmoid per prompt)
    chefer: np.ndarray  # float32 (P, gh*gw): Chefer et al.'s R, pooled row, patches
    legrad: np.ndarray  # float32 (P, gh*gw): LeGrad, min-max scaled per prompt
    similarity: np.ndarray  # float32 (P, gh*gw): each patch's own logit with each prompt
    grid: tuple[int, int]
    image: Image.Image  # the preprocessed RGB image the grid aligns to
    patch_size: int
    legrad_layers: int
    seconds: float = 0.0

    @property
    def probs(self) -> np.ndarray:
        """float32 (P,): softmax over the prompts (CLIP) or each prompt's sigmoid (SigLIP)."""
        z = self.logits.astype(np.float64)
        if self.kind == "siglip":
            return (1 / (1 + np.exp(-z))).astype(np.float32)
        e = np.exp(z - z.max())
        return (e / e.sum()).astype(np.float32)

    @property
    def nbytes(self) -> int:
        """Bytes held (arrays and the shown image), for a server's bounded store."""
        arrays = (self.logits, self.chefer, self.legrad, self.similarity)
        return sum(a.nbytes for a in arrays) + self.image.width * self.image.height * 3

    def maps(self, rule: str = "chefer") -> np.ndarray:
        """float32 (P, gh, gw): each prompt's map by `rule` (one of RULES)."""
        if rule not in RULES:
            raise InputError(f"Rule {rule!r} is not accepted; accepted: {', '.join(RULES)}.")
        return getattr(self, rule).reshape(len(self.prompts), *self.grid)

    def segmentation(self, rule: str = "chefer") -> np.ndarray:
        """int64 (gh, gw): for each patch, the index of the prompt whose `rule` map is highest there."""
        return self.maps(rule).argmax(0)

    def ranking(self) -> list[tuple[str, float, float]]:
        """(prompt, logit, probability) for every prompt, best match first."""
        p = self.probs
        order = np.argsort(-self.logits, kind="stable")
        return [(self.prompts[i], float(self.logits[i]), float(p[i])) for i in order]

    def summary(self) -> dict:
        """JSON-ready: the ranking, the kind of score, the grid, LeGrad's layers."""
        return {
            "ranking": [{"prompt": t, "logit": round(s, 6), "probability": round(p, 6)} for t, s, p in self.ranking()],
            "score": "sigmoid of the logit (SigLIP)" if self.kind == "siglip" else "softmax over the prompts (CLIP)",
            "grid": list(self.grid),
            "legrad_layers": self.legrad_layers,
        }


def _logits(emb: torch.Tensor, text: torch.Tensor, scale: torch.Tensor, bias) -> torch.Tensor:
    """(B, E) image embeddings, (P, E) unit text embeddings -> (B, P): scale * cosine (+ bias)."""
    out = scale * (F.normalize(emb.float(), dim=-1) @ text.T)
    return out if bias is None else out + bias


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
    scale = clip.logit_scale.detach().float().exp()
    bias = None if getattr(clip, "logit_bias", None) is None else clip.logit_bias.detach().float()
    pooled = tower.pool == "map"
    P = len(text)
    start = None if pooled or P > 1 else (lambda n: tower.start_row(n, param.device))
    rec = Pass(n_blocks + pooled, n_blocks, start)
    with torch.inference_mode(False), torch.enable_grad():
        with recording(trunk, rec), last_block(trunk) as last:
            tokens = trunk.forward_features(x.to(param.device, param.dtype).clone().requires_grad_(True))
            logits = _logits(tower.embed(tokens), text, scale, bias)[0]
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
        sim = _logits(each, text, scale, bias).T  # (P, N)
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
            s = _logits(tower.embed_pooled(v), text, scale, None)[0]
            (g,) = batched_grad(s, [head.out[-1]], retain=True)
            total[:, tower.pool_offset :] += PromptRows(head.kernel[-1], P, chunk_bytes).positive_grad(g[:, 0])
        else:  # CLIP: the mean of all tokens, final norm, head; block l's own attention
            s = _logits(tower.embed_pooled(trunk.norm(z.mean(1))), text, scale, None)[0]
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


def text_relevance(
    model: torch.nn.Module,
    image: ImageSource,
    prompts: str | list[str],
    *,
    resolution: int | str | None = "auto",
    legrad_layers: int = LEGRAD_LAYERS,
    max_tokens: int = MAX_TOKENS,
    max_gflop: float | None = None,
) -> TextRelevance:
    """Where `image` matches each of `prompts` for `model`, by Chefer et al.'s rule, LeGrad's and the raw
    patch-text similarity, and which prompt it matches most.

    model: an open_clip CLIP/SigLIP whose image tower the engine reads (`tower.vision_tower`), or what
    `load_vit` returns for a text model ("digit_clip", "siglip2_vitb16": its image tower, the text tower
    attached); NoTextTowerError for a model without one. prompts: a list, or one string of comma-separated
    prompts (`prompts.check_prompts`: at most MAX_PROMPTS, each 1 to MAX_PROMPT_CHARS characters).
    resolution, max_tokens: as `attention_maps`. max_gflop: the budget of the whole job, priced by
    `price.text_relevance_gflop` for these prompts, checked before it runs (BudgetError naming the largest
    resolution that fits). Thread-safe on a shared model.
    """
    clip = text_model_of(model)
    tower = ready(clip)
    items = check_prompts(prompts, clip)
    price = partial(text_relevance_gflop, prompts=len(items))
    x, shown, grid = prepare(
        tower.trunk, image, resolution, max_tokens, max_gflop, gflop=price, job="text relevance job"
    )
    t0 = time.perf_counter()
    text = encode_prompts(clip, items)
    logits, chefer, legrad, sim = text_relevance_rows(clip, tower, x, text, legrad_layers=legrad_layers)
    t = tower.num_prefix_tokens
    return TextRelevance(
        prompts=tuple(items),
        logits=logits.numpy(),
        kind="siglip" if getattr(clip, "logit_bias", None) is not None else "clip",
        chefer=chefer[:, t:].numpy(),
        legrad=legrad[:, t:].numpy(),
        similarity=sim[:, t:].numpy(),
        grid=grid,
        image=shown,
        patch_size=int(tower.trunk.patch_embed.patch_size[0]),
        legrad_layers=legrad_layers,
        seconds=time.perf_counter() - t0,
    )
