"""One view of a cached pass, composed for each of its consumers (no forward pass), a
`request.ViewSpec` (the view as asked, checked once) each: the tab's
frame (`tab_frame`: the gallery, the large clickable map, the texts), the tab's download
(`download_maps`: full-size tile PNGs and the .npz) and an API answer (`api_sheet`: one contact
sheet and the raw arrays). Each draws the view's tiles the same way (`views.tiles`) and writes
only its own files (`outputs.write_gallery`, `write_files`).

    v = ViewSpec(query=(2, 3), layer=-1, view="heads")
    f = tab_frame(p, v, head=0)                  # f.outputs.thumbs, f.query_png, f.details, ...
    npz = download_maps(p, v).outputs.npz        # the .npz of the view on screen
    r = api_sheet(p, ViewSpec(view="rollout", rollout_options={"head_fusion": "max"}))   # r.outputs.sheet, .npz
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from attention.render import jpeg_bytes, mask_overlay, masks_figure, png_bytes
from attention.vit.draw.drawing import THUMB_SIDE
from attention.vit.draw.outputs import (
    Outputs,
    Tile,
    maps_arrays,
    maps_meta,
    npz_name,
    write_files,
    write_gallery,
)
from attention.vit.draw.source import MapsSource
from attention.vit.draw.texts import details, legend_html, query_label, rollout_caption, scores_table
from attention.vit.draw.views import display_scale, drawn_tiles, query_image, sheet_shrink
from attention.vit.engine.extract import AttentionMaps, threshold_masks
from attention.vit.engine.request import ViewSpec

__all__ = ["ViewSpec", "Frame", "Render", "tab_frame", "download_maps", "api_sheet", "pictures"]


@dataclass(frozen=True)
class Render:
    """The files of one view and what they show: `res` (the pass at that query and layer), the files
    (`outputs`), and the wall time of drawing, encoding and writing them (no forward pass)."""

    res: AttentionMaps
    outputs: Outputs
    seconds: float = 0.0


@dataclass(frozen=True)
class Frame(Render):
    """Everything the tab shows for one (pass, query, layer, view, style): the gallery's tiles
    (`outputs.thumbs`), the large clickable map and the texts beside them (`attention.vit.draw.texts`)."""

    query_png: str = ""  # the clickable picture (see `views.query_image`), a JPEG (photos) or PNG path
    details: str = ""
    query_label: str = ""
    scores_summary: str = ""
    scores_rows: list[list] | None = None
    legend: str = ""  # `texts.legend_html` for this view and style


@dataclass(frozen=True)
class _Drawn:
    res: AttentionMaps
    view: str
    rollout: np.ndarray | None  # (gh, gw), the rollout view's map
    tiles: list[Tile]

    def arrays(self, model: str, threshold: float) -> tuple[dict[str, np.ndarray], str, dict]:
        """The download's raw arrays (`outputs.maps_arrays`), its file name and its meta (`outputs.maps_meta`)."""
        arrays = maps_arrays(self.res, model=model, view=self.view, threshold=threshold, rollout=self.rollout)
        return arrays, npz_name(self.res, model, self.view), maps_meta(self.res, model=model, view=self.view)


def _draw(p: MapsSource, v: ViewSpec, for_sheet: bool = False) -> _Drawn:
    """The view's tiles from pass `p` (view and style checked by `ViewSpec`; query and layer by `MapsSource.at`);
    `for_sheet`: drawn small for a contact sheet (`views.sheet_shrink`), not drawn then reduced."""
    view = v.view
    res = p.at(v.query, v.layer)
    opts = v.rollout_options or {}
    roll = p.rollout(res.query, res.layer, **opts) if view == "rollout" else None
    shrink = sheet_shrink(res) if for_sheet else 1
    ts = drawn_tiles(res, view, rollout=roll, threshold=v.threshold, alpha=v.alpha, cmap=v.cmap, shrink=shrink)
    if roll is not None and opts:
        ts = [replace(t, caption=f"{t.caption} · {rollout_caption(**opts)}") for t in ts]
    return _Drawn(res, view, roll, ts)


