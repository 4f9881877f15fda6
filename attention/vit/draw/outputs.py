"""The files of one render, one writer per consumer, each in a fresh folder that is swept after
an hour: the tab's gallery (tiles reduced), its download (tile PNGs and the .npz of the raw
float32 arrays, also a zip of the PNGs), an API answer (one captioned contact sheet and the raw
arrays); and the render's facts as JSON-ready data.

    ts = views.tiles(res, "heads")                            # [Tile(image, caption, name), ...]
    gal = write_gallery(ts, side=400)                         # gal.thumbs: what the tab shows
    arrays = maps_arrays(res, model="mnist_vit", view="heads", threshold=0.6)     # the .npz's raw arrays
    out = write_files(ts, arrays, npz_name(res, "mnist_vit", "heads"))            # out.pngs, out.npz
    api = write_files(ts, arrays, npz_name(res, "mnist_vit", "heads"), as_sheet=True)  # api.sheet, api.npz
    describe(res, api, model=..., device=..., view=..., threshold=...)   # dict: grid, layer, query, tiles, ms
"""

from __future__ import annotations

import os
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention.config import SETTINGS
from attention.crowd.cache import sweep
from attention.npzfile import save_npz
from attention.render import grid, jpeg_bytes, png_bytes
from attention.vit.draw.drawing import reduced
from attention.vit.engine.extract import AttentionMaps

SHEET_TILE = 448  # px: longest side of a tile on the contact sheet (larger tiles are reduced by a whole factor)


@dataclass(frozen=True)
class Tile:
    """One picture: uint8 (H, W, 3), a caption, and a file-safe name."""

    image: np.ndarray
    caption: str
    name: str


def sheet(ts: list[Tile], *, max_side: int = SHEET_TILE, ncols: int = 4) -> np.ndarray:
    """All tiles on one captioned contact sheet, uint8 (H, W, 3): rows of `ncols`, each tile
    reduced by the smallest whole factor (box average) that brings its longer side to `max_side`
    or less. One picture to look at (the raw arrays remake any tile at full size)."""
    small = [reduced(t.image, max_side) for t in ts]
    return grid(small, ncols=min(ncols, len(ts)), labels=[t.caption for t in ts])


OUTPUT_ROOT = Path(tempfile.gettempdir()) / "attention-explorer"
KEEP_SECONDS = SETTINGS.cache_age  # ATTENTION_FILE_TTL: Gradio serves its own copy of each file


def new_dir(root: Path) -> Path:
    """A fresh folder under `root`; at most once a minute per root, folders older than KEEP_SECONDS go
    (`cache.sweep`)."""
    root.mkdir(parents=True, exist_ok=True)
    sweep(root, KEEP_SECONDS)
    d = root / uuid.uuid4().hex
    d.mkdir()
    return d


@dataclass(frozen=True)
class Outputs:
    """Files of one render (in tile order): what `write_gallery` or `write_files` wrote."""

    pngs: list[str]  # full-size tile PNGs (`write_files`), else empty
    captions: list[str]
    names: list[str]  # file-safe tile names: the .npz holds png/<name>.png
    npz: str | None  # None for the gallery (`write_gallery`)
    sheet: str | None = None  # the contact sheet (`write_files(..., as_sheet=True)`)
    thumbs: list[str] | None = None  # the tiles at gallery size (`write_gallery`), else the pngs themselves


def maps_arrays(
    res: AttentionMaps, *, model: str, view: str, threshold: float, rollout: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """The raw arrays of the download (see `save_npz`): `res.arrays(threshold)` plus model, view
    and, in the rollout view, rollout (gh, gw) float32."""
    arrays = {**res.arrays(threshold), "model": np.array(model), "view": np.array(view)}
    if rollout is not None:
        arrays["rollout"] = rollout.astype(np.float32)
    return arrays


MAPS_AXES = {
    "maps": "heads, rows, cols",
    "mean": "rows, cols",
    "layers": "layers, heads, rows, cols",
    "scores": "layers, heads, tokens",
    "weights": "layers, heads, tokens",
    "prefix_share": "layers, heads",
    "masks": "heads, rows, cols",
    "image": "height, width, rgb",
    "query": "row, col (-1, -1: a token, named by query_token)",
    "rollout": "rows, cols",
}
MAPS_UNITS = {
    "maps": "attention weight (softmax: a query's row sums to 1 over all tokens)",
    "mean": "attention weight, mean over heads",
    "layers": "attention weight",
    "scores": "raw score q.k * scale, before the softmax",
    "weights": "attention weight",
    "prefix_share": "attention weight summed over the prefix tokens",
    "masks": "True where a head's map reaches threshold x its maximum",
    "image": "uint8 RGB, the pixels the model saw",
    "rollout": "attention rollout weight",
}


def maps_meta(res: AttentionMaps, *, model: str, view: str | None, kind: str = "maps") -> dict:
    """The `meta` of a file of `res.arrays` (`attention.npzfile`): kind, model, layer, query, grid, view
    and the axes and units of the arrays `maps_arrays` can hold (`save_npz` keeps those the file has)."""
    return {
        "kind": kind,
        "model": model,
        "layer": res.layer,
        "query": res.query if isinstance(res.query, str) else list(res.query),
        "grid": list(res.grid),
        "view": view,
        "axes": MAPS_AXES,
        "units": MAPS_UNITS,
    }


README_NPZ = """Attention Explorer download.
Arrays (numpy: d = np.load(this_file)): maps (H, gh, gw) float32, the query's attention over patches
at the selected layer; mean (gh, gw); layers (L, H, gh, gw); scores and weights (L, H, N) over all N
tokens (prefix tokens first: CLS, then registers), raw scores and their softmax; prefix_share (L, H);
masks (H, gh, gw) bool; image (gh*p, gw*p, 3) uint8; query (2,) row, col (-1, -1 = CLS); layer;
patch_size; num_prefix_tokens; threshold; model; view; rollout (gh, gw) when the view is rollout;
meta: JSON (json.loads(str(d["meta"]))): model, layer, query, grid, view, each array's shape, axes, units.
Pictures (in the app's download): png/*.png (unzip this file), exactly the overlays shown.
"""


def npz_name(res: AttentionMaps, model: str, view: str) -> str:
    """The download's file name: attention_<model>_L<layer>_<query>_<view>.npz, file-safe."""
    q = res.query if isinstance(res.query, str) else f"r{res.query[0]}c{res.query[1]}"
    safe_model = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model)[:60]
    return f"attention_{safe_model}_L{res.layer}_{q}_{view}.npz"


