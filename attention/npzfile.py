"""The one `.npz` writer: every file of arrays the app, its API and the command line hand out (a view's
maps, the features, a video's maps, class and text relevance) is written here, in one layout.

    save_npz("maps.npz", {"maps": m}, meta={"kind": "maps", "model": "mnist_vit", "layer": 3,
             "axes": {"maps": "heads, rows, cols"}, "units": {"maps": "attention weight (softmax)"}})
    d = np.load("maps.npz"); json.loads(str(d["meta"]))   # the common `meta` entry, no pickle needed

The layout: one `<name>.npy` member per array (`np.load(path)[name]`), a `meta` entry (a 0-d str array
holding JSON: `format`, `kind`, `model`, `layer`, `query`, `grid`, `view` (None where a file has none) and
`arrays`: per array its shape, dtype and, where the writer was told, its axes and units), optional
PNGs as members `png/<name>.png` (`unzip` extracts them) and a README.txt.
"""

from __future__ import annotations

import json
import os
import time
import zipfile
from typing import IO

import numpy as np

FORMAT = "attention-explorer npz 1"
COMMON = ("kind", "model", "layer", "query", "grid", "view")  # in every file's meta, None where it has none


def meta_entry(arrays: dict[str, np.ndarray], meta: dict | None) -> dict:
    """The `meta` of a file of `arrays`: FORMAT, the COMMON keys (None when `meta` lacks them), the rest of
    `meta` as given (JSON-ready), and `arrays`: per name {shape, dtype, axes?, units?} from `meta["axes"]`
    and `meta["units"]` (dicts by array name, folded in; names the file lacks are left out)."""
    meta = dict(meta or {})
    axes, units = meta.pop("axes", {}), meta.pop("units", {})
    described = {}
    for name, a in arrays.items():
        a = np.asanyarray(a)
        entry: dict = {"shape": list(a.shape), "dtype": str(a.dtype)}
        if name in axes:
            entry["axes"] = axes[name]
        if name in units:
            entry["units"] = units[name]
        described[name] = entry
    return {"format": FORMAT, **{k: meta.pop(k, None) for k in COMMON}, **meta, "arrays": described}


def save_npz(
    path: str | os.PathLike | IO[bytes],
    arrays: dict[str, np.ndarray],
    pngs: dict[str, bytes] | None = None,
    readme: str | None = None,
    *,
    meta: dict | None = None,
    compress: bool = False,
) -> str | IO[bytes]:
    """Write `arrays` (name -> array of any shape) to `path` (a path or a writable binary file) in the one
    layout (module docstring): each array a member `<name>.npy` (no pickle), the `meta` entry
    (`meta_entry(arrays, meta)`), each of `pngs` (name -> PNG bytes) a member `png/<name>.png`, and README.txt
    when `readme` is given. `compress` deflates the arrays (floats barely shrink; masks do). Returns `path`
    (as a str when it is one)."""
    if "meta" in arrays:
        raise ValueError("'meta' is the layout's own entry; name the array otherwise")
    entries = {**arrays, "meta": np.array(json.dumps(meta_entry(arrays, meta)))}
    how = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", compression=how) as z:
        for name, a in entries.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)
        stamp = time.localtime()[:6]
        for name, data in (pngs or {}).items():
            z.writestr(zipfile.ZipInfo(f"png/{name}.png", stamp), data, compress_type=zipfile.ZIP_STORED)
        if readme is not None:
            z.writestr("README.txt", readme)
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else path


def read_meta(path: str | os.PathLike | IO[bytes]) -> dict:
    """The `meta` entry of a file `save_npz` wrote, as a dict."""
    with np.load(path) as d:
        return json.loads(str(d["meta"]))
