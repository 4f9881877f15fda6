"""Every result type drawn for a notebook: one small captioned picture (`Picture`), the large map with the
others beside it, from the drawing the Space uses (`frames.pictures`, the relevance and text tiles, a video
frame's `picture`, the step-by-step panel). Nothing is computed again at display time: a default picture
reads the result's arrays; only a `show(...)` that asks for another query or for rollout runs it (from the
kept q and k, no forward).

    res.show(view="masks", layer=3, head=1, threshold=0.6)   # AttentionMaps: heads, mean, rollout, masks, fig3
    rel.show(view="grad_rollout")                            # Relevance: chefer, grad_rollout, attention
    tr.show(rule="legrad", prompt=1)                         # TextRelevance: a prompt large, every prompt beside
    frame.show(view="head", head=2)                          # VideoFrameMaps: mean, head, masks, fig3
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attention.errors import InputError
from attention.render import grid, png_bytes
from attention.shows import register
from attention.validate import check_choice
from attention.vit.draw import drawing
from attention.vit.draw.frames import ViewSpec, pictures
from attention.vit.draw.stepwise_html import data_uri, panel_html
from attention.vit.draw.views import VIEWS, query_image
from attention.vit.engine.extract import AttentionMaps
from attention.vit.engine.query import Query
from attention.vit.engine.query import label as query_label
from attention.vit.engine.request import CMAP, OPACITY, THRESHOLD, VIEW
from attention.vit.engine.stepwise import RowSteps
from attention.vit.engine.video_frames import VideoFrameMaps, check_head
from attention.vit.relevance import views as relevance_views
from attention.vit.relevance.compute import Relevance
from attention.vit.relevance.labels import short_name
from attention.vit.serve.pass_memo import Pass
from attention.vit.text import views as text_views
from attention.vit.text.result import TextRelevance

LARGE = 360  # px: the large map's longer side at most (reduced by a whole factor, box average)
SMALL = 112  # px: each picture beside it at most


@dataclass(frozen=True)
class Picture:
    """A drawn view that shows itself in a notebook: `image` uint8 (H, W, 3) or None (a table only),
    `caption` plain text (escaped when shown), `extra` HTML already safe (the step-by-step tables)."""

    image: np.ndarray | None
    caption: str
    extra: str = ""

    @cached_property
    def png(self) -> bytes | None:
        """The picture as PNG bytes (None for a table only)."""
        return None if self.image is None else png_bytes(self.image)

    @property
    def html(self) -> str:
        """The picture inline (a data: URI, no file, no network) over its caption, then `extra`."""
        pic = ""
        if self.png is not None:
            pic = f'<img src="{data_uri(self.png)}" alt="{html.escape(self.caption)}" style="max-width:100%">'
        cap = f'<figcaption style="font-size:13px;margin-top:4px">{html.escape(self.caption)}</figcaption>'
        return f'<figure class="attention-picture" style="margin:0">{pic}{cap}{self.extra}</figure>'

    def _repr_png_(self) -> bytes | None:
        return self.png

    def _repr_html_(self) -> str:
        return self.html


def beside(large: np.ndarray, small: list[np.ndarray], labels: list[str]) -> np.ndarray:
    """`large` reduced to LARGE px, `small` (equal sizes) reduced to SMALL px in a labelled grid to its right,
    as many rows as fit its height. uint8 (H, W, 3)."""
    big = drawing.reduced(large, LARGE)
    tiles = [drawing.reduced(t, SMALL) for t in small]
    rows = max(1, big.shape[0] // (tiles[0].shape[0] + 18))
    right = grid(tiles, ncols=-(-len(tiles) // rows), labels=labels)
    h = max(big.shape[0], right.shape[0])
    pad = [np.pad(a, ((0, h - a.shape[0]), (0, 0), (0, 0)), constant_values=255) for a in (big, right)]
    return np.concatenate([pad[0], np.full((h, 8, 3), 255, np.uint8), pad[1]], axis=1)


def source(res: AttentionMaps, model: str = "") -> Pass:
    """`res` as a pass the drawing reads (`MapsSource`, memoised): other queries and rollout from its kept q and k.
    `model`: its name, for captions and the export."""
    return Pass(key=("notebook", model, str(id(res)), ""), model=model or "a ViT", base=res, device="")


def maps_picture(
    res: AttentionMaps,
    *,
    view: str = VIEW.default,
    layer: int | None = None,
    head: int | None = None,
    query: Query | None = None,
    threshold: float = THRESHOLD.default,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
) -> Picture:
    """AttentionMaps drawn as the Space's tab draws view `view` (`views.VIEWS`): the large map (head `head`,
    None: the mean of heads; masks: head 0's) with every tile of the view beside it. `query` (needs
    keep_qk=True) and the rollout view compute rows from the kept q and k; layer: default `res.layer`."""
    v = ViewSpec(
        query=res.query if query is None else query,
        layer=res.layer if layer is None else layer,
        view=view,
        threshold=threshold,
        alpha=alpha,
        cmap=cmap,
    )
    H = res.maps.shape[0]
    h = None if head is None else check_head(head, H)
    big_head = h if h is not None else 0
    at, tiles, large = pictures(source(res), v, head=big_head)
    if v.view == "heads" and h is None:
        large = query_image(at, head=None, alpha=alpha, cmap=cmap)
    caption = f"{VIEWS[v.view]} · layer {at.layer}/{at.depth - 1} · query: {query_label(at.query, short=True)}"
    if len(tiles) == 1:  # mean, rollout, fig3: one picture
        return Picture(drawing.reduced(large, LARGE), caption)
    labels = [t.name.replace("_0", " ").replace("_", " ") for t in tiles]
    what = "the mean of heads" if h is None and v.view == "heads" else f"head {big_head}"
    caption += f" · large: {what}; beside it: {', '.join(labels)}"
    return Picture(beside(large, [t.image for t in tiles], labels), caption)


def relevance_picture(
    rel: Relevance, *, view: str = "chefer", alpha: float = OPACITY.default, cmap: str = CMAP.default
) -> Picture:
    """Relevance for its class: map `view` (chefer, grad_rollout, attention) large, the three beside it, the
    class named with the top classes' probabilities."""
    view = check_choice(view, relevance_views.CAPTIONS, "view")
    tiles = relevance_views.tiles(rel, alpha=alpha, cmap=cmap)
    large = next(t.image for t in tiles if t.name == view)
    top = ", ".join(f"{short_name(n)} {p:.1%}" for _, n, p in rel.top(3))
    caption = f"{next(t.caption for t in tiles if t.name == view)} · top classes: {top}"
    labels = ["relevance", "grad-rollout", "CLS attention"]
    return Picture(beside(large, [t.image for t in tiles], labels), caption)


