"""What the attention viewer shows: overlay tiles per view, the clickable query image, the
details line, the scores-vs-weights table, the colour legend, and the download file.

Everything is numpy and PIL (no matplotlib figure): tiles are uint8 (H, W, 3) arrays,
encoded to PNG once and both served and packed into the download.

    res = p.at(query, layer)                                  # see attention.session
    ts = tiles(res, "heads", alpha=0.6, cmap="inferno")       # [Tile(image, caption, name), ...]
    out = write_outputs(res, ts, model="mnist_vit", view="heads", threshold=0.6)
    out.pngs, out.npz                                         # file paths
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from attention.errors import InputError
from attention.extract import AttentionMaps, Query, threshold_masks
from attention.render import colormap, mark_patch, mask_overlay, overlay, upsample
from attention.session import Pass

VIEWS: dict[str, str] = {
    "heads": "Per-head grid",
    "mean": "Mean of heads",
    "rollout": "Rollout",
    "masks": "Threshold masks",
}
MIN_DISPLAY = 224  # px: smaller images (MNIST's 28) are shown enlarged by a whole factor
QUERY_COLOR = (0, 255, 255)  # cyan square around the query patch


@dataclass(frozen=True)
class Tile:
    """One picture: uint8 (H, W, 3), a caption, and a file-safe name."""

    image: np.ndarray
    caption: str
    name: str


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
        raise InputError(f"Threshold {threshold!r} and opacity {alpha!r} must be numbers: threshold in (0, 1], opacity in [0, 1].") from None
    if not 0 < threshold <= 1:
        raise InputError(f"Threshold {threshold} is out of range; accepted: more than 0, at most 1 (the share of each head's attention the mask keeps).")
    if not 0 <= alpha <= 1:
        raise InputError(f"Opacity {alpha} is out of range; accepted: 0 (image only) to 1 (map only).")
    colormap(cmap)


def display_scale(res: AttentionMaps) -> int:
    """Whole enlargement factor so the shorter side is at least MIN_DISPLAY px (1 for photos)."""
    w, h = res.image.size
    return max(1, -(-MIN_DISPLAY // min(w, h)))


def _finish(img: np.ndarray, res: AttentionMaps, scale: int) -> np.ndarray:
    out = upsample(img, scale) if scale > 1 else img
    if not isinstance(res.query, str):
        out = mark_patch(out, res.query, res.patch_size * scale, color=QUERY_COLOR)
    return np.ascontiguousarray(out)


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
) -> list[Tile]:
    """The pictures of `view` for `res` (its query and layer), the query patch marked.

    heads: one overlay per head, then the mean of heads; mean: the mean of heads;
    rollout: the rollout map (pass `rollout`, (gh, gw), from `Pass.rollout`);
    masks: per head, the patches holding `threshold` of its attention (DINO's masks).
    Each map is min-max scaled on its own (colour = where a head looks, not how much).
    """
    view = check_view(view)
    check_style(threshold, alpha, cmap)
    s = display_scale(res)
    img = np.asarray(res.image, dtype=np.uint8)

    def ov(m: np.ndarray) -> np.ndarray:
        return _finish(overlay(img, m, alpha=alpha, cmap=cmap), res, s)

    if view == "heads":
        out = [Tile(ov(m), f"head {h} · {_share_caption(res, h)}", f"head_{h:02d}") for h, m in enumerate(res.maps)]
        return out + [Tile(ov(res.mean), "mean of heads", "mean")]
    if view == "mean":
        return [Tile(ov(res.mean), f"mean of {res.maps.shape[0]} heads", "mean")]
    if view == "rollout":
        if rollout is None:
            raise InputError("The rollout view needs the rollout map: compute it with Pass.rollout(query, layer).")
        return [Tile(ov(rollout), f"rollout through layers 0-{res.layer}", "rollout")]
    masks = threshold_masks(res.maps, threshold)
    n = masks[0].size
    return [
        Tile(_finish(mask_overlay(img, m), res, s), f"head {h} · {int(m.sum())}/{n} patches hold {threshold:.0%}", f"mask_{h:02d}")
        for h, m in enumerate(masks)
    ]


def query_image(res: AttentionMaps, *, rollout: np.ndarray | None = None, alpha: float = 0.6, cmap: str = "inferno") -> np.ndarray:
    """The clickable picture: the mean map (or `rollout` when given) over the image, query marked,
    enlarged by `display_scale(res)`. uint8 (H*s, W*s, 3)."""
    m = res.mean if rollout is None else rollout
    return _finish(overlay(np.asarray(res.image, dtype=np.uint8), m, alpha=alpha, cmap=cmap), res, display_scale(res))


def patch_at(x: float, y: float, res: AttentionMaps) -> tuple[int, int]:
    """(row, col) of the patch under pixel (x, y) of `query_image(res)` (clamped to the grid)."""
    step = res.patch_size * display_scale(res)
    gh, gw = res.grid
    return min(gh - 1, max(0, int(y // step))), min(gw - 1, max(0, int(x // step)))


def query_label(res: AttentionMaps) -> str:
    """Markdown naming the query token."""
    if isinstance(res.query, str):
        return "**Query: the CLS token.** Click a patch of the image to make it the query."
    r, c = res.query
    return f"**Query: patch (row {r}, col {c})**, token {res.query_index}, marked by a cyan square."


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
    and their softmax weights. Returns (markdown summary, rows of SCORE_HEADERS) with the prefix
    tokens (CLS, registers) first, then the `top` patches by weight."""
    H = res.weights.shape[1]
    try:
        head = int(head)
    except (TypeError, ValueError):
        raise InputError(f"Head {head!r} is not a number; accepted: 0 to {H - 1}.") from None
    if not 0 <= head < H:
        raise InputError(f"Head {head} is out of range; this model has {H} heads: 0 to {H - 1}.")
    s, w = res.scores[res.layer, head], res.weights[res.layer, head]
    P = res.num_prefix_tokens
    order = P + np.argsort(-w[P:], kind="stable")[:top]
    rank = np.empty(len(w), int)
    rank[np.argsort(-w, kind="stable")] = np.arange(1, len(w) + 1)
    rows = [[int(rank[j]), token_name(res, j), round(float(s[j]), 3), round(float(w[j]), 4)] for j in [*range(P), *order]]
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


def legend_html(cmap: str = "inferno") -> str:
    """A small HTML colour bar for `cmap` with how to read the maps."""
    lut = colormap(cmap)
    stops = ", ".join(f"rgb({r},{g},{b}) {i / 10:.0%}" for i, (r, g, b) in enumerate(lut[np.linspace(0, 255, 11).astype(int)]))
    return (
        '<div class="attn-legend" style="display:flex;align-items:center;gap:8px;font-size:0.85em">'
        "<span>low</span>"
        f'<span style="flex:0 0 180px;height:12px;border-radius:3px;background:linear-gradient(to right, {stops})"></span>'
        "<span>high attention</span>"
        '<span style="opacity:0.75">· each map is scaled to its own range · '
        '<span style="color:#0aa">▢</span> query patch</span></div>'
    )


# ----- files ---------------------------------------------------------------------------------
OUTPUT_ROOT = Path(tempfile.gettempdir()) / "attention-explorer"
KEEP_SECONDS = 3600


def png_bytes(img: np.ndarray) -> bytes:
    """Lossless PNG encoding of uint8 (H, W, 3), tuned for speed (zlib level 1)."""
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _new_dir(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    now = time.time()
    for old in root.iterdir():  # forget outputs older than an hour
        try:
            if now - old.stat().st_mtime > KEEP_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    d = root / uuid.uuid4().hex
    d.mkdir()
    return d


@dataclass(frozen=True)
class Outputs:
    """Files of one render: one PNG per tile (in tile order) and the download archive."""

    pngs: list[str]
    captions: list[str]
    npz: str


def maps_arrays(res: AttentionMaps, *, model: str, view: str, threshold: float, rollout: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The raw arrays of the download (see `save_npz`): `res.arrays(threshold)` plus model, view
    and, in the rollout view, rollout (gh, gw) float32."""
    arrays = {**res.arrays(threshold), "model": np.array(model), "view": np.array(view)}
    if rollout is not None:
        arrays["rollout"] = rollout.astype(np.float32)
    return arrays


def save_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray], pngs: dict[str, bytes]) -> str:
    """Write one .npz that is also a zip of PNGs: `np.load(path)[name]` gives each array
    (no pickle needed); members `png/<name>.png` are the pictures (`unzip path` extracts them,
    `np.load(path)["png/<name>.png"]` returns their bytes)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:  # floats and PNGs barely deflate
        for name, a in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)
        for name, data in pngs.items():
            z.writestr(zipfile.ZipInfo(f"png/{name}.png", time.localtime()[:6]), data, compress_type=zipfile.ZIP_STORED)
        z.writestr("README.txt", README_NPZ)
    return os.fspath(path)


README_NPZ = """Attention Explorer download.
Arrays (numpy: d = np.load(this_file)): maps (H, gh, gw) float32, the query's attention over patches
at the selected layer; mean (gh, gw); layers (L, H, gh, gw); scores and weights (L, H, N) over all N
tokens (prefix tokens first: CLS, then registers), raw scores and their softmax; prefix_share (L, H);
masks (H, gh, gw) bool; image (gh*p, gw*p, 3) uint8; query (2,) row, col (-1, -1 = CLS); layer;
patch_size; num_prefix_tokens; threshold; model; view; rollout (gh, gw) when the view is rollout.
Pictures: png/*.png (unzip this file), exactly the overlays shown.
"""


def write_outputs(
    res: AttentionMaps,
    ts: list[Tile],
    *,
    model: str,
    view: str,
    threshold: float,
    rollout: np.ndarray | None = None,
    root: str | os.PathLike | None = None,
) -> Outputs:
    """Encode the tiles to PNG once; write them as files and, with the raw maps, into one .npz.

    Files go to a fresh folder under `root` (default: the temp dir); folders older than an
    hour are removed.
    """
    d = _new_dir(Path(root) if root else OUTPUT_ROOT)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:  # zlib releases the GIL
        encoded = dict(zip((t.name for t in ts), pool.map(png_bytes, (t.image for t in ts))))
    paths = []
    for name, data in encoded.items():
        p = d / f"{name}.png"
        p.write_bytes(data)
        paths.append(os.fspath(p))
    q = "cls" if isinstance(res.query, str) else f"r{res.query[0]}c{res.query[1]}"
    safe_model = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model)[:60]
    npz = save_npz(d / f"attention_{safe_model}_L{res.layer}_{q}_{view}.npz",
                   maps_arrays(res, model=model, view=view, threshold=threshold, rollout=rollout), encoded)
    return Outputs(paths, [t.caption for t in ts], npz)



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


def frame(
    p: Pass,
    *,
    query: Query = "cls",
    layer: int = -1,
    view: str = "heads",
    head: int = 0,
    threshold: float = 0.6,
    alpha: float = 0.6,
    cmap: str = "inferno",
    with_query_image: bool = True,
    root: str | os.PathLike | None = None,
) -> Frame:
    """Compose one view of a cached pass `p` (no forward pass): tiles, files, texts, scores.

    Raises InputError for a bad view, style, layer, head or query (each message says what is accepted).
    """
    view = check_view(view)
    check_style(threshold, alpha, cmap)
    res = p.at(query, layer)
    roll = p.rollout(res.query, res.layer) if view == "rollout" else None
    summary, rows = scores_table(res, head)
    ts = tiles(res, view, rollout=roll, threshold=threshold, alpha=alpha, cmap=cmap)
    out = write_outputs(res, ts, model=p.model, view=view, threshold=threshold, rollout=roll, root=root)
    qpng = None
    if with_query_image:
        qpng = os.path.join(os.path.dirname(out.npz), "query.png")
        Path(qpng).write_bytes(png_bytes(query_image(res, rollout=roll, alpha=alpha, cmap=cmap)))
    return Frame(res, out, qpng, details(res, model=p.model, device=p.device), query_label(res), summary, rows)
