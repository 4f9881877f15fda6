"""A relevance result drawn: the three maps as captioned overlays, and the files of an answer.

ts = tiles(rel)                  # [Tile(relevance), Tile(grad-rollout), Tile(CLS attention)]
sheet_png, npz, info = write_answer(rel, model="mnist_vit")
"""

from __future__ import annotations

import numpy as np

from attention.npzfile import save_npz
from attention.render import MIN_SIDE, overlay, png_bytes
from attention.render import enlarged as render_enlarged
from attention.vit.draw.outputs import OUTPUT_ROOT, Tile, new_dir, sheet
from attention.vit.engine.request import CMAP, OPACITY
from attention.vit.relevance.compute import Relevance
from attention.vit.relevance.labels import short_name

# smaller images (mnist_vit's 28 x 28 digits) are enlarged by a whole factor for display: `render.MIN_SIDE`

CAPTIONS = {
    "chefer": "Why '{cls}'? Relevance (Chefer et al. 2021)",
    "grad_rollout": "Why '{cls}'? Grad-rollout (vit-explain)",
    "attention": "Attention of CLS, last layer (any class)",
}
README_NPZ = """Attention Explorer: class relevance.
Arrays: chefer, grad_rollout, attention (gh, gw) float32: the maps over patches (relevance for the target
class by Chefer et al.'s rule and by vit-explain's grad-rollout; the last layer's CLS attention, mean of heads);
chefer_row, grad_rollout_row (N,) and attention_rows (L, H, N) over all tokens (prefix first); logits and
probs (C,); target; num_prefix_tokens; image uint8 (gh*p, gw*p, 3).
"""


def enlarged(rel: Relevance, min_side: int = MIN_SIDE) -> np.ndarray:
    """The image rel's grid aligns to, uint8 (H, W, 3), enlarged (nearest) by the smallest whole factor
    that brings its shorter side to `min_side` px or more."""
    return render_enlarged(rel.image, min_side)


def tiles(
    rel: Relevance, *, alpha: float = OPACITY.default, cmap: str = CMAP.default, min_side: int = MIN_SIDE
) -> list[Tile]:
    """The relevance map, grad-rollout and the CLS attention of the same pass, captioned, each min-max scaled,
    on the image enlarged to `min_side` px (`enlarged`)."""
    base = enlarged(rel, min_side)
    cls = short_name(rel.names[rel.target])
    maps = {"chefer": rel.chefer_map, "grad_rollout": rel.grad_rollout_map, "attention": rel.attention_map}
    return [Tile(overlay(base, m, alpha=alpha, cmap=cmap), CAPTIONS[k].format(cls=cls), k) for k, m in maps.items()]


def describe(rel: Relevance, *, model: str, k: int = 5) -> dict:
    """The answer's facts: model, target, top-k classes, grid, what each picture is, time."""
    return {
        "model": model,
        **rel.summary(k),
        "pictures": [t for t in CAPTIONS],
        "captions": {key: c.format(cls=short_name(rel.names[rel.target])) for key, c in CAPTIONS.items()},
        "relevance_ms": round(rel.seconds * 1e3, 1),
    }


AXES = {
    "chefer": "rows, cols",
    "grad_rollout": "rows, cols",
    "attention": "rows, cols",
    "chefer_row": "tokens",
    "grad_rollout_row": "tokens",
    "attention_rows": "layers, heads, tokens",
    "logits": "classes",
    "probs": "classes",
    "image": "height, width, rgb",
}
UNITS = {
    "chefer": "relevance for the target class (Chefer et al. 2021)",
    "grad_rollout": "grad-rollout relevance (vit-explain)",
    "attention": "attention weight of CLS, last layer, mean of heads",
    "probs": "softmax probability",
    "image": "uint8 RGB, the pixels the model saw",
}


def relevance_meta(rel: Relevance, model: str, arrays: dict[str, np.ndarray]) -> dict:
    """The common `meta` of the answer's .npz (`attention.npzfile`): kind "relevance", every layer, CLS's query."""
    grid = list(arrays["chefer"].shape)
    return {"kind": "relevance", "model": model, "query": "cls", "grid": grid, "axes": AXES, "units": UNITS}


def write_answer(
    rel: Relevance, *, model: str, alpha: float = OPACITY.default, cmap: str = CMAP.default
) -> tuple[str, str, dict]:
    """(the captioned sheet PNG's path, the .npz's path, the facts) in a fresh folder, swept with the others."""
    ts = tiles(rel, alpha=alpha, cmap=cmap)
    d = new_dir(OUTPUT_ROOT)
    pic = d / "relevance.png"
    pic.write_bytes(png_bytes(sheet(ts, ncols=3)))
    arrays = {**rel.arrays(), "model": np.array(model)}
    pngs = {t.name: png_bytes(t.image) for t in ts}
    npz = save_npz(d / "relevance.npz", arrays, pngs, README_NPZ, meta=relevance_meta(rel, model, arrays))
    return str(pic), npz, describe(rel, model=model)