def text_picture(
    tr: TextRelevance,
    *,
    rule: str | None = None,
    prompt: int | None = None,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
) -> Picture:
    """Text relevance: prompt `prompt`'s map by `rule` (None: the first rule computed) large (None: the best
    match), every prompt's map and the segmentation beside it, each prompt named with its own score and colour."""
    computed = {r: text_views.RULE_NAMES[r] for r in tr.rules}
    rule = check_choice(tr.rules[0] if rule is None else rule, computed, "rule")
    P = len(tr.prompts)
    i = int(np.argmax(tr.logits)) if prompt is None else prompt
    if type(i) is not int or not 0 <= i < P:
        raise InputError(f"Prompt {prompt!r} is not one of the {P} prompts: 0 to {P - 1}.")
    tiles = text_views.tiles(tr, rule, alpha=alpha, cmap=cmap)
    labels = [f"prompt {j}" for j in range(P)] + ["segmentation"]
    named = "; ".join(f"{j}: '{p}' {text_views.score_text(tr, j)}" for j, p in enumerate(tr.prompts))
    caption = f"Where is '{tr.prompts[i]}'? {text_views.RULE_NAMES[rule]} · prompts {named}"
    swatches = "".join(
        f'<span style="display:inline-block;margin-right:10px"><span style="display:inline-block;width:10px;'
        f'height:10px;background:{text_views.hex_colour(j)}"></span> {html.escape(p)}</span>'
        for j, p in enumerate(tr.prompts)
    )
    extra = f'<div style="font-size:12px">Segmentation colours: {swatches}</div>'
    return Picture(beside(tiles[i].image, [t.image for t in tiles], labels), caption, extra)


def steps_picture(steps: RowSteps) -> Picture:
    """A row step by step: the summary, the neuron view of the selected key and the table of keys (HTML)."""
    caption = f"Step by step: layer {steps.layer}, head {steps.head}, query {query_label(steps.query, short=True)}"
    return Picture(None, caption, panel_html(steps))


def frame_picture(
    frame: VideoFrameMaps,
    *,
    view: str = "mean",
    head: int = 0,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
) -> Picture:
    """One video frame beside its `view` (`VIDEO_VIEWS`: mean, head, masks, fig3) of head `head`."""
    img = frame.picture(view, head=head, alpha=alpha, cmap=cmap, side_by_side=True)
    caption = f"Frame {frame.index} at {frame.time:.2f} s · {view}" + (
        f" (head {head})" if view in ("head", "masks") else ""
    )
    return Picture(drawing.reduced(img, 2 * LARGE), caption)


for _cls, _draw in [
    (AttentionMaps, maps_picture),
    (Relevance, relevance_picture),
    (TextRelevance, text_picture),
    (RowSteps, steps_picture),
    (VideoFrameMaps, frame_picture),
]:
    register(_cls, _draw)
