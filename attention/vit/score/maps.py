"""The maps a score can rank: the explorer's views and rules by name, a random order, the truth, or your array.

    maps = method_maps(sc, image, target, ("attention", "rollout", "chefer"), resolution="auto", seed=0)

attention     the last layer's attention of the model's own query (CLS), mean of heads (`attention_maps`)
rollout       attention rollout (Abnar & Zuidema), mean of heads, no discard (`engine.flow.rollout_map`)
chefer        Chefer et al.'s rule for the explained class (classifier: `relevance`; CLIP: `text_relevance`)
grad_rollout  vit-explain's grad-rollout (classifiers)
legrad        LeGrad (CLIP, SigLIP)
similarity    each patch's own logit with the prompt (CLIP, SigLIP)
maskclip, sclip, clearclip, naclip   the open-vocabulary attention rules (CLIP, SigLIP: `text.openvocab`)
random        a uniform random map (seeded): chance
truth         the share of each patch inside the given mask: the map built to be right (needs a mask); with
              the other objects' pixels (`others`), the rest ranked by how little of them it holds
"""

from __future__ import annotations

import numpy as np

from attention.errors import InputError
from attention.images import ImageSource
from attention.vit.engine.request import RESOLUTION
from attention.vit.score.target import Scorer

CLASSIFIER = ("attention", "rollout", "chefer", "grad_rollout", "random")
TEXT_RULES = ("chefer", "legrad", "similarity", "maskclip", "sclip", "clearclip", "naclip")  # `text.find`'s, no proxy
TEXT = ("attention", "rollout", *TEXT_RULES, "random")
EMBEDDING = ("attention", "rollout", "random")
EXTRA = ("truth",)


def accepted(sc: Scorer) -> tuple[str, ...]:
    """The map names `sc`'s model has."""
    return {"classifier": CLASSIFIER, "embedding": EMBEDDING}.get(sc.kind, TEXT) + EXTRA


def check_names(sc: Scorer, names) -> tuple[str, ...]:
    """`names` (a list, or comma-separated) checked against `accepted(sc)`; InputError naming them."""
    items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names)]
    ok = accepted(sc)
    bad = [n for n in items if n not in ok]
    if not items or bad:
        raise InputError(f"Map {bad[0] if bad else ''!r} is not accepted for this model; accepted: {', '.join(ok)}.")
    return tuple(dict.fromkeys(items))


def truth_map(mask: np.ndarray, patch: int, others: np.ndarray | None = None) -> np.ndarray:
    """float64 (gh, gw): the share of each patch's pixels inside mask (bool (gh * patch, gw * patch)). others
    (bool, the same shape): the other objects' pixels, evidence for the other answers (a planted canvas's
    other digits, whose captions compete in CLIP's softmax): then each patch outside the mask is ranked by how
    little of them it holds, 1 - that share, scaled to 1 / (8 * patch**2) of it: under every patch of the mask
    (at least 1 / patch**2), so most relevant first is the object, then the background, the others last."""
    h, w = mask.shape
    share = mask.reshape(h // patch, patch, w // patch, patch).mean((1, 3)).astype(np.float64)
    if others is None:
        return share
    return np.where(share > 0, share, (1 - truth_map(others, patch)) / (8 * patch * patch))


def method_maps(
    sc: Scorer,
    image: ImageSource,
    target: int,
    names: tuple[str, ...],
    *,
    grid: tuple[int, int],
    resolution=RESOLUTION,
    mask: np.ndarray | None = None,
    others: np.ndarray | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """{name: float (gh, gw)} of each of `names` (checked) for `image` and the explained `target`, at
    `resolution` (the grid `prepare` made). mask, others: bool (H, W) at the input's size, for "truth"."""
    model = sc.image_model
    out: dict[str, np.ndarray] = {}
    if {"attention", "rollout"} & set(names):
        from attention.vit.engine.extract import attention_maps
        from attention.vit.engine.flow import rollout_map

        res = attention_maps(model, image, resolution=resolution, keep_qk="rollout" in names)
        out["attention"] = res.layers[-1].mean(0)
        if "rollout" in names:
            out["rollout"] = rollout_map(res)
    rules = [n for n in names if n in ("grad_rollout", *TEXT_RULES)]
    if rules and sc.kind == "classifier":
        from attention.vit.relevance.compute import relevance

        rel = relevance(model, image, target, resolution=resolution)
        out |= {"chefer": rel.chefer_map, "grad_rollout": rel.grad_rollout_map}
    elif rules:
        from attention.vit.text.find import text_relevance

        tr = text_relevance(model, image, list(sc.prompts), rules=tuple(rules), resolution=resolution)
        out |= {r: tr.maps(r)[target] for r in rules}
    if "random" in names:
        out["random"] = np.random.default_rng(seed).random(grid)
    if "truth" in names:
        if mask is None:
            raise InputError("The map 'truth' is the given mask: give a mask (or leave 'truth' out).")
        out["truth"] = truth_map(mask, sc.patch, others)
    for n in names:
        if out[n].shape != tuple(grid):
            raise RuntimeError(f"Map {n} has shape {out[n].shape}, not the grid {grid}.")
    return {n: np.asarray(out[n], np.float64) for n in names}
