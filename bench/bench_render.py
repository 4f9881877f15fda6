"""Rendering cost of one view: PNG encoding (PIL vs attention.render.png_bytes) and a view's frames.

    python -m bench.bench_render [--repeats 15] [--image examples/photos/chelsea.jpg]

On one 480 px pass of a DINO ViT-S/16 architecture (random weights: rendering does not depend on
them), prints median times (interleaved rounds) and sizes for:
  - the 7 per-head overlay tiles encoded by PIL (PNG, compress_level=1) and by png_bytes;
  - the API's contact sheet encoded by PIL, by png_bytes, and by png_bytes in 2 deflate runs;
  - frames.tab_frame for the tab (7 gallery tiles, the query image) and frames.api_sheet for the API
    (the sheet and the .npz of raw arrays).
"""

from __future__ import annotations

import argparse
import io
import tempfile
from pathlib import Path

from bench.common import PHOTO, interleaved_medians, random_vit


def pil_png(img) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--image", default=str(PHOTO))
    args = ap.parse_args()

    import torch

    from attention.render import png_bytes
    from attention.vit.draw import frames, outputs, views
    from attention.vit.engine.extract import attention_maps
    from attention.vit.serve import passes

    model = random_vit()
    res = attention_maps(model, args.image, resolution=480)
    p = passes.Pass(key=("bench", "dino_vits16", "480"), model="dino_vits16", base=res, device="cpu")
    ts = views.tiles(res, "heads")
    sheet = outputs.sheet(views.tiles(res, "heads", shrink=views.sheet_shrink(res)))
    root = tempfile.mkdtemp(prefix="bench-render-")

    cases = {
        "7 tiles, PIL": lambda: [pil_png(t.image) for t in ts],
        "7 tiles, png_bytes": lambda: [png_bytes(t.image) for t in ts],
        "sheet, PIL": lambda: pil_png(sheet),
        "sheet, png_bytes": lambda: png_bytes(sheet),
        "sheet, png_bytes 2 runs": lambda: png_bytes(sheet, threads=2),
        "frame, tab": lambda: frames.tab_frame(p, root=root),
        "frame, API (sheet_only)": lambda: frames.api_sheet(p, root=root),
    }
    med = {k: v * 1000 for k, v in interleaved_medians(cases, args.repeats).items()}
    size = {k: sum(map(len, cases[k]())) / 1e6 for k in ["7 tiles, PIL", "7 tiles, png_bytes"]}
    size |= {k: len(cases[k]()) / 1e6 for k in ["sheet, PIL", "sheet, png_bytes", "sheet, png_bytes 2 runs"]}
    w, h = res.image.size
    print(
        f"input {Path(args.image).name} -> {w}x{h} px, {len(ts)} tiles of {w}x{h}, "
        f"sheet {sheet.shape[1]}x{sheet.shape[0]}; "
        f"torch threads {torch.get_num_threads()}; median of {args.repeats} interleaved rounds"
    )
    for k, v in med.items():
        extra = f", {size[k]:.2f} MB" if k in size else ""
        print(f"{k:28s} {v:7.1f} ms{extra}")
    print(
        f"ratio PIL / png_bytes, 7 tiles: {med['7 tiles, PIL'] / med['7 tiles, png_bytes']:.2f} "
        f"(size ratio {size['7 tiles, png_bytes'] / size['7 tiles, PIL']:.3f})"
    )
    print(f"ratio PIL / png_bytes in 2 runs, sheet: {med['sheet, PIL'] / med['sheet, png_bytes 2 runs']:.2f}")
    print(f"ratio frame tab / frame API: {med['frame, tab'] / med['frame, API (sheet_only)']:.2f}")


if __name__ == "__main__":
    main()
