"""What the served app must answer, from the `attention` package's own results for the same input: the
oracle of the load and soak benches (bench_load) and of the abuse bench's kept passes."""

from __future__ import annotations

import threading

import numpy as np
from PIL import Image

from bench.common import DIGITS

_passes: dict[str, object] = {}
_lock = threading.Lock()


def reference_pass(path: str):
    from attention.vit.serve import passes

    with _lock:
        if path not in _passes:
            _passes[path] = passes.get_pass(path, "mnist_vit", "auto")
        return _passes[path]


def pixels(path: str, mode: str = "RGB") -> np.ndarray:
    return np.asarray(Image.open(path).convert(mode))


def check_maps(npz, path: str, query, layer: int, view: str) -> str | None:
    """What differs between a downloaded .npz and the package's pass of `path` at (query, layer), or None."""
    p, q = reference_pass(path), query or "cls"
    ref = p.at(q, layer)
    if not np.allclose(npz["maps"], ref.maps, rtol=0, atol=1e-5):
        return f"maps differ by up to {np.abs(npz['maps'] - ref.maps).max():.2e}"
    if view == "rollout" and not np.allclose(npz["rollout"], p.rollout(q, layer), rtol=0, atol=1e-5):
        return "rollout differs"
    if int(npz["layer"]) != ref.layer or npz["query"].tolist() != list(query or (-1, -1)):
        return f"layer/query {int(npz['layer'])}/{npz['query'].tolist()} != {ref.layer}/{query}"
    return None


def check(endpoint: str, p: dict, out) -> str | None:
    """None when the answer equals the package's own result for the same input, else what differs."""
    from attention import calculator, retrieval
    from attention.calculator import patches
    from attention.retrieval import panels

    if endpoint == "/attention_maps":
        sheet, npz, info = out
        return check_maps(np.load(npz), str(DIGITS[p["digit"]]), p["query"], p["layer"], p["view"]) or (
            None if info["view"] == p["view"] and Image.open(sheet).format == "PNG" else "info or sheet"
        )
    if endpoint in ("/retrieval_hard", "/retrieval_soft"):
        db, img, info = panels.database(p["n"], p["seed"]), pixels(out[-2], "L")[::8, ::8], out[-1]
        if endpoint == "/retrieval_hard":  # the retrieved digit is shown 8x: [::8, ::8] is the 28 x 28 digit
            lk = retrieval.hard_lookup(db, p["index"], p["shuffle_seed"])
            ok = (
                info["scores"] == lk.scores[0].tolist()
                and info["order"] == lk.order.tolist()
                and info["retrieved_equals_database_image"] is True
                and np.array_equal(img, db.images[p["index"]])
            )
        else:
            lk = retrieval.soft_lookup(db, p["d"], p["key_seed"], p["scale"])
            ok = np.allclose(info["weights"], lk.weights[0], rtol=1e-9, atol=0) and np.array_equal(
                img, lk.retrieved_images()[0]
            )
        return None if ok else "scores, weights, order or the retrieved image differ"
    if endpoint == "/calculate":
        Q, K, V = (np.array([[float(x) for x in row.split()] for row in p[k].split(";")]) for k in "QKV")
        s = calculator.attend(Q, K, V, calculator.Settings(heads=p["heads"], mask_mode=p["mask_mode"]))
        ok = (
            np.allclose(out["weights"], s.weights, rtol=1e-9, atol=1e-12)
            and np.allclose(out["output"], s.output, rtol=1e-9, atol=1e-12)
            and all(c["ok"] for c in out["checks"])
        )
        return None if ok else "weights or output differ, or a torch check failed"
    pv = patches.patch_view(str(DIGITS[p["digit"]]), p["patch"], p["heads"], p["seed"], p["index"])
    grid, maps, mats, info, index = out
    same = [np.array_equal(pixels(f), a) for f, a in ((grid, pv.grid), (maps, pv.maps), (mats, pv.matrices))]
    return (
        None if all(same) and info == pv.info and index["value"] == pv.index else f"images equal: {same}; info, index"
    )
