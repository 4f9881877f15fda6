"""Relevance for a server's visitors: a model by name (the allow-list), the relevance budget (the job
priced whole: `cost.relevance_gflop`), the heavy lane's turn (`attention.crowd.admission.HEAVY`: one job of a
visitor at a time, round-robin between visitors), and a bounded store of results, so redrawing (another
rule, opacity, colours) needs no new pass. A result of a visitor's own picture is theirs alone (keyed by
their session, as passes are: no one else can time whether they sent it); a shipped example's is shared.

    rel = get_relevance("examples/digits/digit_3.png", "mnist_vit", "auto", target=None, visitor=Visitor("s", "ip"))
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import TypeVar

import torch

from attention.config import SETTINGS
from attention.crowd.admission import HEAVY
from attention.crowd.cache import SharedCache
from attention.crowd.visitors import Visitor
from attention.errors import InputError
from attention.images import ImageSource
from attention.vit.models.loader import check_allowed, load_vit
from attention.vit.relevance.compute import Relevance, relevance
from attention.vit.relevance.labels import check_classifier, class_index, class_names
from attention.vit.serve.gpu import gpu
from attention.vit.serve.inputs import file_digest, visitor_scope

T = TypeVar("T")
RESULTS: SharedCache[Relevance] = SharedCache(64 << 20, SETTINGS.state_ttl)
"""Every visitor's results together: 64 MB, least recently used out first (a result is its maps and
the shown image: ~0.2 MB for DeiT-S at 224 px)."""


@gpu
def _compute(model: str, image: ImageSource, resolution, target: int | None) -> Relevance:
    vit = load_vit(model)
    device = str(next(vit.parameters()).device)
    return relevance(vit, image, target, resolution=resolution, max_gflop=SETTINGS.relevance_budget_gflop(device))


def resolve_target(model: str, target) -> int | None:
    """The class index `target` names for `model` (None: the top class); InputError otherwise."""
    if target is None or (isinstance(target, str) and not target.strip()):
        return None
    vit = load_vit(model)
    check_classifier(vit)
    return class_index(target, class_names(vit))


def get_relevance(
    image: ImageSource | None,
    model: str,
    resolution="auto",
    target=None,
    *,
    shared=True,
    visitor: Visitor | None = None,
    digest: str | None = None,
) -> Relevance:
    """The relevance of `image` for `model` (a name) and `target`, from the store or computed once.
    shared: as a server (allow-list, relevance budget). visitor: who asks: a new job takes its turn in
    the heavy lane (Busy at once when they already have their share there) and a picture that is not a
    shipped example is keyed to their session. digest: `image`'s content digest when the caller knows it
    (`passes.known_digest`), else computed. Raises the engine's typed errors."""
    model, vit = checked(image, model, shared)
    check_classifier(vit)
    t = resolve_target(model, target)
    digest = file_digest(image) if digest is None else digest
    key = (digest, model, str(resolution), t, visitor_scope(digest, visitor))
    return stored(RESULTS, key, lambda: _compute(model, image, resolution, t), visitor if shared else None)


def checked(image: ImageSource | None, model: str, shared: bool) -> tuple[str, torch.nn.Module]:
    """(the model's name, stripped; the model loaded) for a job on `image`: InputError without an image, and
    as a server (`shared`) a model off the allow-list refused (`check_allowed`)."""
    if image is None or (isinstance(image, str) and not image):
        raise InputError("No image: upload one (PNG, JPEG, WebP, GIF, BMP or TIFF) or pick an example.")
    model = (model or "").strip()
    if shared:
        check_allowed(model)
    return model, load_vit(model)


def stored(results: SharedCache[T], key: tuple, compute: Callable[[], T], visitor: Visitor | None) -> T:
    """`results`' entry at `key`, else `compute()` run once for all who ask at the same time, in `visitor`'s
    turn in the heavy lane (`HEAVY.turn`; a visitor without keys, or None: no turn, as off a server)."""
    if (kept := results.get(key)) is not None:
        return kept

    def job() -> T:
        with HEAVY.turn(visitor) if visitor is not None and visitor.keys else nullcontext():
            return compute()

    return results.get_or_run(key, job)


def is_classifier(model: str) -> bool:
    """Whether `model` (a name) is loaded or offered with a classifier head (no load for unknown names)."""
    from attention.vit.models.loader import is_loaded
    from attention.vit.models.registry import REGISTRY

    spec = REGISTRY.get((model or "").strip())
    if spec is not None:
        return spec.classifier
    if not is_loaded(model):
        return False
    try:
        check_classifier(load_vit(model))
    except InputError:
        return False
    return True
