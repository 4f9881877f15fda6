"""The model view: every layer x every head for one query, on one sheet, from one pass.

Rows are layers (first at the top), columns are heads; each tile is that head's map of the query
token laid over a reduced copy of the image, min-max scaled on its own like the heads view, with
the query patch outlined. bertviz's model view, for image patches.

    sheet = model_view(p, query=(5, 7))          # p: a MapsSource (a served pass, q/k kept)
    Image.fromarray(sheet).save("model_view.png")
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from attention.errors import InputError
from attention.render import grid, mark_patch, overlays
from attention.vit.draw.drawing import QUERY_COLOR
from attention.vit.draw.source import MapsSource
from attention.vit.engine.query import Query
from attention.vit.engine.request import CMAP, OPACITY

MODEL_TILE = 160  # px: a tile's longer side (a ViT-B has 144 tiles: about 2,000 px by 1,300)


def model_view(
    p: MapsSource,
    query: Query | None = None,
    *,
    tile: int = MODEL_TILE,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
) -> np.ndarray:
    """Every layer's every head's map of `query` (no new forward: rows requeried from kept q/k).

    p: a pass whose q/k were kept (or whose query is `query`). tile: longer side of a tile in px
    (at least one px per patch). Returns uint8 (L * (t_h + cap + pad) + pad, H * (t_w + pad) + pad, 3):
    L rows of H tiles, each captioned "L{layer} h{head}".
    Raises InputError for a query off the grid or a tile size out of range.
    """
    if not 16 <= int(tile) <= 512:
        raise InputError(f"Tile size {tile} px is out of range; accepted: 16 to 512.")
    base = p.at(query, 0)
    gh, gw = base.grid
    s = max(1, int(tile) // max(gh, gw))  # px per patch on a tile
    small = np.asarray(base.image.convert("RGB").resize((gw * s, gh * s), Image.BOX))
    rows, labels = [], []
    for layer in range(p.num_layers):
        res = p.at(query, layer)
        tiles = overlays(small, res.maps, alpha=alpha, cmap=cmap)  # H x (gh*s, gw*s, 3)
        if isinstance(res.query, tuple):
            tiles = [mark_patch(t, res.query, s, color=QUERY_COLOR) for t in tiles]
        rows.append(tiles)
        labels += [f"L{layer} h{h}" for h in range(len(tiles))]

    return grid([t for r in rows for t in r], ncols=len(rows[0]), labels=labels)
