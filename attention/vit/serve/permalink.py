"""Permalinks: a view of the ViT tab as URL parameters, and back.

    ?example=chelsea&model=dino_vits16&layer=9&head=2&view=heads&q=5,7&res=auto
    ?example=digit_3&model=mnist_vit&class=8          # "Why this class?" explaining class 8
    ?example=digit_3&view=rollout&cmap=viridis&thr=0.8&alpha=0.4&fusion=max&discard=0.5&rule=global
    ?example=digit_3&model=digit_clip&find=a+three,a+seven   # "Find in image" with these prompts
    ?example=digit_4&model=digit_clip&find=a+4,a+9&frule=naclip&fstd=3   # ... by this rule, with these options

Every parameter is optional (the start screen's value when absent). An uploaded image is not in a
link (the server keeps no visitor's files): links name a shipped example, by file name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from attention.errors import InputError, as_whole
from attention.images import ImageSource
from attention.vit.engine import request
from attention.vit.engine.query import ACCEPTED, Query, to_text
from attention.vit.engine.query import parse as parse_query
from attention.vit.serve.inputs import example_digests, example_files, file_digest

KEYS = ("example", "model", "res", "layer", "head", "view", "q", "class", "find")
FIND_KEYS = ("frule", "fres", "fstd", "fgamma", "fbeta")  # "Find in image"'s rule and its options
# what else changes the picture: colormap, mask threshold, overlay opacity, the rollout's options
STYLE_KEYS = ("cmap", "thr", "alpha", "fusion", "discard", "rule")
# each style parameter's bounds and words: the request's (`attention.vit.engine.request`), as every reader's
NUMBERS = {"thr": request.THRESHOLD, "alpha": request.OPACITY, "discard": request.DISCARD_RATIO}
WORDS = {"fusion": request.FUSION, "rule": request.DISCARD_RULE}


@dataclass(frozen=True)
class Link:
    """A view as a link carries it; None = not given (the start screen's value)."""

    example: str | None = None  # a shipped example's name, e.g. "chelsea" or "digit_3"
    model: str | None = None
    resolution: str | None = None
    layer: int | None = None
    head: int | None = None
    view: str | None = None
    query: Query | None = None  # a token name ("cls", "reg0", ...) or (row, col)
    cls: int | None = None  # the class "Why this class?" explains (classifier models); None: the top class
    cmap: str | None = None
    threshold: float | None = None  # the masks' share of attention kept
    alpha: float | None = None  # the overlay's opacity
    fusion: str | None = None  # the rollout's head fusion: mean, max or min
    discard: float | None = None  # the rollout's discard ratio
    rule: str | None = None  # the rollout's discard rule: row or global
    find: str | None = None  # "Find in image"'s prompts, comma-separated (models with a text tower)
    find_rule: str | None = None  # its rule (`attention.vit.text.RULES`)
    find_residual: bool | None = None  # its options (`openvocab.check_options`): None = the paper's
    find_std: float | None = None
    find_gamma: float | None = None
    find_beta: float | None = None


def examples() -> dict[str, Path]:
    """Every shipped example image by name (file name without extension): photos and digits."""
    return example_files()


def example_name(image: ImageSource | None) -> str | None:
    """The name of the shipped example `image` is (by content, so a served copy counts), else None."""
    if image is None:
        return None
    return example_digests().get(file_digest(image))


def _whole(params: Mapping[str, str], key: str, what: str) -> int | None:
    raw = params.get(key)
    if raw is None or not str(raw).strip():
        return None
    v = as_whole(str(raw).strip())
    if v is None:
        raise InputError(f"Link parameter {key}={raw!r} is not a whole number; accepted: {what}.")
    return v


def parse(params: Mapping[str, str]) -> Link:
    """URL parameters -> a Link. Unknown parameters are ignored; a known one with a bad value raises
    InputError naming it and what it accepts (view names are checked by `request.check_view`)."""
    name = (params.get("example") or "").strip() or None
    if name is not None and name not in examples():
        raise InputError(
            f"Link parameter example={name!r} is not a shipped example; accepted: {', '.join(examples())}."
        )
    q_raw = (params.get("q") or "").strip().lower()
    query: Query | None = None
    if q_raw:
        try:
            query = parse_query(q_raw)
        except InputError:
            raise InputError(f"Link parameter q={q_raw!r} is not a query; accepted: {ACCEPTED}.") from None
    view = (params.get("view") or "").strip() or None
    if view is not None:
        view = request.check_view(view)
    find = (params.get("find") or "").strip() or None
    if find is not None:
        from attention.vit.text.prompts import check_prompts

        try:
            find = ", ".join(check_prompts(find))
        except InputError as e:
            raise InputError(f"Link parameter find: {e}") from None
    return Link(
        **_style(params),
        **_find(params),
        example=name,
        model=(params.get("model") or "").strip() or None,
        resolution=(params.get("res") or "").strip() or None,
        layer=_whole(params, "layer", "0, 1, 2, ... or -1 for the last"),
        head=_whole(params, "head", "0, 1, 2, ..."),
        view=view,
        query=query,
        cls=_whole(params, "class", "a class index 0, 1, 2, ..."),
        find=find,
    )


def _find(params: Mapping[str, str]) -> dict:
    """ "Find in image"'s rule and options (`FIND_KEYS`) -> Link fields; InputError naming a bad one."""
    from attention.vit.text.find import check_rule
    from attention.vit.text.openvocab import check_options

    raw = {k: (params.get(k) or "").strip() for k in FIND_KEYS}
    try:
        rule = check_rule(raw["frule"]) if raw["frule"] else None
        d = check_options()
        o = check_options(raw["fres"], raw["fstd"] or d.std, raw["fgamma"] or d.gamma, raw["fbeta"] or d.beta)
    except InputError as e:
        raise InputError(f"Link parameter {', '.join(k for k in FIND_KEYS if raw[k])}: {e}") from None
    given = {k: v for k, v in zip(("fstd", "fgamma", "fbeta"), (o.std, o.gamma, o.beta)) if raw[k]}
    return dict(find_rule=rule, find_residual=o.residual) | {
        f"find_{k[1:]}": given.get(k) for k in ("fstd", "fgamma", "fbeta")
    }


def _style(params: Mapping[str, str]) -> dict:
    """The picture's style parameters (`STYLE_KEYS`) -> Link fields; InputError naming a bad one."""
    raw = {k: (params.get(k) or "").strip() or None for k in STYLE_KEYS}
    if raw["cmap"] is not None:
        request.check_cmap(raw["cmap"])  # the renderer's own check (InputError naming the accepted names)
    for key, choice in WORDS.items():
        if raw[key] is not None and raw[key] not in choice.keys():
            raise InputError(
                f"Link parameter {key}={raw[key]!r} is not accepted; accepted: {', '.join(choice.keys())}."
            )
    nums = {}
    for key, bound in NUMBERS.items():
        try:
            nums[key] = None if raw[key] is None else bound.check(raw[key])
        except InputError as e:
            raise InputError(f"Link parameter {key}: {e}") from None
    return dict(cmap=raw["cmap"], threshold=nums["thr"], alpha=nums["alpha"], fusion=raw["fusion"]) | dict(
        discard=nums["discard"], rule=raw["rule"]
    )


def query_string(link: Link) -> str:
    """A Link as URL parameters ("example=chelsea&layer=9&q=5,7"), only the fields that are set."""
    q = None if link.query is None else to_text(link.query)
    values = [link.example, link.model, link.resolution, link.layer, link.head, link.view, q, link.cls, link.find]
    values += [link.cmap, link.threshold, link.alpha, link.fusion, link.discard, link.rule]
    res = None if link.find_residual is None else str(link.find_residual).lower()
    values += [link.find_rule, res, link.find_std, link.find_gamma, link.find_beta]
    keys = KEYS + STYLE_KEYS + FIND_KEYS
    return urlencode({k: v for k, v in zip(keys, values) if v is not None}, safe=",:/")
