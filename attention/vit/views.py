"""What the attention viewer shows: overlay tiles per view, the clickable query image, the
details line, the scores-vs-weights table and the colour legend; `frame` composes them all for
one view of a cached pass, with its files (written by `attention.vit.outputs`).

Everything is numpy and PIL (no matplotlib figure): tiles are uint8 (H, W, 3) arrays,
encoded to PNG once and both served and packed into the download.

    res = p.at(query, layer)                                  # see attention.vit.session
    ts = tiles(res, "heads", alpha=0.6, cmap="inferno")       # [Tile(image, caption, name), ...]
    f = frame(p, query=(2, 3), layer=-1, view="heads")        # f.outputs.pngs, f.outputs.npz, f.details, ...
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from attention.errors import InputError, as_whole
from attention.render import (
    HEAD_COLORS,
    colormap,
    jpeg_bytes,
    mask_overlay,
    masks_figure,
    overlay,
    overlays,
    png_bytes,
    upsample,
)
from attention.vit import drawing
from attention.vit.drawing import BIG_DISPLAY, MIN_DISPLAY, QUERY_COLOR, THUMB_SIDE
from attention.vit.extract import AttentionMaps, threshold_masks
from attention.vit.outputs import SHEET_TILE, Outputs, Tile, write_outputs
from attention.vit.query import Query
from attention.vit.query import label as query_label_text
from attention.vit.session import Pass

VIEWS: dict[str, str] = {
    "heads": "Per-head grid",
    "mean": "Mean of heads",
    "rollout": "Rollout",
    "masks": "Threshold masks",
    "fig3": "All masks (DINO Fig. 3)",
}


def check_view(view: str) -> str:
    """Normalise a view name; raises InputError listing the accepted ones."""
    v = (view or "").strip().lower()
    for key, label in VIEWS.items():
        if v in (key, label.lower()):
            return key
    raise InputError(f"Unknown view {view!r}; accepted: {', '.join(VIEWS)}.")


def check_style(threshold: float, alpha: float, cmap: str) -> None:
    """Validate threshold (0, 1], opacity [0, 1] and colormap name; InputError says what is accepted."""
    try:
        threshold, alpha = float(threshold), float(alpha)
    except (TypeError, ValueError):
        raise InputError(
            f"Threshold {threshold!r} and opacity {alpha!r} must be numbers: threshold in (0, 1], opacity in [0, 1]."
        ) from None
    if not 0 < threshold <= 1:
        raise InputError(
            f"Threshold {threshold} is out of range; "
            "accepted: more than 0, at most 1 (the share of each head's attention the mask keeps)."
        )
    if not 0 <= alpha <= 1:
        raise InputError(f"Opacity {alpha} is out of range; accepted: 0 (image only) to 1 (map only).")
    colormap(cmap)


def display_scale(res: AttentionMaps) -> int:
    """Whole enlargement factor so the shorter side is at least MIN_DISPLAY px (1 for photos)."""
    return drawing.enlargement(res.image.size, MIN_DISPLAY)


def _finish(img: np.ndarray, res: AttentionMaps, scale: int, shrink: int = 1) -> np.ndarray:
    """Enlarge by `scale` (or, drawn `shrink` times smaller, leave as is) and mark the query patch."""
    out = upsample(img, scale) if scale > 1 else img
    if not isinstance(res.query, str):
        out = drawing.paint(out, drawing.square_boxes(res.query, res.patch_size * scale // shrink, out.shape[:2]))
    return np.ascontiguousarray(out)


def sheet_shrink(res: AttentionMaps, max_side: int = SHEET_TILE) -> int:
    """The whole factor that brings `res`'s tiles to `max_side` px or less for a contact sheet,
    when it divides the patch size (so `tiles(..., shrink=k)` can draw them small); else 1."""
    w, h = res.image.size
    k = drawing.reduction((w * display_scale(res), h * display_scale(res)), max_side)
    return k if display_scale(res) == 1 and res.patch_size % k == 0 else 1


def _prefix_names(res: AttentionMaps) -> list[str]:
    return ["CLS"] + [f"register {i}" for i in range(1, res.num_prefix_tokens)]


def _share_caption(res: AttentionMaps, head: int) -> str:
    share = float(res.prefix_share[res.layer, head])
    where = "CLS" if res.num_prefix_tokens == 1 else "CLS+reg"
    return f"{share:.0%} {where}"


def tiles(
    res: AttentionMaps,
    view: str,
    *,
    rollout: np.ndarray | None = None,
    threshold: float = 0.6,
    alpha: float = 0.6,
    cmap: str = "inferno",
    shrink: int = 1,
) -> list[Tile]:
    """The pictures of `view` for `res` (its query and layer), the query patch marked.

    heads: one overlay per head, then the mean of heads; mean: the mean of heads;
    rollout: the rollout map (pass `rollout`, (gh, gw), from `Pass.rollout`);
    masks: per head, the patches holding `threshold` of its attention (DINO's masks), outlined;
    fig3: every head's mask over one image in its own colour, as in DINO's Fig. 3.
    Each map is min-max scaled on its own (colour = where a head looks, not how much).
    Tiles are the image's size times `display_scale(res)`; `shrink` > 1 (a divisor of the patch
    size, see `sheet_shrink`) draws them that many times smaller, on the box-averaged image.
    """
    view = check_view(view)
    check_style(threshold, alpha, cmap)
    s = display_scale(res)
    if shrink > 1 and (s > 1 or res.patch_size % shrink):
        raise InputError(f"Cannot draw {res.patch_size} px patches {shrink} times smaller; use sheet_shrink(res).")
    img = drawing.box_reduce(np.asarray(res.image, dtype=np.uint8), shrink)

    def fin(a: np.ndarray) -> np.ndarray:
        return _finish(a, res, s, shrink)

    if view == "heads":
        ims = [fin(o) for o in overlays(img, np.concatenate([res.maps, res.mean[None]]), alpha=alpha, cmap=cmap)]
        out = [Tile(ims[h], f"head {h} · {_share_caption(res, h)}", f"head_{h:02d}") for h in range(len(res.maps))]
        return out + [Tile(ims[-1], "mean of heads", "mean")]
    if view == "mean":
        return [Tile(fin(overlay(img, res.mean, alpha=alpha, cmap=cmap)), f"mean of {res.maps.shape[0]} heads", "mean")]
    if view == "rollout":
        if rollout is None:
            raise InputError("The rollout view needs the rollout map: compute it with Pass.rollout(query, layer).")
        return [
            Tile(fin(overlay(img, rollout, alpha=alpha, cmap=cmap)), f"rollout through layers 0-{res.layer}", "rollout")
        ]
    masks = threshold_masks(res.maps, threshold)
    if view == "fig3":
        caption = f"every head's mask at {threshold:.0%}, one colour per head"
        return [Tile(fin(masks_figure(img, masks)), caption, "fig3")]
    n = masks[0].size
    return [
        Tile(fin(mask_overlay(img, m)), f"head {h} · {int(m.sum())}/{n} patches hold {threshold:.0%}", f"mask_{h:02d}")
        for h, m in enumerate(masks)
    ]


def big_scale(res: AttentionMaps) -> int:
    """Whole enlargement factor of the large map: its shorter side at least BIG_DISPLAY px."""
    return drawing.enlargement(res.image.size, BIG_DISPLAY)


def crosshair(
    img: np.ndarray, patch: tuple[int, int], step: int, color=QUERY_COLOR, reach: float = drawing.REACH
) -> np.ndarray:
    """Mark patch (row, col) of a picture whose patches are `step` px: a square around it and four
    arms `reach` patches long pointing at it, cyan with a dark edge so they show on any colour
    (`drawing.crosshair_boxes`: the rectangles the browser paints too). uint8 (H, W, 3)."""
    return drawing.paint(img, drawing.crosshair_boxes(patch, step, np.shape(img)[:2], color, reach))


def query_image(
    res: AttentionMaps,
    *,
    head: int | None = None,
    rollout: np.ndarray | None = None,
    alpha: float = 0.6,
    cmap: str = "inferno",
    picture: np.ndarray | None = None,
) -> np.ndarray:
    """The large, clickable map: head `head`'s map (None: the mean of heads; `rollout` when given) over
    the image, or `picture` (uint8, the image's size: a mask view), the query patch marked by a
    crosshair, enlarged by `big_scale(res)`. uint8 (H*s, W*s, 3)."""
    m = rollout if rollout is not None else res.mean if head is None else res.maps[head]
    s = big_scale(res)
    if picture is None:
        picture = overlay(np.asarray(res.image, dtype=np.uint8), m, alpha=alpha, cmap=cmap)
    out = upsample(picture, s)
    if not isinstance(res.query, str):
        out = crosshair(out, res.query, res.patch_size * s)
    return np.ascontiguousarray(out)


def patch_at(x: float, y: float, res: AttentionMaps) -> tuple[int, int]:
    """(row, col) of the patch under pixel (x, y) of `query_image(res)` (clamped to the grid)."""
    return drawing.patch_at(x, y, res.patch_size * big_scale(res), res.grid)


def query_label(res: AttentionMaps) -> str:
    """Markdown naming the query token, and the model's tokens a query may name (`query.tokens_of`)."""
    names = [*res.tokens, *(["pool"] if res.pool else [])]
    has = f" This model's tokens: {', '.join(names)}." if names else " This model has no class token: patches only."
    if res.query == "pool":
        return (
            f"**Query: {query_label_text(res.query)}** (its one attention, after the last layer).{has} "
            "Click a patch of the image to make it the query."
        )
    if isinstance(res.query, str):
        return f"**Query: {query_label_text(res.query)}.**{has} Click a patch of the image to make it the query."
    r, c = res.query
    return f"**Query: patch (row {r}, col {c})**, token {res.query_index}, marked by a cyan square.{has}"


def details(res: AttentionMaps, *, model: str, device: str) -> str:
    """One markdown line: model, patch, grid, tokens, depth, device, milliseconds."""
    gh, gw = res.grid
    L, H, N = res.weights.shape
    w, h = res.image.size
    return (
        f"`{model}` · patch {res.patch_size} px · grid {gh}×{gw} · {N} tokens ({res.num_prefix_tokens} prefix) · "
        f"layer {res.layer}/{L - 1} · {H} heads · input {w}×{h} px · {device} · forward {res.seconds * 1000:.0f} ms"
    )


def token_name(res: AttentionMaps, j: int) -> str:
    """Readable name of token j: CLS, register i, or patch (r, c)."""
    P = res.num_prefix_tokens
    if j < P:
        return _prefix_names(res)[j]
    r, c = divmod(j - P, res.grid[1])
    return f"patch ({r}, {c})"


SCORE_HEADERS = ["rank", "token", "raw score q·k/√d", "softmax weight"]


def scores_table(res: AttentionMaps, head: int, top: int = 10) -> tuple[str, list[list]]:
    """The query row of one head at the selected layer, as DINO's tutorial prints it: raw scores
    and their softmax weights. Returns (markdown summary, rows of SCORE_HEADERS): the `top` tokens
    by weight in rank order, CLS and registers among them where their weight ranks them (the
    summary gives their share)."""
    H = res.weights.shape[1]
    if (h := as_whole(head)) is None:
        raise InputError(f"Head {head!r} is not a whole number; accepted: 0 to {H - 1}.")
    head = h
    if not 0 <= head < H:
        raise InputError(f"Head {head} is out of range; this model has {H} heads: 0 to {H - 1}.")
    s, w = res.scores[res.layer, head], res.weights[res.layer, head]
    P = res.num_prefix_tokens
    order = np.argsort(-w, kind="stable")[:top]
    rows = [[r + 1, token_name(res, j), round(float(s[j]), 3), round(float(w[j]), 4)] for r, j in enumerate(order)]
    share = float(w[:P].sum())
    regs = float(w[1:P].sum()) if P > 1 else None
    ent = float(-(w * np.log(np.maximum(w, 1e-30))).sum())
    summary = (
        f"Head {head}, layer {res.layer}, query {token_name(res, res.query_index) if res.query_index else 'CLS'}: "
        f"softmax over all {len(w)} tokens; **{share:.1%} of the weight on the prefix** "
        f"(CLS {float(w[0]):.1%}" + (f", registers {regs:.1%}" if regs is not None else "") + "); "
        f"scores span {float(s.min()):.2f} to {float(s.max()):.2f}; entropy {ent:.2f} nats "
        f"(uniform: {np.log(len(w)):.2f})."
    )
    return summary, rows


def legend_html(cmap: str = "inferno", view: str = "heads", heads: int = 0, threshold: float = 0.6) -> str:
    """A small HTML legend matching `view`: a colour bar for `cmap` (heads, mean, rollout), the
    tint and outline of the masks (masks), or each head's colour (fig3, `heads` of them)."""
    query = '<span style="color:#0aa">✛</span> query patch'
    style = '<div class="attn-legend" style="display:flex;align-items:center;gap:8px;font-size:0.85em">'
    if view == "masks":
        return (
            f'{style}<span style="display:inline-block;width:14px;height:12px;background:#ff4040;'
            f'opacity:.75;border:2px solid #ff4040"></span><span>the patches holding {threshold:.0%} of the '
            "chosen head's attention (outlined); the rest darkened</span>"
            f'<span style="opacity:0.75">· {query}</span></div>'
        )
    if view == "fig3":
        swatches = "".join(
            f'<span style="white-space:nowrap"><span style="display:inline-block;width:12px;height:12px;'
            f'border-radius:2px;background:rgb{HEAD_COLORS[h % len(HEAD_COLORS)]}"></span> head {h}</span>'
            for h in range(heads)
        )
        return (
            f"{style}<span>each head's {threshold:.0%} mask, tinted and outlined:</span>{swatches}"
            f'<span style="opacity:0.75">· {query}</span></div>'
        )
    lut = colormap(cmap)
    stops = ", ".join(
        f"rgb({r},{g},{b}) {i / 10:.0%}" for i, (r, g, b) in enumerate(lut[np.linspace(0, 255, 11).astype(int)])
    )
    return (
        f"{style}<span>low</span>"
        '<span style="flex:0 0 180px;height:12px;border-radius:3px;'
        f'background:linear-gradient(to right, {stops})"></span>'
        "<span>high attention</span>"
        f'<span style="opacity:0.75">· each map is scaled to its own range · {query}</span></div>'
    )


@dataclass(frozen=True)
class Frame:
    """Everything the viewer shows for one (pass, query, layer, view, style)."""

    res: AttentionMaps  # the pass at this query and layer
    outputs: Outputs  # tile PNGs and the .npz
    query_png: str | None  # the clickable picture (see `query_image`), a PNG path
    details: str
    query_label: str
    scores_summary: str
    scores_rows: list[list]
    legend: str = ""  # `legend_html` for this view and style
    seconds: float = 0.0  # wall time of `frame`: drawing, encoding and writing the files (no forward pass)


def rollout_caption(head_fusion: str = "mean", discard_ratio: float = 0.0, discard: str = "row") -> str:
    """How a rollout was made, for its caption: "max of heads, lowest 90% dropped (whole matrix)"."""
    where = "per row" if discard == "row" else "whole matrix, CLS kept"
    dropped = f", lowest {discard_ratio:.0%} dropped ({where})" if discard_ratio > 0 else ""
    return f"{head_fusion} of heads{dropped}"


def frame(
    p: Pass,
    *,
    query: Query | None = None,
    layer: int = -1,
    view: str = "heads",
    head: int = 0,
    threshold: float = 0.6,
    alpha: float = 0.6,
    cmap: str = "inferno",
    with_query_image: bool = True,
    root: str | os.PathLike | None = None,
    sheet_only: bool = False,
    download: bool = True,
    rollout_options: dict | None = None,
) -> Frame:
    """Compose one view of a cached pass `p` (no forward pass): tiles, files, texts, scores.
    `sheet_only`: a contact sheet and the raw arrays instead of tile files (see `write_outputs`).
    `download=False`: only what the tab shows (gallery pictures, the large map), no .npz.
    `rollout_options`: `flow.rollout`'s head_fusion, discard_ratio and discard, for the rollout view.

    Raises InputError for a bad view, style, layer, head or query (each message says what is accepted).
    """
    t0 = time.perf_counter()
    view = check_view(view)
    check_style(threshold, alpha, cmap)
    res = p.at(query, layer)
    opts = rollout_options or {}
    roll = p.rollout(res.query, res.layer, **opts) if view == "rollout" else None
    summary, rows = scores_table(res, head)
    photo = display_scale(res) == 1  # shown at its own size: JPEG for display (enlarged pixel maps: PNG)
    shrink = sheet_shrink(res) if sheet_only else 1  # the sheet's tiles are drawn small, not drawn then reduced
    ts = tiles(res, view, rollout=roll, threshold=threshold, alpha=alpha, cmap=cmap, shrink=shrink)
    if roll is not None and opts:
        ts = [replace(t, caption=f"{t.caption} · {rollout_caption(**opts)}") for t in ts]
    out = write_outputs(
        res,
        ts,
        model=p.model,
        view=view,
        threshold=threshold,
        rollout=roll,
        root=root,
        sheet_only=sheet_only,
        download=download,
        thumb_side=None if sheet_only else THUMB_SIDE,  # the gallery's pictures
        thumb_jpeg=photo,
    )
    qpng = None
    if with_query_image:
        qpng = os.path.join(os.path.dirname(out.npz or out.thumbs[0]), "query.jpg" if photo else "query.png")
        big_head = head if view in ("heads", "masks") else None
        img = np.asarray(res.image, dtype=np.uint8)
        picture = (
            mask_overlay(img, threshold_masks(res.maps[head : head + 1], threshold)[0])
            if view == "masks"
            else masks_figure(img, threshold_masks(res.maps, threshold))
            if view == "fig3"
            else None
        )
        big = query_image(res, head=big_head, rollout=roll, alpha=alpha, cmap=cmap, picture=picture)
        Path(qpng).write_bytes(jpeg_bytes(big) if photo else png_bytes(big))
    return Frame(
        res,
        out,
        qpng,
        details(res, model=p.model, device=p.device),
        query_label(res),
        summary,
        rows,
        legend=legend_html(cmap, view, res.maps.shape[0], threshold),
        seconds=time.perf_counter() - t0,
    )