def write_gallery(ts: list[Tile], *, side: int, jpeg: bool = False, root: str | os.PathLike | None = None) -> Outputs:
    """What the tab sends on every click: each tile reduced to at most `side` px on its longer side
    (`reduced`), as JPEG for photos (`jpeg`) else PNG, in a fresh folder under `root` (default: the
    temp dir; folders older than KEEP_SECONDS are removed). `Outputs.thumbs` are their paths; no .npz."""
    d = new_dir(Path(root) if root else OUTPUT_ROOT)
    thumbs = []
    for t in ts:
        small = reduced(t.image, side)
        p = d / f"{t.name}_small.{'jpg' if jpeg else 'png'}"
        p.write_bytes(jpeg_bytes(small) if jpeg else png_bytes(small))
        thumbs.append(os.fspath(p))
    return Outputs([], [t.caption for t in ts], [t.name for t in ts], None, None, thumbs)


def write_files(
    ts: list[Tile],
    arrays: dict[str, np.ndarray],
    name: str,
    meta: dict | None = None,
    *,
    root: str | os.PathLike | None = None,
    as_sheet: bool = False,
) -> Outputs:
    """The files of a render, in a fresh folder under `root` (as `write_gallery`), with the .npz `name`
    holding `arrays` (`maps_arrays`) and `meta` (`maps_meta`). The tab's download (as_sheet False): each tile
    as a PNG file at full size, the same PNG bytes in the .npz (each tile encoded once); `Outputs.thumbs`
    are the PNGs themselves. An API answer (as_sheet True): one contact-sheet PNG (`Outputs.sheet`) and the
    .npz of the raw arrays alone, from which every overlay can be remade exactly
    (`render.overlay(d["image"], d["maps"][h])`)."""
    d = new_dir(Path(root) if root else OUTPUT_ROOT)
    captions, names = [t.caption for t in ts], [t.name for t in ts]
    if as_sheet:
        sheet_path = d / "sheet.png"
        sheet_path.write_bytes(png_bytes(sheet(ts), threads=min(4, os.cpu_count() or 1)))
        npz = save_npz(d / name, arrays, {}, README_NPZ, meta=meta)
        return Outputs([], captions, names, npz, os.fspath(sheet_path), [])
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:  # zlib releases the GIL
        encoded = dict(zip(names, pool.map(png_bytes, (t.image for t in ts))))
    paths = []
    for tile, data in encoded.items():
        p = d / f"{tile}.png"
        p.write_bytes(data)
        paths.append(os.fspath(p))
    npz = save_npz(d / name, arrays, encoded, README_NPZ, meta=meta)
    return Outputs(paths, captions, names, npz, None, list(paths))


def describe(
    res: AttentionMaps,
    out: Outputs,
    *,
    model: str,
    device: str,
    view: str,
    threshold: float,
    render_seconds: float | None = None,
) -> dict:
    """The facts of one render as JSON-ready data (what `details` says in prose): model, device,
    patch size, grid [gh, gw], tokens, layer, query (a token name or [row, col]), view, the input size
    [w, h], the forward's milliseconds, with `render_seconds` the drawing's and file writing's
    (`render_ms`, see `Frame.seconds`), and each tile's name and caption, in order."""
    L, H, N = res.weights.shape
    timing = {} if render_seconds is None else {"render_ms": round(render_seconds * 1000, 1)}
    return {
        "model": model,
        "device": device,
        "patch_size": res.patch_size,
        "grid": list(res.grid),
        "tokens": N,
        "num_prefix_tokens": res.num_prefix_tokens,
        "num_layers": L,
        "num_heads": H,
        "layer": res.layer,
        "query": res.query if isinstance(res.query, str) else list(res.query),
        "view": view,
        "threshold": float(threshold),
        "input_size": list(res.image.size),
        "forward_ms": round(res.seconds * 1000, 1),
        **timing,
        "tiles": [{"name": n, "caption": c} for n, c in zip(out.names, out.captions)],
    }
