"""What the attention viewer draws: overlay tiles per view and the large, clickable query image
(with the patch under a click), at whole enlargement factors, the query patch marked. The texts
beside them are `attention.vit.draw.texts`; `attention.vit.draw.frames` composes both for the tab, its
download and the API.

Everything is numpy and PIL (no matplotlib figure): tiles are uint8 (H, W, 3) arrays,
encoded to PNG once and both served and packed into the download.

    res = p.at(query, layer)                                  # see attention.vit.serve.passes
    ts = tiles(res, "heads", alpha=0.6, cmap="inferno")       # [Tile(image, caption, name), ...]
    big = query_image(res, head=0)                            # uint8 (H*s, W*s, 3), crosshair on the query
"""

from __future__ import annotations

import numpy as np

from attention.errors import InputError
from attention.render import mask_overlay, masks_figure, overlay, overlays, upsample
from attention.vit.draw import drawing
from attention.vit.draw.drawing import BIG_DISPLAY, MIN_DISPLAY, QUERY_COLOR
from attention.vit.draw.outputs import SHEET_TILE, Tile
from attention.vit.engine.extract import AttentionMaps, threshold_masks
from attention.vit.engine.query import prefix_phrase
from attention.vit.engine.request import CMAP, OPACITY, THRESHOLD, VIEWS, check_style, check_view

__all__ = ["VIEWS", "check_style", "check_view"]  # declared in `request`, named here as before


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


def _share_caption(res: AttentionMaps, head: int) -> str:
    share = float(res.prefix_share[res.layer, head])
    return f"{share:.0%} {prefix_phrase(res.tokens)}"


def tiles(
    res: AttentionMaps,
    view: str,
    *,
    threshold: float = THRESHOLD.default,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
    **drawn,
) -> list[Tile]:
    """The pictures of `view` for `res` (its query and layer), the query patch marked.

    heads: one overlay per head, then the mean of heads; mean: the mean of heads;
    rollout: the rollout map (pass `rollout`, (gh, gw), from `Pass.rollout`);
    masks: per head, the patches holding `threshold` of its attention (DINO's masks), outlined;
    fig3: every head's mask over one image in its own colour, as in DINO's Fig. 3.
    Each map is min-max scaled on its own (colour = where a head looks, not how much).
    Tiles are the image's size times `display_scale(res)`; `shrink` > 1 (a divisor of the patch
    size, see `sheet_shrink`) draws them that many times smaller, on the box-averaged image.
    drawn: `drawn_tiles`'s rollout and shrink.
    """
    view = check_view(view)
    check_style(threshold, alpha, cmap)
    return drawn_tiles(res, view, threshold=threshold, alpha=alpha, cmap=cmap, **drawn)


def drawn_tiles(
    res: AttentionMaps,
    view: str,
    *,
    rollout: np.ndarray | None = None,
    threshold: float = THRESHOLD.default,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
    shrink: int = 1,
) -> list[Tile]:
    """`tiles` for a view and style already checked (a `frames.ViewSpec`'s): nothing checked again."""
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
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
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
