"""Results out: per-head overlays, the mean, threshold masks as PNG, raw arrays as .npz.

One place for the files a user takes away, used by the command line and the app's download:

    files = write_outputs(res, "out/cat", threshold=0.6)   # -> list of written paths
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from attention.extract import AttentionMaps, threshold_masks
from attention.render import mark_patch, mask_overlay, overlay


def arrays(res: AttentionMaps, threshold: float = 0.6) -> dict[str, np.ndarray]:
    """The raw arrays of a result, float32 unless noted:
    maps (H, gh, gw) selected layer; layers (L, H, gh, gw); scores and weights (L, H, N);
    prefix_share (L, H); masks bool (H, gh, gw); grid, query (-1, -1 for CLS), layer,
    patch_size, num_prefix_tokens, threshold as small int/float arrays."""
    return {
        "maps": res.maps, "layers": res.layers, "scores": res.scores, "weights": res.weights,
        "prefix_share": res.prefix_share, "masks": threshold_masks(res.maps, threshold),
        "grid": np.array(res.grid), "query": np.array((-1, -1) if res.query == "cls" else res.query),
        "layer": np.array(res.layer), "patch_size": np.array(res.patch_size),
        "num_prefix_tokens": np.array(res.num_prefix_tokens), "threshold": np.array(threshold, np.float32),
    }


def pictures(res: AttentionMaps, *, threshold: float = 0.6, alpha: float = 0.6, cmap: str = "inferno") -> dict[str, np.ndarray]:
    """uint8 (H, W, 3) PNG-ready pictures: img, head{h}, mean, mask{h}; the query patch marked."""
    base = np.asarray(res.image)
    if res.query != "cls":
        base = mark_patch(base, res.query, res.patch_size)
    out = {"img": np.asarray(res.image)}
    for h, m in enumerate(res.maps):
        out[f"head{h}"] = overlay(base, m, alpha=alpha, cmap=cmap)
    out["mean"] = overlay(base, res.mean, alpha=alpha, cmap=cmap)
    for h, m in enumerate(threshold_masks(res.maps, threshold)):
        out[f"mask{h}"] = mask_overlay(base, m)
    return out


def write_outputs(res: AttentionMaps, out_dir: str | Path, *, threshold: float = 0.6, alpha: float = 0.6,
                  cmap: str = "inferno") -> list[Path]:
    """Write every picture of `pictures` as PNG and `arrays` as attention.npz into out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, pic in pictures(res, threshold=threshold, alpha=alpha, cmap=cmap).items():
        paths.append(out / f"{name}.png")
        Image.fromarray(pic).save(paths[-1])
    paths.append(out / "attention.npz")
    np.savez_compressed(paths[-1], **arrays(res, threshold))
    return paths
