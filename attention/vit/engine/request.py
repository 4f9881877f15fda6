"""The view request: every parameter a visitor sets on a view, its default and its bounds, declared once.

Every reader takes them from here: the ViT tab's controls (ranges, steps, values), the API's and MCP's
parameter docs, the command line, permalinks, the video and relevance panels, and the checks.

    THRESHOLD.check("0.5") == 0.5; THRESHOLD.slider() == (0.05, 1.0, 0.05); THRESHOLD.default == 0.6
    VIEW.check("Mean of heads") == "mean"; FUSION.keys() == ("mean", "max", "min")
    v = ViewSpec(view="rollout", rollout_options=rollout(fusion="max"))   # checked once; drawing trusts it
    r = ViewRequest.parse(image="cat.jpg", model="dino_vits16", query_row=2, query_col=3, layer="-1")
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from attention.errors import InputError, as_whole
from attention.render import COLORMAPS, DEFAULT_CMAP, colormap
from attention.validate import OPACITY, Bound, check_choice
from attention.vit.engine.query import Query, from_fields, is_empty

__all__ = ["OPACITY", "Bound", "Choice"]  # OPACITY: declared in validate (the renderer checks it), read here

THRESHOLD = Bound(  # DINO's default mask threshold
    "Threshold", 0.6, 0.0, 1.0, lo_open=True, meaning="the share of each head's attention the mask keeps"
)
DISCARD_RATIO = Bound(
    "Discard ratio", 0.0, 0.0, 1.0, hi_open=True, meaning="the share of the lowest attention dropped in each layer"
)
GRAD_DISCARD = replace(DISCARD_RATIO, default=0.9)  # grad-rollout's ("Why this class?"): vit-explain's default
LAYER, HEAD = -1, 0  # the last layer, the first head
RESOLUTION = "auto"
RESOLUTIONS = ("auto", "native", "dino480", "224", "320", "480", "640", "800")  # the tab's list (any px accepted)
FIND_PROMPTS, FIND_PROMPT_CHARS = 8, 100  # "Find in image": prompts a request, characters a prompt
FIND_RULE = "sclip"  # "Find in image"'s rule a visitor first sees: the best of the planted check and the digits
# "Find in image"'s rule options, the papers' defaults (NACLIP's Gaussian; ProxyCLIP's scale and shift)
FIND_STD = Bound("std", 5.0, 0.0, 100.0, lo_open=True, step=0.1, meaning="NACLIP's Gaussian, in patches")
FIND_GAMMA = Bound("gamma", 3.0, 0.0, 100.0, lo_open=True, step=0.1, meaning="the proxy rule's scale")
FIND_BETA = Bound("beta", 1.2, 0.0, 10.0, step=0.1, meaning="the proxy rule's shift times the mean similarity")
FIND_OPTIONS = {"std": FIND_STD, "gamma": FIND_GAMMA, "beta": FIND_BETA}


@dataclass(frozen=True)
class Choice:
    """One of a few named values: `choices` key -> label (a control shows the label), the default."""

    name: str
    choices: dict[str, str]
    default: str

    def keys(self) -> tuple[str, ...]:
        return tuple(self.choices)

    def pairs(self) -> list[tuple[str, str]]:
        """(label, key) for a radio or dropdown."""
        return [(label, key) for key, label in self.choices.items()]

    def check(self, value) -> str:
        """The key `value` names (by key or label, any case); InputError naming the accepted keys."""
        return check_choice(value, self.choices, self.name)


VIEW = Choice(
    "view",
    {
        "heads": "Per-head grid",
        "mean": "Mean of heads",
        "rollout": "Rollout",
        "masks": "Threshold masks",
        "fig3": "All masks (DINO Fig. 3)",
    },
    "heads",
)
VIEWS = VIEW.choices
VIDEO_VIEW = Choice(
    "video view",
    {
        "mean": "Mean of heads (DINO's video)",
        "head": "One head",
        "masks": "One head's threshold mask",
        "fig3": "All masks (DINO Fig. 3)",
    },
    "mean",
)
FUSION = Choice("head fusion", {"mean": "mean", "max": "max", "min": "min"}, "mean")
DISCARD_RULE = Choice("discard rule", {"row": "in each row", "global": "whole matrix, CLS kept (vit-explain)"}, "row")
CMAP = Choice("colormap", {n: n for n in COLORMAPS}, DEFAULT_CMAP)  # any matplotlib name is accepted too
ROLLOUT_KEYS = ("head_fusion", "discard_ratio", "discard")  # `flow.rollout`'s keywords


def check_view(view: str) -> str:
    """Normalise a view name; InputError listing the accepted ones."""
    return VIEW.check(view)


def check_cmap(cmap: str) -> str:
    """A colormap name the renderer knows (`render.colormap`); InputError naming the accepted ones."""
    colormap(cmap)
    return cmap


def check_style(threshold: float, alpha: float, cmap: str) -> None:
    """Threshold, opacity and colormap checked (`THRESHOLD`, `OPACITY`, `check_cmap`); InputError says what is
    accepted."""
    THRESHOLD.check(threshold)
    OPACITY.check(alpha)
    check_cmap(cmap)


def rollout(fusion=None, discard_ratio=None, discard_rule=None) -> dict:
    """The rollout's options as `flow.rollout` takes them, checked; None: the default."""
    return dict(
        head_fusion=FUSION.default if fusion is None else FUSION.check(fusion),
        discard_ratio=DISCARD_RATIO.default if discard_ratio is None else DISCARD_RATIO.check(discard_ratio),
        discard=DISCARD_RULE.default if discard_rule is None else DISCARD_RULE.check(discard_rule),
    )


