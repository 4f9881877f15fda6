"""Where is "a cat"? Text relevance of a CLIP-like model by any of its rules, the entry point.

    tr = text_relevance(model, image, ["a cat", "a remote"], rules="clearclip")
    tr.maps("clearclip")     # (P, gh, gw) cosine of each patch (ClearCLIP's last block) with each prompt
    tr.segmentation("clearclip")   # (gh, gw) the prompt each patch clearly matches, or -1 (none)
    tr.ranking()             # [(prompt, logit, score)], best first; score: CLIP's cosine, SigLIP's sigmoid

Rules (`result.RULES`): the gradient rules (Chefer et al.'s, LeGrad: one forward and one batched backward,
`compute`), the raw patch-text similarity (free with either pass) and the open-vocabulary rules (one forward
without gradients, `dense`; the proxy rule with another vision model's features, `proxy`).
"""

from __future__ import annotations

import time
from functools import partial

import torch

from attention.errors import InputError
from attention.images import MAX_TOKENS, ImageSource
from attention.vit.engine.preprocess import prepare
from attention.vit.engine.request import RESOLUTION
from attention.vit.text.compute import LEGRAD_LAYERS, encode_prompts, text_relevance_rows
from attention.vit.text.dense import open_vocabulary_rows, scale_bias
from attention.vit.text.openvocab import OPEN_RULES, RuleOptions
from attention.vit.text.price import text_relevance_gflop
from attention.vit.text.prompts import check_prompts
from attention.vit.text.proxy import proxy_features
from attention.vit.text.result import GRADIENT_RULES, RULES, TextRelevance
from attention.vit.text.tower import ready, text_model_of

DEFAULT_RULES = tuple(r for r in RULES if r != "proxy")  # every rule that needs no second model


def check_rule(rule) -> str:
    """One rule's name, stripped and lower-cased: InputError naming the accepted ones otherwise."""
    name = rule.strip().lower() if isinstance(rule, str) else ""
    if name not in RULES:
        raise InputError(f"Rule {str(rule)[:40]!r} is not accepted; accepted: {', '.join(RULES)}.")
    return name


def check_rules(rules: str | tuple[str, ...] | list[str] | None, proxy: bool = False) -> tuple[str, ...]:
    """The rules asked for, in RULES order: a name, several (a list or a comma-separated string), or None for
    DEFAULT_RULES (and "proxy" when a proxy model is given). InputError for an unknown one, or "proxy" without
    a proxy model."""
    if rules is None:
        return (*DEFAULT_RULES, "proxy") if proxy else DEFAULT_RULES
    items = {check_rule(r) for r in (rules.split(",") if isinstance(rules, str) else rules)}
    if "proxy" in items and not proxy:
        raise InputError("The proxy rule needs a proxy model (a DINO or DINOv2, `proxy=`); none was given.")
    return tuple(r for r in RULES if r in items)


def text_relevance(
    model: torch.nn.Module,
    image: ImageSource,
    prompts: str | list[str],
    *,
    rules: str | tuple[str, ...] | list[str] | None = None,
    options: RuleOptions | None = None,
    proxy: torch.nn.Module | None = None,
    resolution: int | str | None = RESOLUTION,
    legrad_layers: int = LEGRAD_LAYERS,
    max_tokens: int = MAX_TOKENS,
    max_gflop: float | None = None,
) -> TextRelevance:
    """Where `image` matches each of `prompts` for `model`, by each of `rules` (`check_rules`; default: every
    rule but the proxy's, and it too with a `proxy` model), and how well the image matches each prompt.

    model: an open_clip CLIP/SigLIP whose image tower the engine reads (`tower.vision_tower`), or what
    `load_vit` returns for a text model ("digit_clip", "siglip2_vitb16"); NoTextTowerError for a model without
    one. prompts: a list, or one string of comma-separated prompts (`prompts.check_prompts`). options: the
    open-vocabulary rules' (`openvocab.check_options`; the papers' defaults). proxy: the vision model (any the
    engine describes) whose patch similarity the proxy rule takes as the last block's attention.
    resolution, max_tokens: as `attention_maps`. max_gflop: the budget of the whole job, priced by
    `price.text_relevance_gflop` for these prompts and rules, checked before it runs (BudgetError naming the
    largest resolution that fits). Thread-safe on a shared model.
    """
    clip = text_model_of(model)
    tower = ready(clip)
    items = check_prompts(prompts, clip)
    want = check_rules(rules, proxy is not None)
    opts = options or RuleOptions()
    gradient = any(r in GRADIENT_RULES for r in want)
    opens = tuple(r for r in want if r in OPEN_RULES)
    price = partial(text_relevance_gflop, prompts=len(items), gradient=gradient, open_rules=len(opens))
    x, shown, grid = prepare(
        tower.trunk, image, resolution, max_tokens, max_gflop, gflop=price, job="text relevance job"
    )
    t0 = time.perf_counter()
    text = encode_prompts(clip, items)
    t = tower.num_prefix_tokens
    maps = {}
    if gradient:
        logits, chefer, legrad, sim = text_relevance_rows(clip, tower, x, text, legrad_layers=legrad_layers)
        maps = {"chefer": chefer[:, t:], "legrad": legrad[:, t:], "similarity": sim[:, t:]}
    if opens or not gradient:
        feats = proxy_features(proxy, shown, grid) if "proxy" in opens else None
        logits, found, sim = open_vocabulary_rows(clip, tower, x, text, opens, opts, feats)
        maps = {**maps, **found, "similarity": sim}
    scale, _ = scale_bias(clip)
    return TextRelevance(
        prompts=tuple(items),
        logits=logits.numpy(),
        kind="siglip" if getattr(clip, "logit_bias", None) is not None else "clip",
        scale=float(scale),
        maps_by_rule={r: maps[r].numpy() for r in RULES if r in maps},  # the asked ones and what came free
        grid=grid,
        image=shown,
        patch_size=int(tower.trunk.patch_embed.patch_size[0]),
        legrad_layers=legrad_layers,
        options={r: opts.summary(r) for r in opens},
        seconds=time.perf_counter() - t0,
    )
