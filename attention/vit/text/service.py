"""Text relevance for a server's visitors: a model by name (the allow-list), the compute budget, and a bounded
store of results shared by all, so redrawing (another rule, opacity, colours, prompt) needs no new pass.

    tr = get_text_relevance("examples/digits/digit_3.png", "digit_clip", "auto", "a three, a seven", "naclip")

A job computes the one rule asked for (the gradient rules: one forward and one backward; the open-vocabulary
rules: one forward; the similarity comes with either); the proxy rule runs the model's proxy (`proxy_of`).
"""

from __future__ import annotations

from attention.config import SETTINGS
from attention.crowd.cache import SharedCache
from attention.crowd.visitors import Visitor
from attention.images import ImageSource
from attention.vit.engine.request import FIND_RULE, RESOLUTION
from attention.vit.models.loader import is_loaded, load_vit
from attention.vit.models.registry import REGISTRY
from attention.vit.relevance.service import checked, stored
from attention.vit.serve.gpu import gpu
from attention.vit.serve.inputs import file_digest, visitor_scope
from attention.vit.text.find import check_rule, text_relevance
from attention.vit.text.openvocab import OPEN_RULES, RuleOptions
from attention.vit.text.patchrow import PatchRows, patch_rows
from attention.vit.text.prompts import check_prompts
from attention.vit.text.result import TextRelevance
from attention.vit.text.tower import has_text_tower, text_model_of

BEST_RULE = FIND_RULE  # the rule a visitor first sees (`request.FIND_RULE`; README)
PROXIES = {"digit_clip": "mnist_vit"}  # the proxy rule's vision model per text model; others: DEFAULT_PROXY
DEFAULT_PROXY = "dino_vitb16"

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


def proxy_of(model: str) -> str:
    """The vision model whose patch similarity the proxy rule uses for text model `model` (a name): digit_clip's
    is mnist_vit (trained on the same digits, shipped), any other's DINO ViT-B/16."""
    return PROXIES.get((model or "").strip(), DEFAULT_PROXY)


def options_key(rule: str, opts: RuleOptions) -> tuple | None:
    """What of `opts` changes `rule`'s answer, hashable: an open-vocabulary rule's own options (`summary`: the
    residual, NACLIP's std, the proxy's gamma and beta); nothing for the gradient rules and the similarity."""
    return tuple(sorted(opts.summary(rule).items())) if rule in OPEN_RULES else None


@gpu
def _compute(model, image, resolution, prompts: tuple[str, ...], rule: str, opts: RuleOptions, proxy):
    vit = load_vit(model)
    device = str(next(vit.parameters()).device)
    budget = SETTINGS.relevance_budget_gflop(device)  # a relevance job's, priced by `price.text_relevance_gflop`
    helper = None if proxy is None else load_vit(proxy)
    return text_relevance(
        vit, image, list(prompts), rules=(rule,), options=opts, proxy=helper, resolution=resolution, max_gflop=budget
    )


def get_text_relevance(
    image: ImageSource | None,
    model: str,
    resolution=RESOLUTION,
    prompts="",
    rule: str = BEST_RULE,
    options: RuleOptions | None = None,
    *,
    shared: bool = True,
    visitor: Visitor | None = None,
) -> TextRelevance:
    """The text relevance of `image` for `model` (a name) and `prompts` (comma-separated, or a list) by `rule`
    (one of `result.RULES`) with `options` (`openvocab.check_options`; the papers' defaults), from the store or
    computed once. shared: as a server (allow-list, compute budget; the proxy model too). visitor: who asks, as
    for `relevance.service.get_relevance`: a new job takes its turn in the heavy lane (Busy at once past their
    share) and a picture that is not a shipped example is keyed to their session. Typed errors."""
    rule = check_rule(rule)
    opts = options or RuleOptions()
    model, vit = checked(image, model, shared)
    clip = text_model_of(vit)
    items = tuple(check_prompts(prompts, clip))
    proxy = None
    if rule == "proxy":
        proxy, _ = checked(image, proxy_of(model), shared)
    digest = file_digest(image)
    key = (digest, model, str(resolution), items, rule, options_key(rule, opts), proxy, visitor_scope(digest, visitor))
    job = lambda: _compute(model, image, resolution, items, rule, opts, proxy)  # noqa: E731
    return stored(RESULTS, key, job, visitor if shared else None)


@gpu
def _rows(model, image, resolution, rule: str, opts: RuleOptions, patch: tuple[int, int], proxy):
    vit = load_vit(model)
    budget = SETTINGS.relevance_budget_gflop(str(next(vit.parameters()).device))  # priced as a forward
    helper = None if proxy is None else load_vit(proxy)
    return patch_rows(vit, image, rule, patch, options=opts, proxy=helper, resolution=resolution, max_gflop=budget)


def get_patch_rows(
    image: ImageSource | None,
    model: str,
    resolution,
    rule: str,
    options: RuleOptions | None,
    patch: tuple[int, int],
    *,
    shared: bool = True,
    visitor: Visitor | None = None,
) -> PatchRows:
    """The last block's attention row of grid patch (row, col) `patch` under open-vocabulary `rule` beside the
    model's own (`patchrow.patch_rows`), from the store or computed once, as `get_text_relevance` serves maps."""
    rule = check_rule(rule)
    opts = options or RuleOptions()
    model, _ = checked(image, model, shared)
    proxy = checked(image, proxy_of(model), shared)[0] if rule == "proxy" else None
    where = (int(patch[0]), int(patch[1]))
    digest = file_digest(image)
    key = ("rows", digest, model, str(resolution), rule, options_key(rule, opts), where, proxy)
    key += (visitor_scope(digest, visitor),)
    job = lambda: _rows(model, image, resolution, rule, opts, where, proxy)  # noqa: E731
    return stored(RESULTS, key, job, visitor if shared else None)