def parse_index(value, what: str = "Layer") -> int:
    """A whole number (layer or head index; negative counts from the end). InputError otherwise."""
    v = as_whole(value)
    if v is None:
        raise InputError(f"{what} {value!r} is not a whole number; accepted: 0, 1, 2, ... or -1 for the last.")
    return v


def parse_layer(value) -> int:
    """A layer index (`parse_index`); empty (None, NaN, blank: `query.is_empty`) means `LAYER`, the last."""
    return LAYER if is_empty(value) else parse_index(value, "Layer")


def parse_head(value) -> int:
    """A head index (`parse_index`); empty (None, NaN, blank: `query.is_empty`) means `HEAD`, the first."""
    return HEAD if is_empty(value) else parse_index(value, "Head")


@dataclass(frozen=True)
class ViewSpec:
    """One view of a pass, as a visitor asks for it: the query (None: the model's own token), the
    layer (negative counts from the end), the view (`VIEWS`), the masks' threshold, the opacity,
    the colormap and, for the rollout view, `flow.rollout`'s head_fusion, discard_ratio and discard
    (None: not given, its defaults)."""

    query: Query | None = None
    layer: int = LAYER
    view: str = VIEW.default
    threshold: float = THRESHOLD.default
    alpha: float = OPACITY.default
    cmap: str = CMAP.default
    rollout_options: dict | None = None

    def __post_init__(self) -> None:
        """Checked once, here: the view's name (normalised, `check_view`), the style (`check_style`) and the
        rollout's options given; what draws a ViewSpec trusts it. InputError says what is accepted."""
        object.__setattr__(self, "view", check_view(self.view))
        check_style(self.threshold, self.alpha, self.cmap)
        if self.rollout_options:
            checks = dict(zip(ROLLOUT_KEYS, (FUSION.check, DISCARD_RATIO.check, DISCARD_RULE.check)))
            given = {k: v if v is None or k not in checks else checks[k](v) for k, v in self.rollout_options.items()}
            object.__setattr__(self, "rollout_options", given)

    @classmethod
    def trusted(cls, **given) -> ViewSpec:
        """A view from fields a ViewSpec has checked already (the main view's, kept in the visitor's
        state, with its query and layer mapped to another pass): nothing checked again."""
        v = object.__new__(cls)
        for f in fields(cls):
            object.__setattr__(v, f.name, given.get(f.name, f.default))
        return v

    def placed(self, query: Query | None, layer: int) -> ViewSpec:
        """This checked view at a query and layer parsed by the caller (`view_request`, or mapped to
        another pass): nothing checked again."""
        return self.trusted(**vars(self) | dict(query=query, layer=layer))


def view_request(
    view: str = VIEW.default,
    threshold: float = THRESHOLD.default,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
    *,
    query_row=None,
    query_col=None,
    layer=LAYER,
    rollout_options: dict | None = None,
) -> ViewSpec:
    """A view as a caller sends it (an API call, a CLI command), read once at the edge into one checked
    `ViewSpec`, in this order: the view's name and style, the query (`query.from_fields`), the layer
    (`parse_layer`: empty = the last). What draws it trusts it. InputError names the field."""
    v = ViewSpec(view=view, threshold=threshold, alpha=alpha, cmap=cmap, rollout_options=rollout_options)
    return v.placed(from_fields(query_row, query_col), parse_layer(layer))


@dataclass(frozen=True)
class ViewRequest:
    """One view of one image as the ViT tab asks for it, read once at the edge: the image (a path), the
    model and resolution as given (checked where the pass is made), the head (`parse_head`) and the view
    (`ViewSpec`: its query and layer parsed, the rest checked). Fitting it to a pass is the caller's."""

    image: object = None
    model: str | None = None
    resolution: str = RESOLUTION
    head: int = HEAD
    spec: ViewSpec = ViewSpec()

    @classmethod
    def parse(
        cls,
        image=None,
        model=None,
        resolution=None,
        *,
        query_row=None,
        query_col=None,
        layer=None,
        head=None,
        view=None,
        threshold=None,
        alpha=None,
        cmap=None,
        fusion=None,
        discard_ratio=None,
        discard_rule=None,
    ) -> ViewRequest:
        """The tab's or a caller's fields, each None for its default; InputError naming the field at fault.
        The rollout's options are kept only when one of them is given (a caption then names them)."""
        given = (fusion, discard_ratio, discard_rule)
        opts = None if all(v is None for v in given) else dict(zip(ROLLOUT_KEYS, given))
        spec = view_request(
            VIEW.default if view is None else view,
            THRESHOLD.default if threshold is None else threshold,
            OPACITY.default if alpha is None else alpha,
            CMAP.default if cmap is None else cmap,
            query_row=query_row,
            query_col=query_col,
            layer=layer,
            rollout_options=opts,
        )
        res = RESOLUTION if resolution is None or not str(resolution).strip() else resolution
        return cls(image, model, res, parse_head(head), spec)
