"""Text relevance for a server's visitors: a model by name (the allow-list), the compute budget, and a bounded
store of results shared by all, so redrawing (another rule, opacity, colours, prompt) needs no new pass.

    tr = get_text_relevance("examples/digits/digit_3.png", "digit_clip", "auto", "a handwritten three, a seven")
"""

from __future__ import annotations

from attention.config import SETTINGS
from attention.images import ImageSource
from attention.serving.cache import SharedCache
from attention.serving.visitors import Visitor
from attention.vit.models.loader import is_loaded, load_vit
from attention.vit.models.registry import REGISTRY
from attention.vit.relevance.service import checked, stored
from attention.vit.serve.gpu import gpu
from attention.vit.serve.inputs import file_digest, visitor_scope
from attention.vit.text.compute import TextRelevance, text_relevance
from attention.vit.text.prompts import check_prompts
from attention.vit.text.tower import has_text_tower, text_model_of

RESULTS: SharedCache[TextRelevance] = SharedCache(64 << 20, SETTINGS.state_ttl)
"""Every visitor's results together: 64 MB, least recently used out first (a result is its maps and the
shown image: under 0.2 MB for 8 prompts on ViT-B/16 at 224 px)."""


def text_models() -> list[str]:
    """The registry's models with a text tower."""
    return [s.alias for s in REGISTRY.values() if s.text]


def has_text(model: str) -> bool:
    """Whether `model` (a name) is offered or loaded with a text tower (no load for an unknown name)."""
    name = (model or "").strip()
    spec = REGISTRY.get(name)
    if spec is not None:
        return spec.text
    if not (name.startswith("open_clip:") and is_loaded(name)):
        return False
    return has_text_tower(load_vit(name))


@gpu
def _compute(model: str, image: ImageSource, resolution, prompts: tuple[str, ...]) -> TextRelevance:
    vit = load_vit(model)
    device = str(next(vit.parameters()).device)
    budget = SETTINGS.relevance_budget_gflop(device)  # a relevance job's, priced by `price.text_relevance_gflop`
    return text_relevance(vit, image, list(prompts), resolution=resolution, max_gflop=budget)


def get_text_relevance(
    image: ImageSource | None,
    model: str,
    resolution="auto",
    prompts="",
    *,
    shared: bool = True,
    visitor: Visitor | None = None,
) -> TextRelevance:
    """The text relevance of `image` for `model` (a name) and `prompts` (comma-separated, or a list), from
    the store or computed once. shared: as a server (allow-list, compute budget). visitor: who asks, as for
    `relevance.service.get_relevance`: a new job takes its turn in the heavy lane (Busy at once past their
    share) and a picture that is not a shipped example is keyed to their session. Typed errors."""
    model, vit = checked(image, model, shared)
    clip = text_model_of(vit)
    items = tuple(check_prompts(prompts, clip))
    digest = file_digest(image)
    key = (digest, model, str(resolution), items, visitor_scope(digest, visitor))
    return stored(RESULTS, key, lambda: _compute(model, image, resolution, items), visitor if shared else None)