def _large_map(d: _Drawn, v: ViewSpec, head: int) -> np.ndarray:
    """The large map of the view: head `head`'s map (heads), its mask (masks), every head's mask (fig3),
    the rollout, else the mean of heads; uint8, see `views.query_image`."""
    res, img = d.res, np.asarray(d.res.image, dtype=np.uint8)
    picture = (
        mask_overlay(img, threshold_masks(res.maps[head : head + 1], v.threshold)[0])
        if d.view == "masks"
        else masks_figure(img, threshold_masks(res.maps, v.threshold))
        if d.view == "fig3"
        else None
    )
    big_head = head if d.view in ("heads", "masks") else None
    return query_image(res, head=big_head, rollout=d.rollout, alpha=v.alpha, cmap=v.cmap, picture=picture)


def pictures(p: MapsSource, v: ViewSpec = ViewSpec(), *, head: int = 0) -> tuple[AttentionMaps, list[Tile], np.ndarray]:
    """View `v` of `p` drawn in memory, as `tab_frame` draws it (no file): the result at the view's query and
    layer, its tiles and the large map (uint8, `views.query_image`). InputError as `tab_frame`."""
    d = _draw(p, v)
    return d.res, d.tiles, _large_map(d, v, head)


def tab_frame(
    p: MapsSource, v: ViewSpec = ViewSpec(), *, head: int = 0, root: str | os.PathLike | None = None
) -> Frame:
    """What the tab shows for view `v` of cached pass `p`: the tiles at gallery size (`THUMB_SIDE`),
    the large map (JPEG for a photo shown at its own size, else PNG), details, the query's label, the
    scores table of head `head` and the legend. No .npz (`download_maps` makes it when asked for).

    Raises InputError for a bad view, style, layer, head or query (each message says what is accepted).
    """
    t0 = time.perf_counter()
    d = _draw(p, v)
    res = d.res
    summary, rows = scores_table(res, head)
    photo = display_scale(res) == 1  # shown at its own size: JPEG for display (enlarged pixel maps: PNG)
    out = write_gallery(d.tiles, side=THUMB_SIDE, jpeg=photo, root=root)
    qpng = os.path.join(os.path.dirname(out.thumbs[0]), "query.jpg" if photo else "query.png")
    big = _large_map(d, v, head)
    Path(qpng).write_bytes(jpeg_bytes(big) if photo else png_bytes(big))
    return Frame(
        res,
        out,
        time.perf_counter() - t0,
        query_png=qpng,
        details=details(res, model=p.model, device=p.device),
        query_label=query_label(res),
        scores_summary=summary,
        scores_rows=rows,
        legend=legend_html(v.cmap, d.view, res.maps.shape[0], v.threshold),
    )


def download_maps(p: MapsSource, v: ViewSpec = ViewSpec(), *, root: str | os.PathLike | None = None) -> Render:
    """The tab's download of view `v` of `p`: every tile as a full-size PNG and the .npz of the raw
    maps with the same PNGs (`outputs.write_files`). InputError as `tab_frame`."""
    t0 = time.perf_counter()
    d = _draw(p, v)
    out = write_files(d.tiles, *d.arrays(p.model, v.threshold), root=root)
    return Render(d.res, out, time.perf_counter() - t0)


def api_sheet(p: MapsSource, v: ViewSpec = ViewSpec(), *, root: str | os.PathLike | None = None) -> Render:
    """An API answer for view `v` of `p`: one captioned contact sheet, its tiles drawn small, and the
    .npz of the raw arrays (`outputs.write_files(..., as_sheet=True)`); `Render.seconds` is its render_ms. InputError as
    `tab_frame`."""
    t0 = time.perf_counter()
    d = _draw(p, v, for_sheet=True)
    out = write_files(d.tiles, *d.arrays(p.model, v.threshold), root=root, as_sheet=True)
    return Render(d.res, out, time.perf_counter() - t0)
