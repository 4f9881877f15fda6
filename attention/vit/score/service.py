"""How faithful is the view on screen, here? For a server's visitors: the shown map (the ViT tab's view of a
pass: a head's map, the mean of heads, rollout with its options) scored against a random order by the
perturbation test (Chefer et al.'s protocol: `score_maps`), priced whole before it runs (the relevance budget:
`compute.price`), computed in the heavy lane (`attention.crowd.admission.HEAVY`: one job of a visitor at a
time, round-robin), and kept in a bounded store (a visitor's own picture keyed to their session).

    s = faithfulness("examples/digits/digit_3.png", "mnist_vit", "auto", ViewSpec(view="mean"), head=0)
    s.maps["shown"].auc_positive, s.maps["random"].auc_positive

The explained answer: a classifier's top class; for any other model (a DINO backbone, a CLIP without prompts)
the cosine of its embedding with the whole image's (`target.scorer(embedding=True)`).
"""

from __future__ import annotations

import numpy as np

from attention.config import SETTINGS
from attention.crowd.cache import SharedCache
from attention.crowd.visitors import Visitor
from attention.images import ImageSource, load_image
from attention.vit.draw.frames import ViewSpec
from attention.vit.engine.preprocess import Preprocess
from attention.vit.relevance.service import checked, stored
from attention.vit.score.compute import Scored, check_price, score_maps
from attention.vit.score.protocol import STEPS
from attention.vit.score.target import scorer
from attention.vit.serve import rollouts
from attention.vit.serve.gpu import gpu
from attention.vit.serve.inputs import file_digest, visitor_scope
from attention.vit.serve.passes import PASSES, get_pass

PROTOCOL = ("perturbation",)
RESULTS: SharedCache[Scored] = SharedCache(8 << 20, SETTINGS.state_ttl)
"""Every visitor's lines together: 8 MB, least recently used out first (a result: two maps and their curves,
a few kB)."""


def budget(device: str) -> float:
    """The budget of one job (GFLOP): the relevance budget (ATTENTION_RELEVANCE_MAX_GFLOP_CPU / _GPU)."""
    return SETTINGS.relevance_budget_gflop(device)


def shown_map(p, view: ViewSpec, head: int) -> np.ndarray:
    """float (gh, gw): what the tab draws large for `view` of pass `p`: the chosen head's map ("heads",
    "masks"), rollout with the view's options ("rollout"), else the mean of heads."""
    res = p.at(view.query, view.layer)
    if view.view == "rollout":
        return p.rollout(view.query, view.layer, **(view.rollout_options or {}))
    if view.view in ("heads", "masks"):
        return res.maps[min(max(int(head), 0), res.maps.shape[0] - 1)]
    return res.mean


def view_key(view: ViewSpec, head: int) -> tuple:
    """What makes two views' maps the same: the view, query, layer, head (heads, masks) and rollout's options."""
    opts = tuple(sorted((view.rollout_options or {}).items())) if view.view == "rollout" else ()
    return (view.view, str(view.query), view.layer, int(head) if view.view in ("heads", "masks") else 0, opts)


@gpu
def _compute(model: str, image: ImageSource, resolution, view: ViewSpec, head: int, digest: str, visitor, shared):
    _, vit = checked(image, model, False)
    cache = PASSES if shared else None  # the tab's pass, from the server's store (a new forward if it went)
    p = get_pass(image, model, resolution, cache=cache, shared=shared, visitor=visitor, digest=digest)
    sc = scorer(vit, embedding=True)
    # The whole job priced before it runs: the shown rollout (`rollouts.check`, as every view that draws one)
    # and the scoring; BudgetError over the heavy jobs' budget, nothing computed.
    prep = Preprocess.of(vit, resolution)
    check_price(sc, load_image(image), prep, 2, rules=False, steps=len(STEPS), protocols=PROTOCOL, step=None,
                max_gflop=budget(p.device), extra_gflop=rollouts.check(p, view))  # fmt: skip
    m = shown_map(p, view, head)
    rnd = np.random.default_rng(0).random(m.shape)
    return score_maps(sc, image, {"shown": m, "random": rnd}, resolution=resolution, protocols=PROTOCOL)


def faithfulness(
    image: ImageSource | None,
    model: str,
    resolution,
    view: ViewSpec,
    head: int = 0,
    *,
    shared: bool = True,
    visitor: Visitor | None = None,
    digest: str | None = None,
) -> Scored:
    """The shown map's perturbation scores against a random order's, for `image` through `model` (a name) at
    `resolution`, from the store or computed once in `visitor`'s turn of the heavy lane (Busy at once when they
    have their share there). shared: as a server (allow-list, the relevance budget). Raises the typed errors."""
    model, _ = checked(image, model, shared)
    digest = file_digest(image) if digest is None else digest
    key = (digest, model, str(resolution), view_key(view, head), visitor_scope(digest, visitor))
    return stored(
        RESULTS,
        key,
        lambda: _compute(model, image, resolution, view, head, digest, visitor, shared),
        visitor if shared else None,
    )
